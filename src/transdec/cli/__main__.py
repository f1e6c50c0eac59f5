"""``python -m transdec.cli``: the command line (``python -m transdec``, the ``transdec`` script, adds one-line
handling of Ctrl-C while it starts and of a closed output pipe)."""

import sys

from transdec.cli import main

if __name__ == "__main__":  # imported (as the import-layer test imports every module) it runs nothing
    sys.exit(main())
