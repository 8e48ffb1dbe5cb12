"""``python -m poslens.known_results RUN [--keep DIR] [--readme README.md]``."""

import sys

from poslens.known_results.render import main

sys.exit(main())
