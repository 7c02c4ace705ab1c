"""What a long step is doing now (a build, a load), told to whoever asked: `ol check`'s progress, or no one.

Library code calls `say("building")`; the CLI wraps a run in `reporting(callback)`. A context variable:
each of ol grade's threads reaches its own listener, and code that runs with none says nothing.
"""

from __future__ import annotations

import contextlib
from contextvars import ContextVar
from typing import Callable, Iterator

_listener: ContextVar[Callable[[str], None] | None] = ContextVar("ol_stage_listener", default=None)


def say(what: str) -> None:
    listener = _listener.get()
    if listener is not None:
        listener(what)


@contextlib.contextmanager
def reporting(listener: Callable[[str], None] | None) -> Iterator[None]:
    token = _listener.set(listener)
    try:
        yield
    finally:
        _listener.reset(token)
