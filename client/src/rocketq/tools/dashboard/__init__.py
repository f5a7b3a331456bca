"""rocketq's web console, modelled on RocketMQ Dashboard (``rocketq dashboard -n NAMESRV``).

It imports only :mod:`rocketq.client`: everything it shows or changes goes through the admin API
(:class:`~rocketq.client.admin.AsyncAdmin`) and a producer for test messages.  Modules:
:mod:`~rocketq.dashboard.app` (aiohttp routes, read-only mode and logins),
:mod:`~rocketq.dashboard.service` (admin results as JSON), :mod:`~rocketq.dashboard.sampler`
(TPS and lag history in a ring buffer), :mod:`~rocketq.dashboard.auth` (users file, scrypt
password hashes), :mod:`~rocketq.dashboard.cli` (the command line) and
:mod:`~rocketq.dashboard.launch` (start it as a child process); the front end is static HTML, CSS
and one vanilla JavaScript file under ``static/``.  See docs/observability.md, "Dashboard".
"""
