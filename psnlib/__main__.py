"""``python -m psnlib train ...`` / ``python -m psnlib eval ...``
(``psnlib.replication.compute.cli``).

Output into a pipe that its reader closed (``python -m psnlib --help | head``) ends quietly, as
other command-line tools do, not in a BrokenPipeError traceback."""

import os
import sys

from psnlib.replication.compute.cli import main

if __name__ == "__main__":
    try:
        main()
    except BrokenPipeError:
        # Python's own flush of stdout at exit would fail again: point it at /dev/null first.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
