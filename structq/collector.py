"""Pausing Python's cyclic garbage collector while long-lived objects are built.

Loading a catalogue builds hundreds of thousands of objects at once (YAML nodes, validated
manifests, the linking index read back), none of them garbage: they live as long as the
process. The collector starts a pass every few hundred new container objects, and each
older-generation pass walks everything built so far again, which made loading superlinear:
two thirds of loading a 1,000-table manifest, and reading a 10,000-table index back took
0.46-0.73 s with it running against 0.19-0.25 s paused. Reference counting still frees
everything that is not in a cycle while the collector is paused.

Resuming alone is not enough: the paused collector still counts allocations, so the first one
after the load would start a young-generation collection over every object the load kept
(~0.03 s at 1,000 tables, and again when they reached the middle generation). So the
survivors are moved to the oldest generation first (``_age_survivors``).

The collector's switch is process-wide, and a server loads catalogues from several threads:
pauses are counted, the first one switches the collector off (if it was on), the last one to
end switches it back on.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collector_paused"]

_lock = threading.Lock()
_pauses = 0
_was_running = False


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off for the duration (see the module's docstring)."""
    global _pauses, _was_running
    with _lock:
        if _pauses == 0:
            _was_running = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _lock:
            _pauses -= 1
            if _pauses == 0 and _was_running:
                _age_survivors()
                gc.enable()


def _age_survivors() -> None:
    """Move every object the collector tracks to its oldest generation and reset the young
    generation's count: ``gc.freeze()`` then ``gc.unfreeze()``, two list splices (O(1)).
    Nothing is exempted from collection for good: a full collection still looks at all of
    them. Skipped when the process froze objects itself (unfreezing would release those)."""
    if gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()
