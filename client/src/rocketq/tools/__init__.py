"""rocketq.tools — programs built on the public client API, not parts of any server.

:mod:`rocketq.tools.dashboard` is the web console (``rocketq dashboard``) and
:mod:`rocketq.tools.dev` the ``rocketq`` command (``rocketq dev`` starts a NameServer, brokers and
the dashboard as processes through :mod:`rocketq.client.launcher`).  Like any application they
import only :mod:`rocketq.client` (never ``rocketq.client``'s server half :mod:`rocketq.server`,
nor the broker, NameServer, controller or connector), which the dependency test enforces: what
they do, a user's program can do too.  They live in the client distribution folder because they
ship with it and need nothing else.
"""
