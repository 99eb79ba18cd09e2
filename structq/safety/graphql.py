"""The GraphQL sandbox: a query document for one ``kind: graphql`` source → a checked,
rewritten document and its variables.

Checked offline against the schema saved beside the manifest (``schema_file``), with
graphql-core, in this order (each refusal has its code, see README):

1. the text parses within a token budget (``parse_error``);
2. exactly one operation (``multiple_statements``), a ``query`` — a mutation is ``write``, a
   subscription or a type definition ``not_a_query``; no ``__schema`` / ``__type``
   (``introspection``);
3. aliases counted in the text (``too_many_aliases``), fragment spreads without cycles
   (``fragment_cycle``), then the document valid against the schema (``invalid_query``);
4. every field walked through its fragments and inline fragments: root fields are declared
   operations (``unknown_operation``), object types declared under ``types:``
   (``unknown_type``), fields declared (``unknown_field``) and never ``access: deny``
   (``denied_field``), nesting within ``max_depth`` (``too_deep``), the estimated cost — each
   field 1, times the page size of every list above it — within ``max_cost`` (``too_costly``);
5. the variables resolved (references, slots) and coerced by the schema (``invalid_variable``);
6. rewritten: on every use of a row-filtered root field — in the operation, a fragment or an
   inline fragment — the argument is set from the caller's variables (a plan that sets it is
   refused: ``row_filter_argument``), and the declared page argument — of a root field, or of
   a list field at any level below (``page: first`` on the type's field) — is set to at most
   ``max_rows + 1`` (so one more row tells of truncation).

The document sent is printed from the rewritten tree, never the plan's text. Pure: no I/O
beyond reading the saved schema once per manifest.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from graphql import (
    ArgumentNode,
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLError,
    GraphQLSchema,
    InlineFragmentNode,
    NameNode,
    NoFragmentCyclesRule,
    NoUndefinedVariablesRule,
    NoUnusedVariablesRule,
    OperationDefinitionNode,
    OperationType,
    ProvidedRequiredArgumentsRule,
    TypeInfo,
    TypeInfoVisitor,
    UniqueArgumentNamesRule,
    UniqueVariableNamesRule,
    ValuesOfCorrectTypeRule,
    VariablesInAllowedPositionRule,
    Visitor,
    ast_from_value,
    build_schema,
    coerce_input_value,
    get_named_type,
    get_nullable_type,
    is_list_type,
    parse,
    parse_type,
    print_ast,
    specified_rules,
    validate,
    visit,
)
from graphql.execution.values import get_variable_values
from graphql.language import ast as gql

from structq.capabilities.api_checks import GRAPHQL_SCALARS
from structq.capabilities.model import Manifest
from structq.errors import ConfigError, PlanError
from structq.safety.api_values import Refuse, caller_value, is_unchecked, resolve_values
from structq.safety.per_object import PerObject
from structq.safety.query import SafeQuery

__all__ = ["MAX_TOKENS", "check_graphql", "saved_schema"]

#: Tokens a document may have: far beyond any real query, a bound on parsing a hostile one.
MAX_TOKENS = 20_000
#: Selections the walk may visit (fragments expanded): a bound that turns a fragment bomb into
#: a refusal long before the cost estimate would be reached by counting.
_MAX_VISITS = 100_000
#: The variables that carry row-filter values: the document sent holds no caller's value
#: (like SQL's placeholders), so the audit log can keep it as it ran.
FIXED_PREFIX = "structq_"
_INTROSPECTION = frozenset({"__schema", "__type"})

#: The validation rules for the plan's document (all but required arguments, see ``check_graphql``).
_PLAN_RULES = tuple(rule for rule in specified_rules if rule is not ProvidedRequiredArgumentsRule)

#: What the rewrite could break, checked again on the rewritten document (all rules cost a
#: validation as much again: ~8 ms, most of a check): required and unique arguments, values
#: of the right types, the variables defined, used and used where their types fit.
_REWRITE_RULES = (ProvidedRequiredArgumentsRule, UniqueArgumentNamesRule, ValuesOfCorrectTypeRule,
                  NoUndefinedVariablesRule, NoUnusedVariablesRule, VariablesInAllowedPositionRule,
                  UniqueVariableNamesRule)

_SCHEMAS: PerObject[Manifest, GraphQLSchema] = PerObject()


def _build(manifest: Manifest) -> GraphQLSchema:
    if not manifest.schema_file:
        raise ConfigError(f"source {manifest.source!r} names no schema_file",
                          hint="structq init --kind graphql saves the schema beside the manifest")
    path = manifest.resolve_path(manifest.schema_file)
    try:
        return build_schema(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"source {manifest.source!r}: cannot read its schema {path}: {exc.strerror}",
                          hint="structq init --kind graphql writes it; or copy the server's SDL there") from None
    except GraphQLError as exc:
        raise ConfigError(f"source {manifest.source!r}: the schema {path} is not valid SDL: {exc.message}") from None


def saved_schema(manifest: Manifest) -> GraphQLSchema:
    """The schema saved beside ``manifest``, read once per manifest object."""
    return _SCHEMAS.get(manifest, _build)


class _Walk:
    """State of the walk over the selected fields."""

    def __init__(self, manifest: Manifest, schema: GraphQLSchema, fragments: dict[str, FragmentDefinitionNode],
                 refuse: Refuse, rows: int, variables: Mapping[str, Any], sent: dict[str, Any]) -> None:
        self.manifest, self.schema, self.fragments, self.refuse = manifest, schema, fragments, refuse
        self.limits = manifest.limits
        self.rows = rows
        self.variables = variables
        #: The variables as they will be sent (a page size given as a variable is capped here,
        #: row-filter values are added), and the row-filter variables' types.
        self.sent = sent
        self.definitions: dict[str, str] = {}
        self.cost = 0
        self.visits = 0
        self.operations: list[str] = []
        self.columns: list[str] = []

    def selections(self, selection_set: gql.SelectionSetNode | None, type_name: str, depth: int, multiplier: int) -> None:
        for selection in selection_set.selections if selection_set else ():
            self.visits += 1
            if self.visits > _MAX_VISITS:
                self.refuse("too_costly", "the query expands to too many selections (fragments used many times)")
            if isinstance(selection, FieldNode):
                self.field(selection, type_name, depth, multiplier)
            elif isinstance(selection, InlineFragmentNode):
                inner = selection.type_condition.name.value if selection.type_condition else type_name
                self.declared_type(inner)
                self.selections(selection.selection_set, inner, depth, multiplier)
            elif isinstance(selection, FragmentSpreadNode):
                fragment = self.fragments[selection.name.value]
                inner = fragment.type_condition.name.value
                self.declared_type(inner)
                self.selections(fragment.selection_set, inner, depth, multiplier)

    def declared_type(self, name: str) -> None:
        query_type = self.schema.query_type
        if (query_type is None or name != query_type.name) and self.manifest.api_type(name) is None:
            self.refuse("unknown_type", f"type {name!r} is not declared in the manifest",
                        hint=f"declared types: {', '.join(t.name for t in self.manifest.types) or '(none)'}")

    def field(self, node: FieldNode, type_name: str, depth: int, multiplier: int) -> None:
        name = node.name.value
        if name == "__typename":
            return
        if name in _INTROSPECTION:
            self.refuse("introspection", f"{name} reads the schema, not data; a plan may not ask for it")
        if depth > self.limits.max_depth:
            self.refuse("too_deep", f"the query nests deeper than {self.limits.max_depth} levels",
                        hint="select fewer levels; fetch deeper data in a later step")
        parent = self.schema.get_type(type_name)
        schema_field = parent.fields.get(name) if parent is not None and hasattr(parent, "fields") else None
        if schema_field is None:  # validation refused this already; a guard, not a rule
            self.refuse("invalid_query", f"{type_name} has no field {name!r}")
        query_type = self.schema.query_type
        if query_type is not None and type_name == query_type.name:
            operation = self.manifest.operation(name)
            if operation is None:
                self.refuse("unknown_operation", f"query field {name!r} is not declared in the manifest",
                            hint=f"declared: {', '.join(o.name for o in self.manifest.operations)}")
            self.operations.append(name)
            page = next((a.name for a in operation.arguments if a.page), None)
        else:
            declared = self.manifest.api_type(type_name)
            assert declared is not None  # declared_type ran for every enclosing type
            member = declared.field(name)
            if member is None:
                self.refuse("unknown_field", f"field {type_name}.{name} is not declared in the manifest",
                            hint=f"declared: {', '.join(f.name for f in declared.fields if not f.denied)}")
            if member.denied:
                self.refuse("denied_field", f"field {type_name}.{name} is not readable (access: deny)")
            self.columns.append(f"{type_name}.{name}")
            page = member.page
        returned = schema_field.type
        size = self.list_size(node, page) if is_list_type(get_nullable_type(returned)) else 1
        self.cost += multiplier
        if self.cost > self.limits.max_cost:
            self.refuse("too_costly", f"the query's estimated cost is over {self.limits.max_cost} "
                        "(each field 1, times the page size of every list above it)",
                        hint="select fewer fields, or ask for smaller pages (first: N)")
        inner = get_named_type(returned).name
        if node.selection_set is not None:
            if inner not in GRAPHQL_SCALARS:
                self.declared_type(inner)
            self.selections(node.selection_set, inner, depth + 1, multiplier * size)

    def list_size(self, node: FieldNode, page: str | None) -> int:
        """How many items a list field is counted as for the cost: its page argument, at most
        the source's ``max_rows`` (a step feeding others may fetch more rows, not costlier ones)."""
        cap = self.limits.max_rows
        for argument in node.arguments or ():
            if page is not None and argument.name.value == page:
                value = _literal(argument.value, self.variables)
                if isinstance(value, int) and value >= 0:
                    return min(value, cap)
        return cap


