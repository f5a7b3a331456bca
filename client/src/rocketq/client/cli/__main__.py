"""``python -m rocketq.client.cli``: runs mqadmin (:func:`rocketq.client.cli.mqadmin.main`)."""

import sys

from rocketq.client.cli.mqadmin import main

sys.exit(main())
