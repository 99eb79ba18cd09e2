"""Tenant-blind search on row-filtered indices: how many generated request bodies are accepted,
how many answer identically with and without other tenants' documents, and how many would
have told them apart had the query been scored beside the row filter (the former rewrite).

Builds the two indices of ``tests/tenant_blind_support.py`` on a fresh osmem-server
(``tb_alone``: tenant t1 only; ``tb_mixed``: t1 among t2), draws bodies from the same
generator as the property test, and prints counts, plus the median time of one search in
filter context against the same search scored. Figures only; nothing is asserted.

Run: ``python bench/tenant_blind.py [N]`` (default 400 bodies)
"""

from __future__ import annotations

import collections
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from hypothesis import HealthCheck, given, settings  # noqa: E402

from search_support import load_indices, raw_client, search_executor  # noqa: E402
from structq.errors import ExecutionError, SandboxViolation  # noqa: E402
from structq.executors.search import embedded_server  # noqa: E402
from structq.safety import check_dsl  # noqa: E402
from tenant_blind_support import ALONE, MIXED, T1_DOCS, bodies, make_manifest, mixed_documents  # noqa: E402

VARS = {"tenant_id": "t1"}


def scored(body: dict[str, Any]) -> dict[str, Any]:
    """The checked body as the former rewrite sent it: the query in ``must`` (scored)."""
    original, *filters = body["query"]["bool"]["filter"]
    return {**body, "query": {"bool": {"must": [original], "filter": filters}}}


def hits(client: Any, index: str, body: dict[str, Any]) -> tuple[float, list[tuple[Any, Any]]]:
    started = time.perf_counter()
    response = client.search(index=index, body=body)
    elapsed = time.perf_counter() - started
    return elapsed, [(h["_id"], h.get("_score")) for h in response["hits"]["hits"]]


def main(n: int) -> None:
    from osmem_server import OsmemServer

    counts: collections.Counter[str] = collections.Counter()
    times: dict[str, list[float]] = {"filter context": [], "scored": []}
    with OsmemServer.start(addr="127.0.0.1:0") as server:
        mapping = embedded_server.index_mapping(make_manifest().index(ALONE))
        load_indices(server.url, [(ALONE, mapping, T1_DOCS), (MIXED, mapping, mixed_documents())])
        manifest = make_manifest(server.url)
        with search_executor(manifest) as executor, raw_client(server.url) as client:

            @settings(max_examples=n, deadline=None, database=None, suppress_health_check=list(HealthCheck))
            @given(body=bodies)
            def one(body: dict[str, Any]) -> None:
                try:
                    safe = {i: check_dsl(body, manifest, i, vars=VARS) for i in (ALONE, MIXED)}
                except SandboxViolation as exc:
                    counts[f"refused: {exc.code}"] += 1
                    return
                try:
                    same = executor.fetch(safe[ALONE]).rows == executor.fetch(safe[MIXED]).rows
                except ExecutionError:
                    counts["engine error (both)"] += 1
                    return
                counts["accepted, identical" if same else "accepted, DIFFERENT"] += 1
                if "query" in body and not body.get("aggs"):
                    was = [hits(client, i, scored(safe[i].body)) for i in (ALONE, MIXED)]
                    now = hits(client, MIXED, safe[MIXED].body)
                    times["scored"].append(was[1][0])
                    times["filter context"].append(now[0])
                    counts["with a query: scored would differ"] += was[0][1] != was[1][1]
                    counts["with a query: total"] += 1

            one()

    print(f"{n} generated bodies (tenant t1; tb_mixed holds {len(mixed_documents())} documents, "
          f"{len(T1_DOCS)} of them t1's)")
    for name, count in sorted(counts.items()):
        print(f"  {name:<40} {count:>5}")
    for name, values in times.items():
        if values:
            print(f"  median search, {name:<24} {statistics.median(values) * 1000:7.2f} ms")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 400)
