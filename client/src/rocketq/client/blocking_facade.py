"""blocking_method: the blocking twin of an asyncio method, for the blocking facades.

The blocking classes (:class:`~rocketq.client.api.BlockingMQClientAPI`,
:class:`~rocketq.client.producer.blocking.Producer`,
:class:`~rocketq.client.consumer.blocking.LitePullConsumer`) hold an asyncio object that lives on the
process's background loop (:mod:`rocketq.client.loop`), and most of their methods only run the
matching coroutine there and wait for it.  ``name = blocking_method(AsyncClass.name, "attr")``
builds such a method from the coroutine function itself, so the signature (typed through a
``ParamSpec``) and the docstring are written once, on the asyncio side.

The method is looked up by name on the wrapped object at call time, so a subclass's override
(or a test's replacement) of the asyncio method is what runs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from rocketq.client.loop import BackgroundLoop

__all__ = ["blocking_method"]

_P = ParamSpec("_P")
_T = TypeVar("_T")


class _OnLoop(Protocol):
    _loop: BackgroundLoop


def blocking_method(
    method: Callable[Concatenate[Any, _P], Coroutine[Any, Any, _T]], target: str
) -> Callable[Concatenate[_OnLoop, _P], _T]:
    """A method that runs ``getattr(self.<target>, method.__name__)(...)`` on ``self._loop``
    and returns its result (or raises its exception)."""
    name = method.__name__

    def call(self: _OnLoop, /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        coro: Coroutine[Any, Any, _T] = getattr(getattr(self, target), name)(*args, **kwargs)
        return self._loop.run(coro)

    # __name__ and __doc__ for help() and API docs; __wrapped__ lets inspect.signature show
    # the asyncio method's parameters instead of (*args, **kwargs).
    return functools.update_wrapper(call, method, assigned=("__name__", "__doc__"), updated=())
