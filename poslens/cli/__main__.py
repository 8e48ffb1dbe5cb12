"""``python -m poslens.cli``: the command line (as ``poslens`` and ``python -m poslens``)."""

import sys

from poslens.cli import main

sys.exit(main())
