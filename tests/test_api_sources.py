"""API sources against real servers on loopback: a Strawberry GraphQL app and a FastAPI app,
both under uvicorn (``tests/api_servers.py``), with two tenants, personal-data fields and
write operations the servers count.

The manifests come from ``structq init`` against the running servers, then get the row
filters a person would add. Plans run through the engine as any plan does; hostile queries
are allow/deny tables with the refusal code pinned (``sandbox_support.refused``).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from structq.agent.engine import Engine
from structq.agent.plan import Plan
from structq.capabilities import CapabilitySet
from structq.errors import ExecutionError, SandboxViolation
from structq.safety.graphql import check_graphql
from structq.safety.rest import check_rest
from tests.api_servers import Served, serve
from tests.sandbox_support import refused

GRAPHQL_FILTER = """
policies:
  row_filters:
    - {field: Query.projects, argument: tenantId, value: ":tenant_id"}
    - {field: Query.people, argument: tenantId, value: ":tenant_id"}
"""
REST_FILTER = """
policies:
  row_filters:
    - {operation: listTickets, parameter: tenant, value: ":tenant_id"}
    - {operation: getTicket, parameter: tenant, value: ":tenant_id"}
    - {operation: listProjects, parameter: tenant, value: ":tenant_id"}
    - {operation: ticketsById, parameter: tenant, value: ":tenant_id"}
"""
TENANT_1 = {"tenant_id": 1}


@pytest.fixture(scope="module")
def graphql_server() -> Iterator[Served]:
    with serve("graphql") as served:
        yield served


@pytest.fixture(scope="module")
def rest_server() -> Iterator[Served]:
    with serve("rest") as served:
        yield served


def _init(directory: Path, source: str, url: str, kind: str, extra: str) -> None:
    from typer.testing import CliRunner

    from structq.cli import app

    result = CliRunner().invoke(app, ["init", "--kind", kind, "--url", url, "--source", source,
                                      "-m", str(directory), "--json"])
    assert result.exit_code == 0, result.output
    path = directory / f"{source}.yaml"
    path.write_text(path.read_text(encoding="utf-8") + extra, encoding="utf-8")


@pytest.fixture(scope="module")
def manifests(tmp_path_factory: pytest.TempPathFactory, graphql_server: Served, rest_server: Served,
              ) -> Iterator[Path]:
    directory = tmp_path_factory.mktemp("api-manifests")
    _init(directory, "tracker", graphql_server.url, "graphql", GRAPHQL_FILTER)
    _init(directory, "tickets", rest_server.url + "/openapi.json", "openapi", REST_FILTER)
    db = directory / "crm.db"
    with sqlite3.connect(db) as conn:
        conn.executescript("""
            CREATE TABLE accounts (project TEXT, account TEXT, region TEXT);
            INSERT INTO accounts VALUES ('apollo', 'ACME', 'north'), ('zephyr', 'Globex', 'south'),
                                        ('secret-t2', 'Initech', 'east');
        """)
    (directory / "crm.yaml").write_text(f"""source: crm
kind: sql
url: sqlite:///{db}
tables:
  - name: accounts
    columns:
      - {{name: project, type: text}}
      - {{name: account, type: text}}
      - {{name: region, type: text}}
