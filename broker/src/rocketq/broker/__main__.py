"""``python -m rocketq.broker``: the same as ``mqbroker``."""

from __future__ import annotations

import sys

from rocketq.broker.cli import main

sys.exit(main())
