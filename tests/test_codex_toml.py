from __future__ import annotations

import tomllib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_fleet._codex_toml import config_args, toml_value
from agent_fleet.errors import UsageError


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (True, "true"),
        (3, "3"),
        (1.5, "1.5"),
        ('a"b', '"a\\"b"'),
        ([1, "x"], '[1, "x"]'),
        ({"base_url": "http://h/v1", "n": 1}, '{base_url = "http://h/v1", n = 1}'),
        ({"a.b": True}, '{"a.b" = true}'),
    ],
)
def test_toml_value(value: Any, expected: str) -> None:
    assert toml_value(value) == expected


@pytest.mark.parametrize("bad", [None, float("nan"), object(), {1: 2}])
def test_toml_value_rejects(bad: Any) -> None:
    with pytest.raises(UsageError):
        toml_value(bad)


def test_config_args() -> None:
    assert config_args({"model": "gpt-5.5", "model_providers.local": {"wire_api": "responses"}}) == [
        "-c",
        'model="gpt-5.5"',
        "-c",
        'model_providers.local={wire_api = "responses"}',
    ]


scalars = st.one_of(
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.text(),
    st.floats(allow_nan=False, allow_infinity=False),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(), inner, max_size=4)),
    max_leaves=12,
)


@given(values)
def test_round_trips_through_a_toml_parser(value: Any) -> None:
    assert tomllib.loads("x = " + toml_value(value))["x"] == value
