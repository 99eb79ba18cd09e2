"""The HTTP API fuzzed from its own OpenAPI document (schemathesis, in process over ASGI).

For every operation ``/openapi.json`` lists, schemathesis generates requests that fit the
document (positive) and requests that do not (negative), sends them with a valid token to the
app on the two-tenant shop (a real SQLite file; no model, so an open question is a 503
``not_configured``, as the document says), and every response must pass:

- schemathesis' own conformance checks: a documented status, a documented content type, a
  body that fits the documented schema;
- ``no_internals`` (ours): no 500, no traceback, no path inside the package or the virtualenv,
  and a body that is strict JSON (no ``NaN``, valid UTF-8) — or, for ``?stream=1``, events whose
  data are.

Bounded and reproducible: ``EXAMPLES`` cases per operation and mode, derandomized (the same
cases every run), no example database, no deadline (a loaded machine is slow; nothing here
measures time). The whole module runs in under a minute on two busy cores.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import CheckContext
from schemathesis.core.transport import Response
from schemathesis.generation import GenerationMode
from schemathesis.checks import content_type_conformance, response_schema_conformance, status_code_conformance
from server_support import auth, build_shop

from structq.capabilities import CapabilitySet
from structq.config import Settings
from structq.server.app import create_app
from structq.server.config import ServerConfig
from structq.server.service import Service
from structq.server.store import Store

#: Cases per operation and generation mode.
EXAMPLES = 80
#: What no response may show: Python's insides.
INTERNALS = ("Traceback (most recent call last)", "/structq/", "site-packages", 'File "')


def _no_constant(name: str) -> Any:
    raise AssertionError(f"the response holds {name}, which is no JSON")


def no_internals(ctx: CheckContext, response: Response, case: Any) -> bool | None:
    """No 500, no Python internals, strict JSON (or a stream of strict JSON events)."""
    if response.status_code == 500:
        raise AssertionError(f"500 for {case.method} {case.path}: {response.content[:300]!r}")
    text = response.content.decode("utf-8")  # valid UTF-8, or this raises
    for words in INTERNALS:
        if words in text:
            raise AssertionError(f"the response shows {words!r}: {text[:300]}")
    if case.method.upper() == "HEAD" or not text:
        return None
    content_type = (response.headers.get("content-type") or [""])[0]
    if content_type.startswith("text/event-stream"):
        for line in text.splitlines():
            if line.startswith("data: "):
                json.loads(line[len("data: "):], parse_constant=_no_constant)
        return None
    if not content_type.startswith("application/json"):
        raise AssertionError(f"a {content_type or 'typeless'} body: {text[:200]}")
    json.loads(text, parse_constant=_no_constant)
    return None


CHECKS = [no_internals, status_code_conformance, content_type_conformance, response_schema_conformance]


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    directory = tmp_path_factory.mktemp("fuzz")
    shop = build_shop(directory, requests_per_minute=1_000_000, burst=1_000_000)
    capabilities = CapabilitySet.from_path(shop.manifests)
    config = ServerConfig.from_file(shop.config, sources=capabilities.names)
    agent = Service.agent_for(capabilities, llm=None, settings=Settings(llm=None, cache_enabled=False, audit_enabled=False))
    # A store in a file: schemathesis may call the app from a new thread each time, and an
    # in-memory SQLite database is one per connection.
    service = Service(agent, config, Store(f"sqlite:///{directory / 'store.db'}"))
    yield schemathesis.openapi.from_asgi("/openapi.json", create_app(service, mcp=False))
    service.close()


def _operations() -> list[str]:
    """Every operation of the document, read from an app over a throwaway shop (collection
    happens before fixtures exist; the test itself fuzzes the fixture's app)."""
    import tempfile

    shop = build_shop(Path(tempfile.mkdtemp(prefix="structq-fuzz-")))
    capabilities = CapabilitySet.from_path(shop.manifests)
    config = ServerConfig.from_file(shop.config, sources=capabilities.names)
    agent = Service.agent_for(capabilities, llm=None, settings=Settings(llm=None, cache_enabled=False, audit_enabled=False))
    service = Service(agent, config)
    try:
        document = create_app(service, mcp=False).openapi()
    finally:
        service.close()
    return sorted(f"{method.upper()} {path}" for path, methods in document["paths"].items() for method in methods)


#: Each operation in the modes it has cases for: a request that does not fit the document
#: needs something to get wrong (a body or a parameter: the POST operations).
CASES = [(operation, mode) for operation in _operations()
         for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
         if mode is GenerationMode.POSITIVE or operation.startswith("POST ")]


@pytest.mark.parametrize("operation,mode", CASES, ids=[f"{o}-{m}" for o, m in CASES])
def test_every_operation_survives_generated_requests(api: Any, operation: str, mode: GenerationMode) -> None:
    method, path = operation.split(" ", 1)
    found = api[path][method]

    @settings(max_examples=EXAMPLES, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(case=found.as_strategy(generation_mode=mode))
    def fuzz(case: Any) -> None:
        response = case.call(headers=auth("tenant1"))
        case.validate_response(response, checks=CHECKS)

    fuzz()


def test_every_api_operation_refuses_a_missing_token(api: Any) -> None:
    """The same document, no token: every ``/v1`` operation answers 401 whatever the body."""
    for result in api.get_all_operations():
        operation = result.ok()
        if not operation.path.startswith("/v1/") or operation.method.upper() != "POST":
            continue  # a GET without a token is the hand-made tests' (test_server_api.py)

        @settings(max_examples=5, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck))
        @given(case=operation.as_strategy(generation_mode=GenerationMode.NEGATIVE))
        def fuzz(case: Any) -> None:
            response = case.call()
            assert response.status_code == 401, (case.method, case.path, response.status_code)

        fuzz()
