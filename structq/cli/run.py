"""``structq run PLAN.yaml``: execute a saved plan with no model (saved reports, cron)."""

from pathlib import Path
from typing import Annotated

import typer

from .common import console, errors_to_exit, make_agent, parse_vars, print_json, shared_options


@shared_options
def run(
    plan_file: Annotated[Path, typer.Argument(help="A plan as YAML or JSON (from `structq plan --json` or written by hand).", metavar="PLAN.yaml")],
    *, manifests, var, json_out, verbose,
) -> None:
    """Run a saved plan: every step through the sandbox, no language model involved.

    The run is written to the audit log like a question (STRUCTQ_AUDIT_LOG; STRUCTQ_AUDIT=0 turns it off).

    Output with --json: {"steps": [{"output_key", "source", "query", "params", "columns",
    "rows", "row_count", "truncated", "elapsed_ms", "startup_ms", ...}], "notes": [...]}.

    Example:  structq run reports/weekly.yaml --var tenant_id=7 --json
    """
    variables = parse_vars(var)
    with errors_to_exit(verbose):
        from .planfile import read_plan_file

        with make_agent(manifests, None, no_cache=True) as agent:  # the agent's path: audited
            result = agent.run(read_plan_file(plan_file), vars=variables).results
        if json_out:
            print_json(result.to_dict())
            return
        from .render import print_results

        print_results(console(), result)
