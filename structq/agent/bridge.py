"""Running the async core from synchronous callers, on their own thread.

The agent has one core, a coroutine (``Agent._respond``), and it suspends in one place only:
``Engine.call``, which hands a blocking call (a plan's run, the model, the answer) to the
engine's call pool so that an event loop keeps serving other questions meanwhile. A
synchronous caller (``Agent.ask``, ``Agent.run``, ``structq run``) has no loop to keep serving:
``block_on`` drives the coroutine on the caller's thread, and while it does, ``Engine.call``
makes each call right there (``driven_here``). So a synchronous question starts no event loop
and no thread (nor imports asyncio), runs with the caller's context variables (LangChain
callbacks, tracing), and works the same inside a running event loop (a notebook, an async web
handler, an async LangChain agent calling a sync tool), which ``asyncio.run`` refuses.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["block_on", "driven_here", "call_here"]

T = TypeVar("T")

#: Set while ``block_on`` drives a coroutine on this thread (and reset inside each call it makes).
_DRIVEN: contextvars.ContextVar[bool] = contextvars.ContextVar("structq_driven_here", default=False)


def driven_here() -> bool:
    """Whether the running coroutine is driven by ``block_on`` on this thread: an awaited
    call can then be made at once, there being no event loop to keep free."""
    return _DRIVEN.get()


def call_here(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` on this thread, in a copy of the current context as
    ``Engine.call`` runs it on the call pool (what it sets stays its own), and not driven by
    ``block_on`` (an event loop it starts is its own)."""
    context = contextvars.copy_context()
    context.run(_DRIVEN.set, False)
    return context.run(fn, *args, **kwargs)


def block_on(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run the coroutine ``make()`` to completion on this thread and return its result, in a
    copy of the caller's context as ``asyncio.run`` would (what the core sets does not leak to
    the caller). It must await nothing but ``Engine.call`` (and coroutines that do the same):
    anything else would need an event loop, and is a bug this says."""
    context = contextvars.copy_context()
    context.run(_DRIVEN.set, True)
    coroutine = context.run(make)
    try:
        awaited = context.run(coroutine.send, None)
    except StopIteration as finished:
        return finished.value
    coroutine.close()
    raise RuntimeError(f"the agent's core awaited {awaited!r}, not Engine.call: it cannot be driven "
                       "without an event loop")
