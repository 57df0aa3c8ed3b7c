"""``python -m hpsearch``: the same command as ``hpsearch``."""

import sys

from hpsearch.cli import main

sys.exit(main())