def _literal(value: gql.ValueNode, variables: Mapping[str, Any]) -> Any:
    if isinstance(value, gql.VariableNode):
        return variables.get(value.name.value)
    if isinstance(value, gql.IntValueNode):
        return int(value.value)
    return None


class _Rewrite(Visitor):
    """Sets the row-filter and page arguments on every use of a root field, and the page
    argument of every list field below it that declares one (``page: first``)."""

    def __init__(self, walk: _Walk, type_info: TypeInfo, fixed: dict[str, dict[str, Any]],
                 schema: GraphQLSchema) -> None:
        super().__init__()
        self.walk, self.type_info, self.fixed, self.schema = walk, type_info, fixed, schema

    def enter_field(self, node: FieldNode, *_: Any) -> FieldNode | None:
        parent = self.type_info.get_parent_type()
        if parent is None:
            return None
        if parent is not self.schema.query_type:
            declared = self.walk.manifest.api_type(parent.name)
            member = declared.field(node.name.value) if declared is not None else None
            schema_field = getattr(parent, "fields", {}).get(node.name.value)
            if member is None or member.page is None or schema_field is None:
                return None
            return self.paged(node, member.page, schema_field, [a for a in node.arguments or ()
                                                                if a.name.value != member.page])
        operation = self.walk.manifest.operation(node.name.value)
        if operation is None:
            return None
        schema_field = parent.fields[node.name.value]  # type: ignore[attr-defined]
        fixed = self.fixed.get(operation.name, {})
        page = next((a.name for a in operation.arguments if a.page), None)
        arguments = []
        for argument in node.arguments or ():
            name = argument.name.value
            if name in fixed:
                self.walk.refuse("row_filter_argument",
                                 f"argument {name!r} of {operation.name} is set by a row filter; a plan may not set it",
                                 hint="leave it out: structq sets it from the caller's variables")
            if name != page:
                arguments.append(argument)
        for name, value in fixed.items():
            variable = FIXED_PREFIX + name
            self.walk.sent[variable] = _fitted(value, schema_field.args[name].type, self.walk)
            self.walk.definitions[variable] = str(schema_field.args[name].type)
            arguments.append(ArgumentNode(name=NameNode(value=name), value=gql.VariableNode(name=NameNode(value=variable))))
        return self.paged(node, page, schema_field, arguments)

    def paged(self, node: FieldNode, page: str | None, schema_field: Any, arguments: list[ArgumentNode]) -> FieldNode:
        """``node`` with ``arguments`` and its page argument set, at most ``max_rows + 1``
        (a page size given as a variable keeps the variable, whose value is capped)."""
        if page is not None and page in schema_field.args:
            asked = next((a for a in node.arguments or () if a.name.value == page), None)
            given = _literal(asked.value, self.walk.variables) if asked is not None else None
            size = self.walk.rows + 1 if not isinstance(given, int) else max(0, min(given, self.walk.rows + 1))
            if asked is not None and isinstance(asked.value, gql.VariableNode):
                self.walk.sent[asked.value.name.value] = size  # the variable stays used; its value is capped
                arguments.append(asked)
            else:
                arguments.append(_argument(page, size, schema_field.args[page].type, self.walk))
        return FieldNode(alias=node.alias, name=node.name, arguments=tuple(arguments), directives=node.directives,
                         selection_set=node.selection_set)


