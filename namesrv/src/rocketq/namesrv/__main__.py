"""``python -m rocketq.namesrv``: the same as the ``mqnamesrv`` command."""

from __future__ import annotations

import sys

from rocketq.namesrv.cli import main

if __name__ == "__main__":
    sys.exit(main())
