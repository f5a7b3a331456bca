"""blocking_method: the blocking twin of an asyncio method, for the blocking facades.

The blocking classes (:class:`~rocketq.client.api.BlockingMQClientAPI`,
:class:`~rocketq.client.producer.blocking.Producer`,
:class:`~rocketq.client.consumer.blocking.LitePullConsumer`) hold an asyncio object that lives on the
process's background loop (:mod:`rocketq.client.loop`), and most of their methods only run the
matching coroutine there and wait for it.  ``name = blocking_method(AsyncClass.name, "attr")``
builds such a method from the coroutine function itself, so the signature (typed through a
``ParamSpec``) and the docstring are written once, on the asyncio side.

The method is looked up by name on the wrapped object at call time, so a subclass's override
(or a test's replacement) of the asyncio method is what runs.  :class:`BlockingConsumerFacade` is
the rest a blocking POP consumer shares: building its asyncio consumer on the loop, a shutdown
that runs once and releases the loop, and the context manager.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, Self, TypeVar

from rocketq.client.loop import BackgroundLoop, acquire_loop, release_loop

__all__ = ["BlockingConsumerFacade", "blocking_method"]

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


class _Stoppable(Protocol):
    async def shutdown(self) -> None: ...


_C = TypeVar("_C", bound=_Stoppable)


class BlockingConsumerFacade(Generic[_C]):
    """A blocking consumer around an asyncio one (``_consumer``, built by ``make`` on the
    process's background loop): ``shutdown()`` runs the asyncio shutdown once (at most 60 s) and
    releases the loop; ``with`` starts and shuts down (subclasses provide ``start``)."""

    _loop: BackgroundLoop
    _consumer: _C

    def __init__(self, make: Callable[[], _C]) -> None:
        self._loop = acquire_loop()
        self._released = False

        async def build() -> _C:
            return make()

        try:
            self._consumer = self._loop.run(build())
        except BaseException:
            self._release()
            raise

    @property
    def async_consumer(self) -> _C:
        return self._consumer

    def start(self) -> None:
        raise NotImplementedError

    def shutdown(self) -> None:
        if self._released:
            return
        try:
            self._loop.run(self._consumer.shutdown(), 60.0)
        finally:
            self._release()

    def _release(self) -> None:
        if not self._released:
            self._released = True
            release_loop(self._loop)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