def _fitted(value: Any, type_: Any, walk: _Walk) -> Any:
    """A caller's row-filter value as the argument's type takes it (``"1"`` from the command
    line is the ``Int`` 1); one that does not fit is refused."""
    candidate = value
    if isinstance(value, str) and get_named_type(type_).name in ("Int", "Float", "Boolean"):
        try:
            candidate = json.loads(value)
        except ValueError:
            pass
    try:
        coerce_input_value(candidate, type_)
    except GraphQLError as exc:
        walk.refuse("invalid_variable", f"the row filter's value does not fit {type_}: {exc.message}")
    return candidate


def _with_definitions(document: DocumentNode, definitions: dict[str, str]) -> DocumentNode:
    """``document`` with the row-filter variables defined on its operation."""
    added = tuple(gql.VariableDefinitionNode(variable=gql.VariableNode(name=NameNode(value=name)),
                                             type=parse_type(type_), directives=())
                  for name, type_ in definitions.items())
    out = []
    for definition in document.definitions:
        if isinstance(definition, OperationDefinitionNode):
            definition = OperationDefinitionNode(
                operation=definition.operation, name=definition.name, directives=definition.directives,
                variable_definitions=(*(definition.variable_definitions or ()), *added),
                selection_set=definition.selection_set)
        out.append(definition)
    return DocumentNode(definitions=tuple(out))


