"""``python -m psnlib train ...`` / ``python -m psnlib eval ...`` (``psnlib.cli``)."""

from psnlib.cli import main

if __name__ == "__main__":
    main()
