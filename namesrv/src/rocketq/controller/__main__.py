"""``python -m rocketq.controller``: the same as the ``mqcontroller`` command."""

from __future__ import annotations

import sys

from rocketq.controller.cli import main

if __name__ == "__main__":
    sys.exit(main())
