"""The dashboard's web application (aiohttp): HTML pages, static files and the JSON API.

Pages (``/``, ``/topics``, ``/groups``, ``/messages``) all serve the same ``index.html``; the
small script ``app.js`` reads the path and renders the page from the JSON API under ``/api``:

=======  ==========================================  ==========================================
method   path                                        answer
=======  ==========================================  ==========================================
GET      /api/config                                 read-only flag, login settings, trace support
GET      /api/whoami                                 the user of the Authorization header, or 401
GET      /api/cluster                                brokers: role, address, version, disk, TPS, lag
GET      /api/history                                sampled TPS per broker and lag per group
GET      /api/topics                                 topic names
GET      /api/topics/{topic}                         route and queue min/max offsets
POST     /api/topics                                 create ``{topic, read_queue_nums, write_queue_nums}``
POST     /api/topics/{topic}/messages                send a test message ``{body, tags, keys}``
GET      /api/groups                                 groups with members and total lag
GET      /api/groups/{group}                         connections, subscriptions, lag per queue, POP in flight
POST     /api/groups/{group}/reset-offset            ``{topic, timestamp_ms}``
GET      /api/messages?topic=&key=                   by key (also ``?msg_id=[&topic=]``,
                                                     ``?topic=&begin_ms=&end_ms=&max=``)
GET      /api/trace/{msg_id}?trace_topic=            the message's trace records
=======  ==========================================  ==========================================

State changes (every method but GET/HEAD) pass :func:`guard`: refused with 403 in read-only mode,
with 401 unless the request carries a valid ``Authorization: Basic`` header of a user of the users
file.  The ``WWW-Authenticate`` challenge is sent only to clients that are not the page's own
script (which sends ``X-Requested-With``), so a browser does not pop up its own password dialog
over the page's login form.  Errors are JSON ``{"error": ...}`` saying what was wrong.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from rocketq.client.errors import MQClientError, NoRouteError, RocketQError
from rocketq.tools.dashboard.auth import UserStore
from rocketq.tools.dashboard.service import DashboardService, Json

__all__ = ["DashboardSettings", "make_app"]

log = logging.getLogger(__name__)
STATIC_DIR = Path(__file__).resolve().parent / "static"
PAGES = ("/", "/topics", "/groups", "/messages")
_READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_MAX_SEARCH = 256
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True, kw_only=True)
class DashboardSettings:
    namesrv_addr: str
    read_only: bool = False
    users: UserStore | None = None
    sample_interval_s: float = 5.0


SETTINGS = web.AppKey("settings", DashboardSettings)
SERVICE = web.AppKey("service", DashboardService)


def _error(status: int, message: str, *, challenge: bool = False) -> web.Response:
    headers = {"WWW-Authenticate": 'Basic realm="rocketq dashboard"'} if challenge else None
    return web.json_response({"error": message}, status=status, headers=headers)


def _bad(message: str) -> web.HTTPBadRequest:
    """A 400 with a JSON ``{"error": message}`` body, to raise."""
    return web.HTTPBadRequest(text=json.dumps({"error": message}), content_type="application/json")


def _user(request: web.Request) -> str | None:
    users = request.app[SETTINGS].users
    return users.check(request.headers.get("Authorization")) if users is not None else None


@web.middleware
async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Read-only mode and logins for state changes; admin errors as JSON."""
    settings = request.app[SETTINGS]
    challenge = request.headers.get("X-Requested-With") is None
    if request.method not in _READ_METHODS:
        if settings.read_only:
            return _error(
                403, "the dashboard runs in read-only mode (--read-only): state changes are refused"
            )
        if settings.users is None or not settings.users.users:
            return _error(
                401,
                "state changes need a login, and this dashboard has no users: start it with "
                "--users users.yml (passwords from 'rocketq dashboard hash-password')",
            )
        if _user(request) is None:
            return _error(
                401, "state changes need a login: give a user name and password", challenge=challenge
            )
    elif settings.users is not None and settings.users.login_required_for_reads:
        if request.path.startswith("/api/") and request.path != "/api/config" and _user(request) is None:
            return _error(401, "this dashboard requires a login to read", challenge=challenge)
    try:
        return await handler(request)
    except web.HTTPException:
        raise
    except (NoRouteError, MQClientError) as exc:
        return _error(404 if isinstance(exc, NoRouteError) else 400, str(exc))
    except RocketQError as exc:
        return _error(502, f"the cluster answered with an error: {exc}")