""", encoding="utf-8")
    yield directory


@pytest.fixture(scope="module")
def capabilities(manifests: Path, graphql_server: Served, rest_server: Served,
                 monkeypatch_module: pytest.MonkeyPatch) -> CapabilitySet:
    monkeypatch_module.setenv("TRACKER_URL", graphql_server.url)
    monkeypatch_module.setenv("TICKETS_URL", rest_server.url)
    return CapabilitySet.from_path(manifests)


@pytest.fixture(scope="module")
def monkeypatch_module() -> Iterator[pytest.MonkeyPatch]:
    with pytest.MonkeyPatch.context() as patch:
        yield patch


@pytest.fixture(scope="module")
def engine(capabilities: CapabilitySet) -> Iterator[Engine]:
    with Engine(capabilities) as running:
        yield running


def _run(engine: Engine, steps: list[dict], vars: dict | None = TENANT_1):  # type: ignore[no-untyped-def]
    return engine.run(Plan.parse({"steps": steps}), vars=vars)


# --- init ---------------------------------------------------------------------------------------

def test_init_declares_the_graphql_schema_and_denies_personal_fields(manifests: Path, capabilities: CapabilitySet) -> None:
    tracker = capabilities["tracker"]
    assert [o.name for o in tracker.operations] == ["projects", "people", "contacts"]
    assert tracker.operation("projects").argument("first").page  # type: ignore[union-attr]
    person = tracker.api_type("Person")
    assert person is not None and {f.name for f in person.fields if f.denied} == {"email", "salary"}
    assert (manifests / "tracker.graphql").read_text().startswith("type Project") or "type Query" in (
        manifests / "tracker.graphql").read_text()
    assert "${TRACKER_URL}" in (manifests / "tracker.yaml").read_text() and "127.0.0.1" not in (
        manifests / "tracker.yaml").read_text()


def test_init_declares_get_operations_and_records_writes_as_not_callable(capabilities: CapabilitySet) -> None:
    tickets = capabilities["tickets"]
    readable = {o.name for o in tickets.operations if o.readable}
    assert readable == {"listTickets", "getTicket", "listProjects", "goElsewhere", "flakyStatus", "slowStatus", "bigList",
                        "echoValue", "ticketsById", "listContacts"}
    assert {o.name: o.method for o in tickets.operations if not o.readable} == {"createTicket": "post",
                                                                               "deleteTicket": "delete"}
    status = tickets.operation("listTickets").parameter("status")  # type: ignore[union-attr]
    assert status is not None and status.schema_["enum"] == ["open", "closed"]
    assert tickets.operation("listTickets").member("reporter.email").denied  # type: ignore[union-attr]
    assert tickets.operation("listProjects").rows == "items"  # type: ignore[union-attr]


def test_init_denies_a_field_whose_sampled_values_are_personal(manifests: Path, capabilities: CapabilitySet,
                                                               graphql_server: Served, rest_server: Served) -> None:
    contact = capabilities["tracker"].api_type("Contact")
    assert contact is not None and {f.name for f in contact.fields if f.denied} == {"contact"}
    contacts = capabilities["tickets"].operation("listContacts")
    assert contacts is not None and {f.name for f in contacts.fields if f.denied} == {"reach"}
    tracker, tickets = (manifests / "tracker.yaml").read_text(), (manifests / "tickets.yaml").read_text()
    assert "# denied: its values look like email addresses" in next(
        line for line in tracker.splitlines() if "name: contact," in line)
    assert "# denied: its values look like phone numbers" in next(
        line for line in tickets.splitlines() if "name: reach," in line)
    assert "desk@example.com" not in tracker and "415-555" not in tickets  # classified, never written
    assert not graphql_server.writes and not rest_server.writes  # sampling sent no mutation, POST or DELETE


def test_init_samples_only_what_needs_no_argument(tmp_path: Path, graphql_server: Served, rest_server: Served) -> None:
    from structq.capabilities import load_manifest
    from structq.sync.api_samples import SAMPLE_ROWS, graphql_samples, openapi_samples

    _init(tmp_path, "tracker", graphql_server.url, "graphql", GRAPHQL_FILTER)
    _init(tmp_path, "tickets", rest_server.url + "/openapi.json", "openapi", REST_FILTER)
    tracker = load_manifest(tmp_path / "tracker.yaml", env={"TRACKER_URL": graphql_server.url})[0]
    tickets = load_manifest(tmp_path / "tickets.yaml", env={"TICKETS_URL": rest_server.url})[0]
    sampled = graphql_samples(tracker)
    assert set(sampled) == {"Contact.name"}  # projects and people need tenantId; contact is denied now
    rows = openapi_samples(tickets.model_copy(update={"operations": [
        o for o in tickets.operations if o.name in ("listTickets", "getTicket", "bigList", "deleteTicket")]}))
    assert set(rows) == {"bigList.n", "bigList.text"} and len(rows["bigList.n"]) == SAMPLE_ROWS


# --- row filters --------------------------------------------------------------------------------

def test_graphql_row_filter_is_fixed_by_the_caller(engine: Engine) -> None:
    result = _run(engine, [{"output_key": "p", "source": "tracker", "query": "{ projects { name status } }"}])
    assert sorted(r[0] for r in result.final.rows) == ["apollo", "zephyr"]
    tenant_2 = _run(engine, [{"output_key": "p", "source": "tracker", "query": "{ projects { name } }"}],
                    vars={"tenant_id": 2})
    assert [r[0] for r in tenant_2.final.rows] == ["secret-t2"]


def test_a_plan_asking_for_another_tenant_is_refused(engine: Engine) -> None:
    for query, variables in [("{ projects(tenantId: 2) { name } }", None),
                             ("query($t: Int!) { projects(tenantId: $t) { name } }", {"t": 2}),
                             ("query { ...F } fragment F on Query { projects(tenantId: 2) { name } }", None),
                             ("{ ... on Query { people(tenantId: 2) { name } } }", None)]:
        step = {"output_key": "p", "source": "tracker", "query": query, **({"variables": variables} if variables else {})}
        with pytest.raises(SandboxViolation) as info:
            _run(engine, [step])
        assert info.value.code == "row_filter_argument", query


def test_rest_row_filter_is_fixed_by_the_caller(engine: Engine) -> None:
    result = _run(engine, [{"output_key": "t", "source": "tickets", "operation": "listTickets", "params": {}}])
    titles = {row[result.final.columns.index("title")] for row in result.final.rows}
    assert titles == {"login fails", "slow search", "export broken"}
    with pytest.raises(SandboxViolation) as info:
        _run(engine, [{"output_key": "t", "source": "tickets", "operation": "listTickets", "params": {"tenant": 2}}])
    assert info.value.code == "row_filter_argument"


def test_a_missing_tenant_variable_is_refused_never_unfiltered(engine: Engine) -> None:
    for step in ({"output_key": "p", "source": "tracker", "query": "{ projects { name } }"},
                 {"output_key": "t", "source": "tickets", "operation": "listTickets", "params": {}}):
        with pytest.raises(SandboxViolation) as info:
            _run(engine, [step], vars={})
        assert info.value.code == "missing_variable"


# --- writes never reach the servers -------------------------------------------------------------

def test_a_mutation_never_reaches_the_graphql_server(engine: Engine, graphql_server: Served) -> None:
    before = graphql_server.hits["POST"]
    with pytest.raises(SandboxViolation) as info:
        _run(engine, [{"output_key": "m", "source": "tracker", "query": "mutation { deleteProject(id: 1) }"}])
    assert info.value.code == "write"
    assert graphql_server.writes["mutation"] == 0 and graphql_server.hits["POST"] == before


def test_post_and_delete_never_reach_the_rest_server(engine: Engine, rest_server: Served) -> None:
    for operation in ("createTicket", "deleteTicket"):
        with pytest.raises(SandboxViolation) as info:
            _run(engine, [{"output_key": "w", "source": "tickets", "operation": operation, "params": {"ticket_id": 10}}])
        assert info.value.code == "not_callable"
    assert sum(rest_server.writes.values()) == 0


def test_an_enum_violation_is_refused_before_the_request(engine: Engine, rest_server: Served) -> None:
    before = sum(rest_server.hits.values())
    with pytest.raises(SandboxViolation) as info:
        _run(engine, [{"output_key": "t", "source": "tickets", "operation": "listTickets",
                       "params": {"status": "deleted"}}])
    assert info.value.code == "enum_value"
    assert sum(rest_server.hits.values()) == before


# --- denied fields ------------------------------------------------------------------------------

def test_a_denied_field_is_never_returned(engine: Engine) -> None:
    rest = _run(engine, [{"output_key": "t", "source": "tickets", "operation": "listTickets", "params": {}}])
    assert "reporter.name" in rest.final.columns and "reporter.email" not in rest.final.columns
    assert "@" not in json.dumps(rest.final.rows, ensure_ascii=False)
    with pytest.raises(SandboxViolation) as info:
        _run(engine, [{"output_key": "p", "source": "tracker", "query": "{ people { name email } }"}])
    assert info.value.code == "denied_field"


# --- API steps in plans -------------------------------------------------------------------------

def test_a_graphql_step_feeds_a_rest_step(engine: Engine, rest_server: Served) -> None:
    before = rest_server.hits["GET"]
    result = _run(engine, [
        {"output_key": "p", "source": "tracker", "query": '{ projects(status: "active") { name owner { name } } }'},
        {"output_key": "t", "source": "tickets", "operation": "listTickets",
         "params": {"project": "<p.name>", "status": "open"}},
    ])
    assert [r[0] for r in result.steps["p"].rows] == ["apollo"]
    assert result.steps["p"].columns == ("name", "owner.name")
    titles = [row[result.final.columns.index("title")] for row in result.final.rows]
    assert titles == ["login fails"]
    assert rest_server.hits["GET"] == before + 1


def test_a_list_reference_becomes_one_request_per_value(engine: Engine, rest_server: Served) -> None:
    before = rest_server.hits["GET"]
    result = _run(engine, [
        {"output_key": "p", "source": "tracker", "query": "{ projects { name } }"},
        {"output_key": "t", "source": "tickets", "operation": "listTickets", "params": {"project": "<p.name>"}},
    ])
    assert sorted(row[result.final.columns.index("project")] for row in result.final.rows) == ["apollo", "apollo", "zephyr"]
    assert rest_server.hits["GET"] == before + 2


def test_an_array_parameter_takes_the_list_in_one_request(engine: Engine, rest_server: Served) -> None:
    before = rest_server.hits["GET"]
    result = _run(engine, [
        {"output_key": "open", "source": "tickets", "operation": "listTickets", "params": {"status": "open"}},
        {"output_key": "again", "source": "tickets", "operation": "ticketsById", "params": {"ids": "<open.id>"}},
    ])
    assert sorted(row[result.final.columns.index("id")] for row in result.final.rows) == [10, 12]
    assert rest_server.hits["GET"] == before + 2  # one request each, the list sent whole


def test_a_rest_step_feeds_a_sql_step_and_a_local_step(engine: Engine) -> None:
    result = _run(engine, [
        {"output_key": "open", "source": "tickets", "operation": "listTickets", "params": {"status": "open"}},
        {"output_key": "acc", "source": "crm", "query": "SELECT project, account FROM accounts WHERE project IN (<open.project>)"},
        {"output_key": "joined", "source": "local",
         "query": "SELECT acc.account, COUNT(*) AS n FROM open JOIN acc ON acc.project = open.project GROUP BY acc.account ORDER BY acc.account"},
    ])
    assert result.steps["acc"].rows and {r[0] for r in result.steps["acc"].rows} == {"apollo", "zephyr"}
    assert result.final.rows == [("ACME", 1), ("Globex", 1)]


def test_a_sql_step_feeds_a_graphql_variable(engine: Engine) -> None:
    result = _run(engine, [
        {"output_key": "acc", "source": "crm", "query": "SELECT project FROM accounts WHERE account = 'Globex'"},
        {"output_key": "p", "source": "tracker", "query": "query($s: String) { projects(status: $s) { name } }",
         "variables": {"s": "done"}},
    ])
    assert result.final.rows == [("zephyr",)]


def test_a_path_parameter_is_encoded(engine: Engine) -> None:
    safe = check_rest("getTicket", engine.capabilities["tickets"], values={"ticket_id": 10}, vars=TENANT_1)
    assert safe.body["requests"] == [{"path": "/api/tickets/10", "query": {"tenant": 1}}]
    result = _run(engine, [{"output_key": "t", "source": "tickets", "operation": "getTicket", "params": {"ticket_id": 11}}])
    assert [row[result.final.columns.index("title")] for row in result.final.rows] == ["slow search"]


def test_a_redirect_to_another_host_is_not_followed(engine: Engine) -> None:
    with pytest.raises(ExecutionError, match="outside its url"):
        _run(engine, [{"output_key": "x", "source": "tickets", "operation": "goElsewhere", "params": {}}])


def test_the_page_argument_is_capped_and_truncation_reported(engine: Engine) -> None:
    manifest = engine.capabilities["tracker"]
    safe = check_graphql("{ projects(first: 100000) { name } }", manifest, vars=TENANT_1, max_rows=1)
    assert "first: 2" in safe.body["query"] and "tenantId: $structq_tenantId" in safe.body["query"]
    assert safe.body["variables"] == {"structq_tenantId": 1} and "1" not in safe.body["query"].replace("first: 2", "")
    result = engine.run(Plan.parse({"steps": [{"output_key": "p", "source": "tracker", "query": "{ projects { name } }"},
                                              {"output_key": "n", "source": "local", "query": "SELECT COUNT(*) FROM p"}]}),
                        vars=TENANT_1)
    assert result.final.rows == [(2,)]


def test_a_page_size_given_as_a_variable_is_capped_in_the_variable(engine: Engine) -> None:
    manifest = engine.capabilities["tracker"]
    safe = check_graphql("query($n: Int) { projects(first: $n) { name } }", manifest, variables={"n": 100000},
                         vars=TENANT_1, max_rows=1)
    assert "first: $n" in safe.body["query"] and safe.body["variables"]["n"] == 2
    result = _run(engine, [{"output_key": "p", "source": "tracker", "query": "query($n: Int) { projects(first: $n) { name } }",
                            "variables": {"n": 1}}])
    assert result.final.rows == [("apollo",)]


def test_a_nested_list_is_paged_and_costed_by_its_declared_page_argument(engine: Engine) -> None:
    manifest = engine.capabilities["tracker"]
    project = manifest.api_type("Project")
    assert project is not None and project.field("projectsOfOwner").page == "first"  # type: ignore[union-attr]
    nested = "{ projects { name projectsOfOwner(first: 100000) { name projectsOfOwner { id } } } }"
    safe = check_graphql(nested, _with_limits(engine.capabilities, "tracker", max_rows=1)["tracker"], vars=TENANT_1)
    assert safe.body["query"].count("first: 2") == 3 and "100000" not in safe.body["query"]
    variable = check_graphql("query($n: Int) { projects(first: 1) { projectsOfOwner(first: $n) { name } } }", manifest,
                             variables={"n": 50}, vars=TENANT_1, max_rows=3)
    assert "projectsOfOwner(first: $n)" in variable.body["query"] and variable.body["variables"]["n"] == 4

    small = _with_limits(engine.capabilities, "tracker", max_cost=100)["tracker"]
    paged = "{ projects(first: 2) { projectsOfOwner(first: 2) { id name } } }"
    assert check_graphql(paged, small, vars=TENANT_1).tables == ("projects",)  # 1 + 2 + 2·2·2 = 11
    refused(check_graphql, paged.replace("(first: 2) { id", " { id"), small, vars=TENANT_1, code="too_costly")

    result = _run(engine, [{"output_key": "p", "source": "tracker",
                            "query": "{ projects(first: 1) { name projectsOfOwner(first: 1) { name } } }"}])
    assert len(result.final.rows) == 1  # the server took the rewritten document


# --- hostile cases ------------------------------------------------------------------------------

ALIASES_300 = "{ " + " ".join(f"a{i}: projects {{ name }}" for i in range(300)) + " }"
DEPTH_BOMB = "{ projects { " + "projectsOfOwner { " * 12 + "name" + " }" * 12 + " } }"
FRAGMENT_CYCLE = "query { projects { ...A } } fragment A on Project { name ...B } fragment B on Project { id ...A }"

GRAPHQL_DENY = [
    ("300 aliases", ALIASES_300, "too_many_aliases"),
    ("depth bomb", DEPTH_BOMB, "too_deep"),
    ("fragment cycle", FRAGMENT_CYCLE, "fragment_cycle"),
    ("mutation", "mutation { deleteProject(id: 1) }", "write"),
    ("subscription", "subscription { projects { name } }", "not_a_query"),
    ("two operations", "query A { projects { name } } query B { people { name } }", "multiple_statements"),
    ("introspection", "{ __schema { types { name } } }", "introspection"),
    ("type introspection", '{ __type(name: "Person") { fields { name } } }', "introspection"),
    ("not GraphQL", "SELECT * FROM projects", "parse_error"),
    ("type definition", "type Evil { x: Int } query { projects { name } }", "not_a_query"),
    ("unknown field", "{ projects { budget } }", "invalid_query"),
    ("denied field", "{ people { email } }", "denied_field"),
    ("denied through an alias", "{ people { contact: email } }", "denied_field"),
    ("denied through a fragment", "{ people { ...P } } fragment P on Person { name salary }", "denied_field"),
    ("denied through an inline fragment", "{ projects { owner { ... on Person { email } } } }", "denied_field"),
    ("denied in a nested object", "{ projects { name owner { salary } } }", "denied_field"),
    ("row filter argument set", "{ projects(tenantId: 2) { name } }", "row_filter_argument"),
    ("own variable named like structq's", "query($structq_tenantId: Int) { projects { name } }",
     "invalid_variable"),
    ("a default value for the tenant", "query($t: Int = 2) { projects(tenantId: $t) { name } }", "row_filter_argument"),
    ("a fragment on Mutation", "{ projects { name } } fragment M on Mutation { deleteProject(id: 1) }", "invalid_query"),
    ("an unknown directive", "{ projects @evil { name } }", "invalid_query"),
    ("too many tokens", "{ projects { " + "name " * 25_000 + "} }", "parse_error"),
    ("costly", "{ projects(first: 1000) { projectsOfOwner { projectsOfOwner { projectsOfOwner { name id status } } } } }",
     "too_costly"),
]


@pytest.mark.parametrize(("query", "code"), [(q, c) for _, q, c in GRAPHQL_DENY], ids=[n for n, _, _ in GRAPHQL_DENY])
def test_graphql_deny(capabilities: CapabilitySet, query: str, code: str) -> None:
    manifest = capabilities["tracker"].model_copy(update={"limits": capabilities["tracker"].limits.model_copy(
        update={"max_cost": 5000})})
    refused(check_graphql, query, manifest, vars=TENANT_1, max_rows=100, code=code)


GRAPHQL_ALLOW = [
    "{ projects { name } }",
    "query Named { projects(status: \"active\", first: 5) { id name owner { name } } }",
    "{ projects { ...P } } fragment P on Project { name status }",
    "{ projects { __typename name } }",
    "{ mine: projects { name } team: people { name } }",
]


@pytest.mark.parametrize("query", GRAPHQL_ALLOW)
def test_graphql_allow(capabilities: CapabilitySet, query: str) -> None:
    safe = check_graphql(query, capabilities["tracker"], vars=TENANT_1)
    assert "tenantId: $structq_tenantId" in safe.body["query"] and safe.body["variables"]["structq_tenantId"] == 1


REST_DENY = [
    ("undeclared operation", "dropTickets", {}, "unknown_operation"),
    ("POST", "createTicket", {}, "not_callable"),
    ("DELETE", "deleteTicket", {"ticket_id": 1}, "not_callable"),
    ("undeclared parameter", "listTickets", {"admin": "true"}, "unknown_parameter"),
    ("enum violation", "listTickets", {"status": "deleted"}, "enum_value"),
    ("type violation", "listTickets", {"limit": "many"}, "invalid_parameter"),
    ("range violation", "listTickets", {"limit": 0}, "invalid_parameter"),
    ("object value", "listTickets", {"project": {"$ne": ""}}, "invalid_variable"),
    ("text around a reference", "listTickets", {"project": "x<p.name>"}, "invalid_variable"),
    ("row filter parameter", "listTickets", {"tenant": 2}, "row_filter_argument"),
    ("missing path parameter", "getTicket", {}, "missing_parameter"),
    ("control characters", "listTickets", {"project": "a\r\nHost: evil"}, "invalid_parameter"),
    ("a list for one value", "listTickets", {"status": ["open", "closed"]}, "invalid_parameter"),
    ("a boolean for a number", "listTickets", {"limit": True}, "invalid_parameter"),
]


@pytest.mark.parametrize(("operation", "values", "code"), [r[1:] for r in REST_DENY], ids=[r[0] for r in REST_DENY])
def test_rest_deny(capabilities: CapabilitySet, operation: str, values: dict, code: str) -> None:
    refused(check_rest, operation, capabilities["tickets"], values=values, vars=TENANT_1, code=code)


def test_rest_fan_out_is_bounded(capabilities: CapabilitySet) -> None:
    manifest = capabilities["tickets"]
    names = [f"p{i}" for i in range(manifest.limits.max_requests + 1)]
    refused(check_rest, "listTickets", manifest, values={"project": "<p.name>"}, params={"p.name": names},
            vars=TENANT_1, code="too_many_requests")
    safe = check_rest("listTickets", manifest, values={"project": "<p.name>"}, params={"p.name": ["a", "b", "a"]},
                      vars=TENANT_1)
    assert [r["query"]["project"] for r in safe.body["requests"]] == ["a", "b"]


def test_a_path_parameter_cannot_escape_its_path(capabilities: CapabilitySet) -> None:
    safe = check_rest("getTicket", capabilities["tickets"], values={"ticket_id": "1"}, vars=TENANT_1)
    assert safe.body["requests"][0]["path"] == "/api/tickets/1"
    refused(check_rest, "getTicket", capabilities["tickets"], values={"ticket_id": "../../admin"}, vars=TENANT_1,
            code="invalid_parameter")


def test_headers_are_expanded_only_when_sent(manifests: Path, graphql_server: Served,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from structq.capabilities import load_manifest_text
    from structq.capabilities.render import render_manifest
    from structq.executors.http import ApiClient

    text = (manifests / "tracker.yaml").read_text() + 'headers: {Authorization: "Bearer ${TRACKER_TOKEN}"}\n'
    monkeypatch.setenv("TRACKER_TOKEN", "s3cret-value")
    manifest = load_manifest_text(text, str(manifests / "tracker.yaml"), env={"TRACKER_URL": graphql_server.url})[0]
    assert "s3cret" not in manifest.model_dump_json() and "s3cret" not in render_manifest(manifest)
    assert ApiClient(manifest)._headers()["Authorization"] == "Bearer s3cret-value"


def test_the_planner_sees_api_sources_compactly(capabilities: CapabilitySet) -> None:
    from structq.capabilities.render import render_manifest

    tracker = render_manifest(capabilities["tracker"])
    assert "query field projects(tenantId: Int! [set automatically]" in tracker
    assert "email" not in tracker and "salary" not in tracker
    assert "projectsOfOwner(first: Int [page size, at most 1000]) [Project!]!" in tracker
    tickets = render_manifest(capabilities["tickets"])
    assert "operation listTickets (GET /api/tickets)" in tickets and "(open|closed)" in tickets
    assert "createTicket" not in tickets and "reporter.email" not in tickets


# --- HTTP limits, shown by their outcome --------------------------------------------------------

def _with_limits(capabilities: CapabilitySet, source: str, **limits: object) -> CapabilitySet:
    manifest = capabilities[source]
    changed = manifest.model_copy(update={"limits": manifest.limits.model_copy(update=limits)})
    return CapabilitySet([changed if m.source == source else m for m in capabilities])


def test_a_429_is_retried_after_its_retry_after(engine: Engine, rest_server: Served) -> None:
    result = _run(engine, [{"output_key": "s", "source": "tickets", "operation": "flakyStatus", "params": {}}])
    assert result.final.rows[0][0] == "ok" and result.final.rows[0][1] % 2 == 0  # the second call answered


def test_a_request_past_its_timeout_fails_as_a_timeout(capabilities: CapabilitySet) -> None:
    from structq.errors import QueryTimeout

    with Engine(_with_limits(capabilities, "tickets", timeout_s=0.2)) as short:
        with pytest.raises(QueryTimeout):
            _run(short, [{"output_key": "s", "source": "tickets", "operation": "slowStatus", "params": {}}])


def test_a_response_past_its_size_limit_is_refused(capabilities: CapabilitySet) -> None:
    with Engine(_with_limits(capabilities, "tickets", max_response_bytes=10_000)) as small:
        with pytest.raises(ExecutionError, match="max_response_bytes"):
            _run(small, [{"output_key": "b", "source": "tickets", "operation": "bigList", "params": {}}])


def test_a_big_list_is_cut_at_max_rows_and_says_so(capabilities: CapabilitySet) -> None:
    with Engine(_with_limits(capabilities, "tickets", max_rows=5)) as capped:
        result = _run(capped, [{"output_key": "b", "source": "tickets", "operation": "bigList", "params": {}}])
    assert result.final.row_count == 5 and result.final.truncated
    assert any("truncated" in note for note in result.notes)


# --- sync and check -----------------------------------------------------------------------------

def test_sync_check_reports_drift_of_both_kinds(manifests: Path, tmp_path: Path, capabilities: CapabilitySet) -> None:
    import shutil

    from typer.testing import CliRunner

    from structq.cli import app

    copy = tmp_path / "m"
    shutil.copytree(manifests, copy)
    runner = CliRunner()
    in_sync = runner.invoke(app, ["sync", "--check", "-m", str(copy), "--json"])
    assert in_sync.exit_code == 0, (in_sync.output, in_sync.exception)
    assert {s["source"]: s["drift"] for s in json.loads(in_sync.stdout)["sources"]} == {
        "tracker": False, "tickets": False, "crm": False}
    connected = runner.invoke(app, ["check", "-m", str(copy), "--connect"])
    assert connected.exit_code == 0, connected.output
    assert "tickets (openapi): 12 operations" in connected.output

    tickets = copy / "tickets.yaml"
    tickets.write_text(tickets.read_text().replace("  - name: bigList\n", "  - name: bigListOld\n"))
    schema = copy / "tracker.graphql"
    schema.write_text(schema.read_text().replace("  salary: Int!\n", ""))
    drifted = runner.invoke(app, ["sync", "--check", "-m", str(copy), "--json"])
    assert drifted.exit_code == 1, (drifted.output, drifted.exception)
    report = {s["source"]: s for s in json.loads(drifted.stdout)["sources"]}
    assert [(a["object"], a["kind"]) for a in report["tickets"]["added"]] == [("bigList", "operation")]
    assert [d["object"] for d in report["tickets"]["dropped"]] == ["bigListOld"]
    assert any("types Person" in w for w in report["tracker"]["warnings"])


REFERENCED_EXAMPLES = {
    "tickets.yaml": """
