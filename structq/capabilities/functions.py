"""Functions a manifest's ``functions:`` list may never add to the sandbox's allowlist.

The sandbox allows a per-dialect list of harmless functions; ``functions:`` widens it for one
source (``julianday``, a UDF that formats a code). Widening it with a function that reads
files, writes, reaches the network, runs SQL text, sleeps, takes locks or changes the session
would turn a read-only sandbox into something else, so such names are refused when the
manifest loads, with the reason. Matching is by family (prefixes and patterns), not one name
at a time: ``pg_read_binary_file`` is refused because ``pg_read_file`` is.
"""

from __future__ import annotations

import functools
import re

__all__ = ["unsafe_reason", "UNSAFE_FUNCTIONS"]

#: (pattern over the lower-case name without schema, what the function does).
UNSAFE_FUNCTIONS: tuple[tuple[str, str], ...] = (
    (r"load_extension|load_file|readfile|writefile|edit|fts3_tokenizer",
     "reads or writes files, or loads code, on the database server"),
    (r"pg_read_(binary_)?file|pg_ls_\w+|pg_stat_file|pg_file_\w+|pg_logdir_ls|pg_logfile_\w*|lo_\w+",
     "reads or writes files on the database server"),
    (r"utl_(file|http|tcp|smtp|inaddr|mail)\w*|dbms_\w+|xp_\w+|sp_\w+|sys_\w+|openrowset|opendatasource|openquery",
     "reaches the file system, the network or the operating system"),
    (r"dblink\w*|http_\w+|url|remote|remotesecure|s3\w*|hdfs|mysql|postgresql|jdbc|odbc|file|cluster\w*|"
     r"postgres_fdw\w*|fdw_\w+",
     "opens connections to other servers or reads files"),
    (r"query_to_\w+|cursor_to_\w+|table_to_\w+|schema_to_\w+|database_to_\w+|exec\w*|eval\w*|"
     r"pg_execute\w*|sp_executesql",
     "runs SQL text it is given, which the sandbox never sees"),
    (r"nextval|setval|lastval|pg_advisory\w*|get_lock|release_lock|release_all_locks|is_free_lock|is_used_lock",
     "writes (sequences) or takes locks"),
    (r"set_config|current_setting|pg_reload_conf|pg_rotate_logfile|pg_switch_\w+|pg_terminate_backend|"
     r"pg_cancel_backend|pg_notify|pg_promote|pg_create_\w+|pg_drop_\w+|pg_replication_\w+",
     "reads or changes server settings or other sessions"),
    (r"pg_sleep\w*|sleep|benchmark|randomblob|zeroblob",
     "can stall the server or allocate without bound"),
)


@functools.cache
def _compiled() -> tuple[tuple[re.Pattern[str], str], ...]:
    """``UNSAFE_FUNCTIONS`` compiled, on first use: only a manifest that adds functions asks."""
    return tuple((re.compile(rf"(?:{pattern})"), reason) for pattern, reason in UNSAFE_FUNCTIONS)


def unsafe_reason(name: str) -> str | None:
    """Why ``name`` may not be added to the allowlist, or None when it may."""
    bare = name.strip().lower().rsplit(".", 1)[-1].strip('"`[]')
    for pattern, reason in _compiled():
        if pattern.fullmatch(bare):
            return reason
    return None
