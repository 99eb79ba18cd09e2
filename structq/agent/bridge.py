"""Running the async core from synchronous callers, wherever they are.

``asyncio.run`` refuses to start inside a running event loop (a notebook, an async web
handler, an async LangChain agent calling a sync tool). There the coroutine runs on a worker
thread with its own loop, keeping the caller's context variables (LangChain callbacks, tracing).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["block_on"]

T = TypeVar("T")


def _in_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def block_on(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run the coroutine ``make()`` to completion and return its result."""
    if not _in_event_loop():
        return asyncio.run(make())
    context = contextvars.copy_context()
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(context.run, lambda: asyncio.run(make())).result()
