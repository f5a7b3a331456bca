"""Errors raised by the controller.

Outcomes a broker or admin expects (a fenced epoch, no quorum, not the leader) are answered with
the ``CONTROLLER_*`` response codes, not raised; these exceptions cover bad configuration and a
Raft node that cannot start.
"""

from __future__ import annotations

from rocketq.client.errors import RocketQError


class ControllerError(RocketQError):
    """Root of the controller's errors."""


class ControllerConfigError(ControllerError):
    """A controller setting or the controller.conf file is invalid."""
