"""Schema linking: the few tables, columns and stored values a question needs.

``select(question, capabilities)`` ranks the manifests' tables lexically (BM25 over names,
descriptions, synonyms, values and example questions; words and CJK character n-grams),
adds tables whose stored values the question names (the value index), closes the choice over
FK join paths, and returns a ``Selection`` the planner renders instead of the whole catalogue.
No embeddings, no executor: linking reads the manifests and the ``.values/`` files only.
"""

from .confidence import Confidence
from .index import LinkingIndex, linking_index
from .select import Budget, Kept, Selection, select
from .tokens import terms
from .repair import names_to_restore
from .values import ValueIndex, ValueMatch, eligible_columns, load_values, values_fingerprint, values_path

__all__ = [
    "Budget",
    "Confidence",
    "Kept",
    "LinkingIndex",
    "Selection",
    "ValueIndex",
    "ValueMatch",
    "eligible_columns",
    "linking_index",
    "load_values",
    "names_to_restore",
    "select",
    "terms",
    "values_fingerprint",
    "values_path",
]
