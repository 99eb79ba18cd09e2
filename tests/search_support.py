"""Helpers the search tests share: loading test indices onto the search server on loopback.

The executor suite and the DSL red-team suite both start from fresh indices with known
documents; one loader keeps the two setups from drifting apart.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

__all__ = ["load_declared", "load_indices", "raw_client", "search_executor"]


@contextmanager
def search_executor(manifest: Any) -> Iterator[Any]:
    """structq's executor for a search ``manifest``, closed at the end."""
    from structq.sources import executor_for
    from structq.executors.search.executor import SearchExecutor

    executor = executor_for(manifest)
    assert isinstance(executor, SearchExecutor)
    try:
        yield executor
    finally:
        executor.close()


@contextmanager
def raw_client(url: str) -> Iterator[Any]:
    """An opensearch-py client on ``url``, past structq: for checking what the search server itself
    answers or holds."""
    from opensearchpy import OpenSearch

    client = OpenSearch(hosts=[url], timeout=30)
    try:
        yield client
    finally:
        client.close()


def load_indices(url: str,
                 indices: Iterable[tuple[str, Mapping[str, Any] | None, Iterable[Mapping[str, Any]]]]) -> None:
    """Make each ``(index, mapping, docs)`` again at ``url`` and bulk-load its documents.

    An index that exists is dropped first, so every run starts from the same data. ``mapping``
    None creates the index without one (an index the manifest does not declare). Each
    document's ``_id`` key is its id, not a field; the load is refreshed, so searches see it.
    """
    with raw_client(url) as client:
        for index, mapping, docs in indices:
            if client.indices.exists(index=index):
                client.indices.delete(index=index)
            client.indices.create(index=index, body={"mappings": mapping} if mapping is not None else {})
            lines: list[dict[str, Any]] = []
            for doc in docs:
                doc = dict(doc)
                lines += [{"index": {"_index": index, "_id": doc.pop("_id")}}, doc]
            assert not client.bulk(body=lines, refresh=True)["errors"]


def load_declared(url: str, manifest: Any, docs: Mapping[str, Iterable[Mapping[str, Any]]]) -> str:
    """``load_indices`` with each index mapped as ``manifest`` declares it (the mapping the
    embedded search server would build), or unmapped where the manifest does not declare it; returns
    ``url``, for a module fixture that loads its indices once."""
    from structq.executors.search import embedded_server

    indices = []
    for index, documents in docs.items():
        spec = manifest.index(index)
        indices.append((index, embedded_server.index_mapping(spec) if spec is not None else None, documents))
    load_indices(url, indices)
    return url
