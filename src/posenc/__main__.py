"""``python -m posenc``: the ``posenc`` command line (as ``python -m posenc.cli``)."""

import sys

from .cli import main

sys.exit(main())