examples:
  - question: tickets whose status is a project's status
    steps:
      - {output_key: prev, source: tickets, operation: listProjects, params: {}}
      - {output_key: t, source: tickets, operation: listTickets, params: {status: "<prev.status>"}}
""",
    "tracker.yaml": """
examples:
  - question: as many contacts as project ids
    steps:
      - {output_key: prev, source: tracker, query: "{ projects { id } }"}
      - {output_key: c, source: tracker, query: "query($n: Int) { contacts(first: $n) { name } }",
         variables: {n: "<prev.id>"}}
""",
}


def test_check_accepts_a_reference_into_an_enum_and_refuses_a_literal_outside_it(
        manifests: Path, tmp_path: Path, capabilities: CapabilitySet) -> None:
    import shutil

    from typer.testing import CliRunner

    from structq.cli import app

    copy = tmp_path / "m"
    shutil.copytree(manifests, copy)
    for name, examples in REFERENCED_EXAMPLES.items():
        (copy / name).write_text((copy / name).read_text() + examples)
    accepted = CliRunner().invoke(app, ["check", "-m", str(copy)])
    assert accepted.exit_code == 0, accepted.output

    tickets = copy / "tickets.yaml"
    tickets.write_text(tickets.read_text().replace('{status: "<prev.status>"}', "{status: pending}"))
    refused_ = CliRunner().invoke(app, ["check", "-m", str(copy)])
    assert refused_.exit_code == 3, refused_.output
    assert "step 't': the sandbox refuses it: [enum_value]" in refused_.stderr and "tracker.yaml" not in refused_.stderr


# --- a question answered with API steps ---------------------------------------------------------

def test_an_answer_cites_api_steps_and_the_audit_keeps_no_values(capabilities: CapabilitySet, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from structq.agent import Agent
    from structq.agent.audit import AuditLog
    from structq.config import Settings
    from tests.scripted import plan_reply, scripted, text_reply

    plan = {"reasoning": "active projects, then their open tickets", "steps": [
        {"output_key": "p", "source": "tracker", "purpose": "active projects",
         "query": '{ projects(status: "active") { name } }'},
        {"output_key": "t", "source": "tickets", "purpose": "their open tickets", "operation": "listTickets",
         "params": {"project": "<p.name>", "status": "open"}},
    ], "answer_with": "list the tickets"}
    model = scripted(plan_reply(plan), text_reply("One open ticket in apollo: login fails [t]."))
    agent = Agent(capabilities, llm=model, settings=Settings(llm=None), cache=None,
                  audit=AuditLog(tmp_path / "audit.jsonl"))
    try:
        answer = agent.ask("Which open tickets do the active projects have?", vars=TENANT_1)
    finally:
        agent.engine.close()
    prompt = model.prompt_text(0)
    assert "query field projects(" in prompt and "operation listTickets (GET /api/tickets)" in prompt
    assert "email" not in prompt and "salary" not in prompt
    assert [(c["step"], c["source"]) for c in answer.citations] == [("p", "tracker"), ("t", "tickets")]
    assert answer.citations[1]["query"] == {"operation": "listTickets", "path": "/api/tickets", "requests": 1}
    line = (tmp_path / "audit.jsonl").read_text()
    assert "apollo" not in line and "login fails" not in line and "structq_tenantId" in line


# --- the worked example of docs/api-sources.md, run as written ----------------------------------

DOC = Path(__file__).resolve().parent.parent / "docs" / "api-sources.md"


def _doc_files() -> dict[str, str]:
    """The doc's code blocks whose first line is ``# file: NAME``, by name."""
    import re

    blocks = re.findall(r"```yaml\n# file: (\S+)\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)
    return {name: text for name, text in blocks}


def test_the_docs_worked_example_runs_as_written(manifests: Path, tmp_path: Path, graphql_server: Served,
                                                 rest_server: Served) -> None:
    from typer.testing import CliRunner

    from structq.cli import app

    files = _doc_files()
    assert set(files) == {"tracker.yaml", "tickets.yaml", "plan.yaml"}
    folder = tmp_path / "capabilities"
    folder.mkdir()
    for name in ("tracker.yaml", "tickets.yaml"):
        (folder / name).write_text(files[name], encoding="utf-8")
    (folder / "tracker.graphql").write_text((manifests / "tracker.graphql").read_text(), encoding="utf-8")
    (folder / "crm.yaml").write_text((manifests / "crm.yaml").read_text(), encoding="utf-8")
    plan = tmp_path / "plan.yaml"
    plan.write_text(files["plan.yaml"], encoding="utf-8")

    result = CliRunner().invoke(app, ["run", str(plan), "-m", str(folder), "--var", "tenant_id=1", "--json"],
                                env={"TRACKER_URL": graphql_server.url, "TICKETS_URL": rest_server.url,
                                     "STRUCTQ_AUDIT": "0", "STRUCTQ_CACHE": "0"})
    assert result.exit_code == 0, (result.output, result.exception)
    out = json.loads(result.stdout)
    steps = {s["output_key"]: s for s in out["results"]["steps"]} if "results" in out else {
        s["output_key"]: s for s in out["steps"]}
    final = steps["accounts"]
    assert [dict(zip(final["columns"], row)) for row in final["rows"]] == [{"account": "ACME", "project": "apollo"}]
    assert "| ACME | apollo |" in DOC.read_text(encoding="utf-8")
    assert "secret-t2" not in result.stdout


def test_a_fan_out_runs_at_most_max_concurrency_requests_at_once(capabilities: CapabilitySet,
                                                                 rest_server: Served) -> None:
    before = rest_server.hits["GET"]
    with Engine(_with_limits(capabilities, "tickets", max_concurrency=2)) as engine:
        result = engine.run(Plan.parse({"steps": [
            {"output_key": "v", "source": "crm", "query": "SELECT account FROM accounts UNION ALL SELECT project FROM accounts"},
            {"output_key": "e", "source": "tickets", "operation": "echoValue", "params": {"value": "<v.account>"}},
        ]}), vars=TENANT_1)
    assert len(result.final.rows) == 6 and rest_server.hits["GET"] == before + 6
    assert max(r[1] for r in result.final.rows) <= 2  # the server never saw more than two at once


# --- manifests and the command line -------------------------------------------------------------

MANIFEST_PROBLEMS = [
    ("a graphql row filter on an undeclared argument",
     "- {field: Query.projects, argument: tenant, value: \":t\"}", "declares no argument 'tenant'"),
    ("a graphql row filter outside Query", "- {field: Project.name, argument: tenantId, value: \":t\"}",
     "root query field"),
    ("a graphql row filter in the REST form", "- {operation: projects, parameter: tenantId, value: \":t\"}",
     "exactly 'field', 'argument' and 'value'"),
]


@pytest.mark.parametrize(("line", "message"), [c[1:] for c in MANIFEST_PROBLEMS], ids=[c[0] for c in MANIFEST_PROBLEMS])
def test_a_manifest_problem_is_reported_where_it_is(manifests: Path, tmp_path: Path, graphql_server: Served,
                                                    line: str, message: str) -> None:
    from structq.capabilities import load_manifest_text
    from structq.errors import ManifestError

    text = (manifests / "tracker.yaml").read_text().split("policies:")[0] + f"policies:\n  row_filters:\n    {line}\n"
    manifest, positions = load_manifest_text(text, str(tmp_path / "tracker.yaml"), env={"TRACKER_URL": "http://x"})
    with pytest.raises(ManifestError, match=message) as info:
        CapabilitySet([manifest], [positions])
    assert info.value.line is not None


def test_structq_sandbox_checks_api_queries(manifests: Path, capabilities: CapabilitySet) -> None:
    from typer.testing import CliRunner

    from structq.cli import app

    runner = CliRunner()
    env = {"STRUCTQ_AUDIT": "0", "STRUCTQ_CACHE": "0"}
    ok = runner.invoke(app, ["sandbox", "-m", str(manifests), "-s", "tracker", "{ projects { name } }",
                             "--var", "tenant_id=1", "--json"], env=env)
    assert ok.exit_code == 0, ok.output
    assert "tenantId: $structq_tenantId" in json.loads(ok.stdout)["query"]["query"]
    refused_call = runner.invoke(app, ["sandbox", "-m", str(manifests), "-s", "tickets",
                                       '{"operation": "deleteTicket", "params": {"ticket_id": 1}}', "--json"], env=env)
    assert refused_call.exit_code != 0 and "not_callable" in refused_call.output


def test_api_and_search_steps_feed_each_other(demo_capabilities: CapabilitySet, capabilities: CapabilitySet) -> None:
    """The demo's weekly reports on the embedded search server, beside the REST source."""
    both = CapabilitySet([*demo_capabilities, capabilities["tickets"]])
    with Engine(both) as engine:
        result = engine.run(Plan.parse({"steps": [
            {"output_key": "e", "source": "tickets", "operation": "echoValue", "params": {"value": "星火"}},
            {"output_key": "n", "source": "reports", "index": "weekly_reports",
             "query": {"size": 0, "query": {"bool": {"filter": [{"terms": {"projects_mentioned": "<e.value>"}}]}}}},
            {"output_key": "d", "source": "reports", "index": "weekly_reports",
             "query": {"size": 0, "aggs": {"d": {"terms": {"field": "department", "size": 2, "order": {"_key": "asc"}}}}}},
            {"output_key": "back", "source": "tickets", "operation": "echoValue", "params": {"value": "<d.d>"}},
        ]}), vars=TENANT_1)
    assert result.steps["n"].rows[0][0] > 0
    departments = [row[0] for row in result.steps["d"].rows]
    assert len(departments) == 2 and sorted(r[0] for r in result.steps["back"].rows) == sorted(departments)


def test_an_unreachable_api_gives_a_partial_answer(capabilities: CapabilitySet) -> None:
    from tests.servers import LOOPBACK, free_port

    tickets = capabilities["tickets"].model_copy(update={"url": f"http://{LOOPBACK}:{free_port()}"})
    both = CapabilitySet([tickets if m.source == "tickets" else m for m in capabilities])
    with Engine(both) as engine:
        result = _run(engine, [
            {"output_key": "t", "source": "tickets", "operation": "listTickets", "params": {}},
            {"output_key": "a", "source": "crm", "query": "SELECT account FROM accounts ORDER BY account"},
        ])
    assert result.steps["t"].skipped is not None and "unreachable" in result.steps["t"].skipped
    assert [r[0] for r in result.steps["a"].rows] == ["ACME", "Globex", "Initech"]
    assert any("partial answer" in note for note in result.notes)