async def _body(request: web.Request) -> dict[str, Any]:
    try:
        doc = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise _bad(f"the body must be JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise _bad("the body must be a JSON object")
    return doc


def _int(value: object, name: str, *, low: int | None = None, high: int | None = None) -> int:
    try:
        n = int(str(value))
    except ValueError:
        raise _bad(f"{name} must be an integer, got {value!r}") from None
    if (low is not None and n < low) or (high is not None and n > high):
        raise _bad(f"{name} must be in [{low}, {high}], got {n}")
    return n


def _ok(doc: Json) -> web.Response:
    return web.json_response(doc)


async def page(request: web.Request) -> web.FileResponse:
    return web.FileResponse(STATIC_DIR / "index.html")


async def config(request: web.Request) -> web.Response:
    settings = request.app[SETTINGS]
    reason = DashboardService.traces_unavailable()
    return _ok(
        {
            "namesrv": settings.namesrv_addr,
            "read_only": settings.read_only,
            "users_configured": bool(settings.users and settings.users.users),
            "login_required_for_reads": bool(settings.users and settings.users.login_required_for_reads),
            "traces": not reason,
            "traces_reason": reason,
        }
    )


async def whoami(request: web.Request) -> web.Response:
    user = _user(request)
    if user is None:
        return _error(
            401, "wrong user name or password", challenge=request.headers.get("X-Requested-With") is None
        )
    return _ok({"user": user})


async def cluster(request: web.Request) -> web.Response:
    return _ok(await request.app[SERVICE].cluster())


async def history(request: web.Request) -> web.Response:
    return _ok(request.app[SERVICE].history())


async def topics(request: web.Request) -> web.Response:
    return _ok(await request.app[SERVICE].topics())


async def topic(request: web.Request) -> web.Response:
    return _ok(await request.app[SERVICE].topic(request.match_info["topic"]))


async def create_topic(request: web.Request) -> web.Response:
    doc = await _body(request)
    name = str(doc.get("topic") or "").strip()
    if not name:
        raise _bad("give the topic name")
    reads = _int(doc.get("read_queue_nums", 8), "read_queue_nums", low=1, high=1024)
    writes = _int(doc.get("write_queue_nums", reads), "write_queue_nums", low=1, high=1024)
    return _ok(await request.app[SERVICE].create_topic(name, reads, writes))


async def send_message(request: web.Request) -> web.Response:
    doc = await _body(request)
    body = str(doc.get("body") or "")
    if not body:
        raise _bad("give the message body")
    tags, keys = doc.get("tags"), doc.get("keys")
    return _ok(
        await request.app[SERVICE].send_test_message(
            request.match_info["topic"], body, str(tags) if tags else None, str(keys) if keys else None
        )
    )


async def groups(request: web.Request) -> web.Response:
    return _ok(await request.app[SERVICE].groups())


async def group(request: web.Request) -> web.Response:
    return _ok(await request.app[SERVICE].group(request.match_info["group"]))


async def reset_offset(request: web.Request) -> web.Response:
    doc = await _body(request)
    name = str(doc.get("topic") or "")
    if not name:
        raise _bad("give the topic whose offsets to reset")
    ts = _int(doc.get("timestamp_ms"), "timestamp_ms", low=-1)
    return _ok(await request.app[SERVICE].reset_offset(request.match_info["group"], name, ts))


async def messages(request: web.Request) -> web.Response:
    q = request.query
    svc = request.app[SERVICE]
    name = q.get("topic", "").strip()
    if q.get("msg_id"):
        return _ok(await svc.message_by_id(q["msg_id"].strip(), name or None))
    if not name:
        raise _bad("give a topic (with a key or a time range), or a msg_id")
    if q.get("key"):
        return _ok(await svc.messages_by_key(name, q["key"].strip()))
    if "begin_ms" in q or "end_ms" in q:
        end = _int(q.get("end_ms", svc.now_ms()), "end_ms", low=0)
        begin = _int(q.get("begin_ms", end - 3_600_000), "begin_ms", low=0, high=end)
        limit = _int(q.get("max", 64), "max", low=1, high=_MAX_SEARCH)
        return _ok(await svc.messages_by_time(name, begin, end, limit))
    raise _bad("give a key, a msg_id or begin_ms/end_ms")


async def trace(request: web.Request) -> web.Response:
    return _ok(
        await request.app[SERVICE].trace(request.match_info["msg_id"], request.query.get("trace_topic"))
    )


async def _start_service(app: web.Application) -> None:
    settings = app[SETTINGS]
    app[SERVICE] = DashboardService(settings.namesrv_addr, sample_interval_s=settings.sample_interval_s)
    app[SERVICE].sampler.start()


async def _stop_service(app: web.Application) -> None:
    await app[SERVICE].close()


def make_app(settings: DashboardSettings) -> web.Application:
    app = web.Application(middlewares=[guard], client_max_size=1024 * 1024)
    app[SETTINGS] = settings
    app.on_startup.append(_start_service)
    app.on_cleanup.append(_stop_service)
    for path in PAGES:
        app.router.add_get(path, page)
    app.router.add_static("/static/", STATIC_DIR)
    r = app.router
    r.add_get("/api/config", config)
    r.add_get("/api/whoami", whoami)
    r.add_get("/api/cluster", cluster)
    r.add_get("/api/history", history)
    r.add_get("/api/topics", topics)
    r.add_post("/api/topics", create_topic)
    r.add_get("/api/topics/{topic}", topic)
    r.add_post("/api/topics/{topic}/messages", send_message)
    r.add_get("/api/groups", groups)
    r.add_get("/api/groups/{group}", group)
    r.add_post("/api/groups/{group}/reset-offset", reset_offset)
    r.add_get("/api/messages", messages)
    r.add_get("/api/trace/{msg_id}", trace)
    return app
