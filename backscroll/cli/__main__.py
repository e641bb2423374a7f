"""`python -m backscroll.cli` (the operator's Jobs and the tests run the command this way)."""

import sys

from . import main

if __name__ == "__main__":  # not when a test imports every module of the tree
    sys.exit(main())
