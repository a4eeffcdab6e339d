"""``python -m psnlib train ...`` / ``python -m psnlib eval ...`` (``psnlib.replication.cli``)."""

from psnlib.replication.cli import main

if __name__ == "__main__":
    main()
