"""``python -m rocketq.dashboard``: the same as ``rocketq dashboard``."""

import sys

from rocketq.dashboard.cli import main

sys.exit(main())
