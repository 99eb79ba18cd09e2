"""What the API sandboxes share: the refusal of one source, and the values a step hands over
(a GraphQL step's ``variables``, a REST step's ``params``) with references and slots resolved.

A value that is exactly ``"<key>"`` / ``"<key.column>"`` stands for the earlier step's column
(a list: ``Engine`` resolved it); exactly ``":name"`` for a template plan's slot value. Text
around a reference is refused, as in a search body: an earlier result's value never becomes
part of a string the plan wrote.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from structq.capabilities.references import REFERENCE, value_reference
from structq.errors import PlanError, SandboxViolation

__all__ = ["UNCHECKED", "Refuse", "ResolvedValue", "Unchecked", "caller_value", "is_unchecked", "resolve_values"]


class Unchecked(str):
    """The stand-in for a reference's values when a plan is checked before any step has run
    (``structq check`` on verified examples): ``"0"`` to every sandbox, so a SQL or search
    query's shape is checked as usual; the API sandboxes check the parameter or variable it
    fills — its name, where it goes, its declared type, the fan-out — but not the value, which
    only the earlier step's rows will give (an ``enum`` would refuse ``"0"``)."""

    __slots__ = ()


#: The one stand-in value (``params={"<p.status>": [UNCHECKED]}``).
UNCHECKED = Unchecked("0")


def is_unchecked(value: Any) -> bool:
    """Whether ``value`` (or every item of a list) is the stand-in, not a real value."""
    if isinstance(value, list):
        return bool(value) and all(isinstance(v, Unchecked) for v in value)
    return isinstance(value, Unchecked)


class Refuse:
    """Raises the ``SandboxViolation`` of one source (``refuse(code, message, hint)``)."""

    def __init__(self, source: str) -> None:
        self.source = source

    def __call__(self, code: str, message: str, hint: str | None = None) -> NoReturn:
        raise SandboxViolation(code, message, hint=hint, source=self.source)


class ResolvedValue:
    """A value of a step's variables or params: ``value`` as it will be sent, and
    ``reference`` when it came from an earlier step (then ``value`` is the list of values)."""

    __slots__ = ("reference", "value")

    def __init__(self, value: Any, reference: str | None = None) -> None:
        self.value = value
        self.reference = reference


def _scalar_or_list(value: Any) -> bool:
    if isinstance(value, (list, tuple)):
        return all(v is None or isinstance(v, (str, int, float, bool)) for v in value)
    return value is None or isinstance(value, (str, int, float, bool))


def resolve_values(values: Mapping[str, Any] | None, refuse: Refuse, *, what: str,
                   params: Mapping[str, Sequence[Any]], slots: Mapping[str, Any]) -> dict[str, ResolvedValue]:
    """``values`` with every reference and slot replaced; a nested object (which a plan could
    use to pass options past the checks) and text around a reference are refused."""
    resolved: dict[str, ResolvedValue] = {}
    for name, value in (values or {}).items():
        if not isinstance(name, str):
            refuse("invalid_variable", f"{what} names must be text, not {name!r}")
        ref = value_reference(value)
        if ref is not None:
            if ref.text not in params:
                raise PlanError(f"reference {ref} has no values", hint="references name earlier steps' results")
            resolved[name] = ResolvedValue(list(params[ref.text]), ref.text)
            continue
        if isinstance(value, str) and value.startswith(":") and value[1:] in slots:
            resolved[name] = ResolvedValue(slots[value[1:]])
            continue
        if isinstance(value, str) and REFERENCE.search(value):
            refuse("invalid_variable", f"{what} {name!r}: a reference must be the whole value, not part of {value!r}",
                   hint='write "<key.column>" as the value; each value is sent as it is')
        if not _scalar_or_list(value):
            refuse("invalid_variable", f"{what} {name!r} must be a string, number, boolean or a list of them")
        resolved[name] = ResolvedValue(value)
    return resolved


def caller_value(value: Any, vars: Mapping[str, Any], refuse: Refuse, where: str) -> Any:
    """A row filter's ``value``: ``:var`` read from the caller's variables (missing: refused,
    never "no filter"), or the literal itself."""
    if isinstance(value, str) and value.startswith(":") and value[1:].isidentifier():
        name = value[1:]
        if name not in vars or vars[name] is None:
            refuse("missing_variable", f"{where} has a row filter that needs the variable {name!r}, which was not supplied",
                   f"pass vars={{{name!r}: …}}; without it {where} cannot be read")
        found = vars[name]
        if not _scalar_or_list(found) or isinstance(found, (list, tuple)):
            refuse("invalid_variable", f"the row filter variable {name!r} must be a string, number or boolean")
        return found
    return value
