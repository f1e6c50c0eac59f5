"""The ``transdec`` command: the command line, PyTorch and all, is imported inside the interrupt handler, so that
Ctrl-C while it starts ends with one line and exit code 130, as it does later."""

from __future__ import annotations

import sys


def main() -> int:
    try:
        from transdec.cli import main as run
    except KeyboardInterrupt:
        print("transdec: interrupted", file=sys.stderr)
        return 130
    try:
        return run()
    except BrokenPipeError:  # the reader went away (`transdec ... | head`): nothing left to say
        sys.stderr.close()
        return 141


if __name__ == "__main__":
    sys.exit(main())