def _argument(name: str, value: Any, type_: Any, walk: _Walk) -> ArgumentNode:
    literal = ast_from_value(value, type_)
    if literal is None:
        walk.refuse("invalid_variable", f"the value for argument {name!r} does not fit its type {type_}")
    return ArgumentNode(name=NameNode(value=name), value=literal)


def _one_query(document: DocumentNode, refuse: Refuse) -> OperationDefinitionNode:
    operations = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
    others = [d for d in document.definitions if not isinstance(d, (OperationDefinitionNode, FragmentDefinitionNode))]
    if others:
        refuse("not_a_query", "the document defines types or directives; a step sends one query")
    if len(operations) != 1:
        refuse("multiple_statements", f"the document has {len(operations)} operations; a step sends exactly one query")
    operation = operations[0]
    if operation.operation is OperationType.MUTATION:
        refuse("write", "a mutation changes data; only queries may run")
    if operation.operation is not OperationType.QUERY:
        refuse("not_a_query", f"a {operation.operation.value} is not a query; only queries may run")
    return operation


def check_graphql(
    query: str,
    source: Manifest,
    *,
    variables: Mapping[str, Any] | None = None,
    params: Mapping[str, Sequence[Any]] | None = None,
    vars: Mapping[str, Any] | None = None,
    max_rows: int | None = None,
    slots: Mapping[str, Any] | None = None,
) -> SafeQuery:
    """Check a GraphQL ``query`` (with its ``variables``) against ``source`` and return the
    rewritten document that may be sent.

    ``params`` holds reference values (``"<key.column>"`` in a variable → the earlier step's
    column: a list for a list-typed variable, else exactly one value), ``slots`` a template
    plan's values, ``vars`` the caller's row-filter variables, ``max_rows`` the row cap.
    Raises ``SandboxViolation`` (code, hint) or ``PlanError`` (a reference without one value).
    """
    refuse = Refuse(source.source)
    if source.kind != "graphql":
        refuse("not_a_query", f"source {source.source!r} is a {source.kind} source, not GraphQL")
    if not isinstance(query, str):
        refuse("parse_error", "a GraphQL step's query is the document as text")
    schema = saved_schema(source)
    rows = source.limits.max_rows if max_rows is None else max_rows
    try:
        document = parse(query, max_tokens=MAX_TOKENS)
    except GraphQLError as exc:
        refuse("parse_error", f"the query does not parse: {exc.message}",
               hint="one GraphQL query document, e.g. query { projects { name } }")
    operation = _one_query(document, refuse)
    if any(d.variable.name.value.startswith(FIXED_PREFIX) for d in operation.variable_definitions or ()):
        refuse("invalid_variable", f"variable names starting {FIXED_PREFIX} are structq's own (row filters)")
    fields = _fields(document)
    if any(n.name.value in _INTROSPECTION for n in fields):
        refuse("introspection", "__schema and __type read the schema, not data; a plan may not ask for them")
    if (aliases := sum(n.alias is not None for n in fields)) > source.limits.max_aliases:
        refuse("too_many_aliases", f"the query uses {aliases} aliases; at most {source.limits.max_aliases}",
               hint="ask for each field once; use a list field with arguments instead of many aliases")
    if errors := validate(schema, document, [NoFragmentCyclesRule]):
        refuse("fragment_cycle", errors[0].message)
    # Arguments a row filter sets are not in the plan's text yet: required arguments are
    # checked on the rewritten document below.
    if errors := validate(schema, document, _PLAN_RULES, max_errors=5):
        refuse("invalid_query", f"the query is not valid against the saved schema: {errors[0].message}")

    given = resolve_values(variables, refuse, what="variable", params=params or {}, slots=slots or {})
    definitions = {d.variable.name.value: d for d in operation.variable_definitions or ()}
    values: dict[str, Any] = {}
    for name, resolved in given.items():
        definition = definitions.get(name)
        if definition is None:
            refuse("invalid_variable", f"variable {name!r} is not defined by the query",
                   hint=f"defined: {', '.join('$' + n for n in definitions) or '(none)'}")
        value = resolved.value
        if resolved.reference is not None and not isinstance(definition.type, gql.ListTypeNode) and not (
                isinstance(definition.type, gql.NonNullTypeNode) and isinstance(definition.type.type, gql.ListTypeNode)):
            if len(value) != 1:
                raise PlanError(f"variable ${name} takes one value, and <{resolved.reference}> has {len(value)}",
                                hint="declare the variable as a list ([String!]) or reduce the earlier step to one row")
            value = value[0]
        values[name] = value
    # A reference's stand-in (structq check, before any step ran) is no value to coerce: the
    # variable's type was validated with the document; its values come when the plan runs.
    unchecked = {name for name, value in values.items() if is_unchecked(value)}
    coerced = get_variable_values(schema, [d for d in operation.variable_definitions or ()
                                           if d.variable.name.value not in unchecked], values, max_errors=3)
    if isinstance(coerced, list):
        refuse("invalid_variable", f"the variables do not fit the query: {coerced[0].message}")
    # graphql-core 3.3 returns its coerced values with their sources, 3.2 the dict alone.
    coerced = {**getattr(coerced, "coerced", coerced), **{name: values[name] for name in unchecked}}

    fragments = {d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)}
    if (deepest := _depth(operation.selection_set, fragments, {})) > source.limits.max_depth:
        refuse("too_deep", f"the query nests {deepest} levels deep; at most {source.limits.max_depth}",
               hint="select fewer levels; fetch deeper data in a later step")
    walk = _Walk(source, schema, fragments, refuse, rows, coerced, values)
    assert schema.query_type is not None
    walk.selections(operation.selection_set, schema.query_type.name, 1, 1)

    fixed: dict[str, dict[str, Any]] = {}
    for rf in source.policies.row_filters:  # those of the root fields the query reads (others need no variable)
        if rf.argument is not None and rf.target is not None and rf.target in walk.operations:
            fixed.setdefault(rf.target, {})[rf.argument] = caller_value(rf.value, vars or {}, refuse,
                                                                         f"query field {rf.target!r}")
    type_info = TypeInfo(schema)
    rewritten = visit(document, TypeInfoVisitor(type_info, _Rewrite(walk, type_info, fixed, schema)))
    rewritten = _with_definitions(rewritten, walk.definitions)
    if errors := validate(schema, rewritten, _REWRITE_RULES, max_errors=1):  # defence in depth
        refuse("invalid_query", f"the rewritten query is not valid: {errors[0].message}")
    operations = tuple(dict.fromkeys(walk.operations))
    return SafeQuery(
        source=source.source,
        kind="graphql",
        limit=rows + 1,
        max_rows=rows,
        body={"query": print_ast(rewritten), "variables": values},
        index=operations[0] if len(operations) == 1 else None,
        params={name: r.value for name, r in given.items() if r.reference is not None}
        | {name: walk.sent[name] for name in walk.definitions},
        tables=operations,
        columns=tuple(dict.fromkeys(walk.columns)),
    )


def _depth(selection_set: gql.SelectionSetNode | None, fragments: dict[str, FragmentDefinitionNode],
           known: dict[str, int]) -> int:
    """How deeply fields nest (fragments add no level); each fragment measured once."""
    deepest = 0
    for selection in selection_set.selections if selection_set else ():
        if isinstance(selection, FieldNode):
            deepest = max(deepest, 1 + _depth(selection.selection_set, fragments, known))
        elif isinstance(selection, InlineFragmentNode):
            deepest = max(deepest, _depth(selection.selection_set, fragments, known))
        elif isinstance(selection, FragmentSpreadNode):
            name = selection.name.value
            if name not in known:
                known[name] = 0  # no cycles by now; a guard against measuring one twice
                known[name] = _depth(fragments[name].selection_set, fragments, known)
            deepest = max(deepest, known[name])
    return deepest


def _fields(document: DocumentNode) -> list[FieldNode]:
    found: list[FieldNode] = []

    class Collect(Visitor):
        def enter_field(self, node: FieldNode, *_: Any) -> None:
            found.append(node)

    visit(document, Collect())
    return found
