"""``python -m rocketq.tools.dashboard``: the same as ``rocketq dashboard``."""

import sys

from rocketq.tools.dashboard.cli import main

sys.exit(main())
