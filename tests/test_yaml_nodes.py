"""The loader's shortcuts through PyYAML give PyYAML's own answers.

``yamlnodes`` resolves tags and builds data its own (faster) way; for any text and any data
the result must be what ``yaml.SafeLoader`` gives: the same tags, the same values and types.
"""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from yaml_support import DATA, PLAIN_WORDS, same

from structq.capabilities import yamlnodes

@settings(max_examples=300, deadline=None)
@given(PLAIN_WORDS | st.text(max_size=12), st.booleans(), st.booleans(),
       st.sampled_from([yaml.ScalarNode, yaml.MappingNode, yaml.SequenceNode]))
def test_tags_resolve_as_the_safe_loader_resolves_them(value: str, plain: bool, quoted: bool, kind: type) -> None:
    composer = yamlnodes._Composer("")
    expected = yaml.SafeLoader("").resolve(kind, value, (plain, quoted))
    assert composer.resolve(kind, value, (plain, quoted)) == expected
    assert composer.resolve(kind, value, (plain, quoted)) == expected  # memoised




@settings(max_examples=200, deadline=None)
@given(DATA, st.sampled_from([None, True, False]))
def test_data_is_built_as_the_safe_loader_builds_it(data: Any, flow: bool | None) -> None:
    text = yaml.safe_dump({"data": data}, default_flow_style=flow, allow_unicode=True)
    built, expansions = yamlnodes.build(yamlnodes.compose(text, "f.yaml"), "f.yaml")
    assert same(built, yaml.load(text, Loader=yaml.SafeLoader))
    assert expansions == []
