"""Helpers the search tests share: loading test indices onto the engine on loopback.

The executor suite and the DSL red-team suite both start from fresh indices with known
documents; one loader keeps the two setups from drifting apart.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["load_indices"]


def load_indices(url: str,
                 indices: Iterable[tuple[str, Mapping[str, Any] | None, Iterable[Mapping[str, Any]]]]) -> None:
    """Make each ``(index, mapping, docs)`` again at ``url`` and bulk-load its documents.

    An index that exists is dropped first, so every run starts from the same data. ``mapping``
    None creates the index without one (an index the manifest does not declare). Each
    document's ``_id`` key is its id, not a field; the load is refreshed, so searches see it.
    """
    from opensearchpy import OpenSearch

    client = OpenSearch(hosts=[url], timeout=30)
    try:
        for index, mapping, docs in indices:
            if client.indices.exists(index=index):
                client.indices.delete(index=index)
            client.indices.create(index=index, body={"mappings": mapping} if mapping is not None else {})
            lines: list[dict[str, Any]] = []
            for doc in docs:
                doc = dict(doc)
                lines += [{"index": {"_index": index, "_id": doc.pop("_id")}}, doc]
            assert not client.bulk(body=lines, refresh=True)["errors"]
    finally:
        client.close()
