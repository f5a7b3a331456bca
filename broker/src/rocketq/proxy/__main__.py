"""``python -m rocketq.proxy``: the same as the ``mqproxy`` command."""

from __future__ import annotations

import sys

from rocketq.proxy.cli import main

if __name__ == "__main__":
    sys.exit(main())
