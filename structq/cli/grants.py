"""``structq grants``: print the least-privilege SQL for one source's database account."""

from typing import Annotated

import typer

from .common import EXIT_USAGE, errors_to_exit, fail, load_capabilities, shared_options

_DEFAULT_ROLE = "structq_reader"  # structq.executors.sql.grants.DEFAULT_ROLE, without importing sqlglot for --help


@shared_options
def grants(
    *,
    source: Annotated[str, typer.Option("--source", help="The SQL source to write grants for.")],
    role: Annotated[str, typer.Option("--role", help="The database role (PostgreSQL) or user (MariaDB/MySQL) "
                                                     "structq connects as.")] = _DEFAULT_ROLE,
    host: Annotated[str, typer.Option("--host", help="MariaDB/MySQL only: the account's host part "
                                                     "('%' = from anywhere).")] = "%",
    manifests, verbose,
) -> None:
    """Print the SQL that gives structq's database account read access to what the source's
    manifest declares, and nothing else. Nothing is executed: review the script, then apply it.

    PostgreSQL: the role (created if missing, read-only sessions), CONNECT, USAGE on the
    schema, every earlier table privilege taken back, then SELECT on the declared, non-denied
    columns of each declared table; each row filter becomes a row-level security policy that
    reads the caller's variables from structq.<variable>, which structq sets per transaction.
    MariaDB/MySQL: the account and column-level SELECT grants (no row-level security there).
    SQLite: a note (file permissions and mode=ro are all there is). Running a script again
    gives exactly the current manifest's grants. `structq check --connect` audits the result.

    Example:  structq grants --source shop -m capabilities > grants.sql

    Example:  structq grants --source hr --role hr_reader --host 10.0.0.% | mariadb -u root
    """
    from structq.executors.sql.grants import grants_sql

    with errors_to_exit(verbose):
        caps = load_capabilities(manifests)
        manifest = caps.get(source)
        if manifest is None:
            fail(f"no manifest for source {source!r}", hint="sources: " + ", ".join(m.source for m in caps),
                 code=EXIT_USAGE)
        typer.echo(grants_sql(manifest, role=role, host=host), nl=False)
