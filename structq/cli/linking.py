"""``structq plan --explain-linking``: what schema linking keeps for a question, and why."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

    from structq.linking import Selection


def print_linking(out: "Console", selection: "Selection") -> None:
    """Matched values, then each kept table with its reasons and its shown columns."""
    if not selection.pruned:
        out.print(f"not pruned: the whole catalogue (~{selection.full_tokens} tokens) fits the budget of "
                  f"{selection.budget.prompt_tokens}; every table is shown", markup=False)
    else:
        out.print(f"kept {len(selection.kept)} tables, ~{selection.tokens} of {selection.full_tokens} tokens "
                  f"({selection.seconds * 1000:.1f} ms)", markup=False)
    if not selection.confident:
        out.print("not confident: " + "; ".join(selection.confidence.reasons), markup=False)
    for m in selection.matches:
        out.print(f"value  {m.describe()}", markup=False)
    if selection.pruned:
        for kept in selection.kept.values():
            out.print(f"table  {kept.entity.label}: {'; '.join(kept.reasons)}", markup=False)
            if kept.members is None:
                out.print("         columns: all", markup=False)
            else:
                for name, why in kept.members.items():
                    out.print(f"         {name}: {', '.join(why)}", markup=False)
    for note in selection.notes:
        out.print(f"note   {note}", markup=False)
