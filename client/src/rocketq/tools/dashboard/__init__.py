"""rocketq's web console, modelled on RocketMQ Dashboard (``rocketq dashboard -n NAMESRV``).

It imports only :mod:`rocketq.client`: everything it shows or changes goes through the admin API
(:class:`~rocketq.client.admin.AsyncAdmin`) and a producer for test messages.  Modules:
:mod:`~rocketq.tools.dashboard.app` (aiohttp routes, read-only mode and logins),
:mod:`~rocketq.tools.dashboard.service` (admin results as JSON), :mod:`~rocketq.tools.dashboard.sampler`
(TPS and lag history in a ring buffer), :mod:`~rocketq.tools.dashboard.auth` (users file, scrypt
password hashes), :mod:`~rocketq.tools.dashboard.cli` (the command line) and
:mod:`~rocketq.tools.dashboard.launch` (start it as a child process); the front end is static HTML, CSS
and one vanilla JavaScript file under ``static/``.  See docs/observability.md, "Dashboard".
"""
