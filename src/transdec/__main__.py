"""``python -m transdec``: the ``transdec`` command."""

import sys

from transdec.console import main

sys.exit(main())
