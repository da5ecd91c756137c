"""The contract's own checks: prompt text and the idle limit are refused before any provider runs."""

from __future__ import annotations

import math

import pytest

from agent_fleet import Spec
from agent_fleet.contract import DEFAULT_IDLE_TIMEOUT, check_text, refuse_turn_settings
from agent_fleet.errors import Unsupported, UsageError


@pytest.mark.parametrize("prompt", ["lone \udcff surrogate", "\ud800", "half a pair \udc00 here"])
def test_a_prompt_that_is_not_text_is_a_usage_error(prompt: str) -> None:
    with pytest.raises(UsageError, match="not valid text"):
        Spec(prompt=prompt)


def test_check_text_accepts_any_unicode() -> None:
    assert check_text("naïve 日本 🎉 \x00") == "naïve 日本 🎉 \x00"
    with pytest.raises(UsageError, match="the injected text"):
        check_text("\udfff", "the injected text")


def test_idle_timeout_default_and_bounds() -> None:
    assert Spec(prompt="p").idle_timeout == DEFAULT_IDLE_TIMEOUT > 0
    assert Spec(prompt="p", idle_timeout=0).idle_timeout == 0  # off
    assert Spec(prompt="p", idle_timeout=None).idle_timeout is None  # off
    for bad in (-1.0, math.nan, math.inf):
        with pytest.raises(ValueError):
            Spec(prompt="p", idle_timeout=bad)


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf, -math.inf])
def test_a_turn_timeout_must_be_a_finite_positive_number(bad: float) -> None:
    # nan compares false with everything: "timeout <= 0" alone let it through, and a turn timer of nan
    # seconds never fires (inf neither: None is the way to say "no limit").
    with pytest.raises(ValueError, match=r"Spec\.timeout"):
        Spec(prompt="p", timeout=bad)
    assert Spec(prompt="p", timeout=None).timeout is None
    assert Spec(prompt="p", timeout=0.5).timeout == 0.5


def test_env_names_and_values_are_checked() -> None:
    assert Spec(prompt="p", env={"CI": "1", "_X9": ""}).env == {"CI": "1", "_X9": ""}
    for bad in ({"1BAD": "x"}, {"A-B": "x"}, {"": "x"}, {"A": 1}, {"A": "nul\0"}):
        with pytest.raises(ValueError, match=r"Spec\.env"):
            Spec(prompt="p", env=bad)  # type: ignore[arg-type]


def test_refuse_turn_settings_names_the_first_setting_given() -> None:
    refuse_turn_settings("P", model=None, sandbox=None)  # none given: nothing to refuse
    with pytest.raises(Unsupported, match=r"P cannot change sandbox for one turn") as info:
        refuse_turn_settings("P", model=None, sandbox="read-only", cwd="/x")
    assert info.value.code == "unsupported"
