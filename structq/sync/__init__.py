"""Schema sync: keep capability manifests true to their databases without losing what people wrote.

The pipeline, one module per step::

    introspect.py  source → Snapshot (neutral frozen dataclasses, snapshot.py)
    diff.py        manifest + Snapshot → SourceDiff (added / dropped / changed / filled / warnings)
    deny.py        new members that look secret or personal → ``access: deny`` (sensitive.py rules)
    coverage.py    date columns: the period covered and the stored format (refreshed, not drift)
    profile.py     optional: suggest ``values`` for coded text columns (never keys, secrets, prose)
    merge.py       SourceDiff → edited YAML text (yamledit.py splices text; nothing re-dumped)
    job.py         the above for one file, with the merged text checked before any write
    history.py     atomic replace, ``.history/<source>/<UTC timestamp>.yaml``, rollback
    verify.py      ``structq check --connect``: declared objects the source lacks
    init.py        ``structq init``: a sync of a seed manifest that declares nothing yet
    describe.py    ``structq describe``: a model drafts descriptions (reached through a callable)

Stored values are read only through samples.py (read-only, time-limited sessions of connect.py).
"""

from .diff import Change, Denial, Proposal, SourceDiff, diff_manifest
from .history import HistoryError, Version, atomic_write, list_versions, rollback
from .init import InitResult, init_manifest
from .introspect import introspect
from .snapshot import Scope
from .job import SyncError, SyncPlan, plan_sync, write_sync
from .merge import merge_text
from .snapshot import DbObject, Member, Snapshot
from .verify import missing_objects
from .yamledit import YamlEditError

__all__ = [
    "Change",
    "DbObject",
    "Denial",
    "HistoryError",
    "InitResult",
    "Member",
    "Proposal",
    "Scope",
    "Snapshot",
    "SourceDiff",
    "SyncError",
    "SyncPlan",
    "Version",
    "YamlEditError",
    "atomic_write",
    "diff_manifest",
    "init_manifest",
    "introspect",
    "list_versions",
    "merge_text",
    "missing_objects",
    "plan_sync",
    "rollback",
    "write_sync",
]
