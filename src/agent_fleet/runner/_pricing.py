"""Price tables: token usage by kind -> a cost, per model.

A price table is a TOML or JSON file (chosen by its suffix; anything not ``.json`` is read as TOML)::

    currency = "USD"            # optional, default USD
    [models."gpt-5.5"]          # prices per million tokens
    input = 1.25                # uncached input tokens
    cached_input = 0.125        # cached input tokens (default: the input price)
    output = 10.0               # output tokens, reasoning included
    [models."*"]                # optional: any model not listed
    input = 1.0
    output = 4.0

``input_tokens`` counts cached tokens too (the OpenAI convention every provider here maps to), so the
cost is ``(input - cached) * input + cached * cached_input + output * output``, over a million.
A model with no price (and no ``"*"``) has no cost (``None``), never a guessed one.
"""

from __future__ import annotations

import json
import math
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_fleet.errors import UsageError

__all__ = ["ModelPrice", "PriceTable", "load_prices"]

_KINDS = ("input", "cached_input", "output")


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelPrice:
    """Prices per million tokens."""

    input: float
    output: float
    cached_input: float | None = None

    def cost(self, *, input_tokens: int, cached_input_tokens: int, output_tokens: int) -> float:
        cached = min(cached_input_tokens, input_tokens)
        cached_price = self.input if self.cached_input is None else self.cached_input
        total = (input_tokens - cached) * self.input + cached * cached_price + output_tokens * self.output
        return total / 1_000_000


@dataclass(frozen=True, slots=True, kw_only=True)
class PriceTable:
    models: dict[str, ModelPrice]
    currency: str = "USD"

    def price(self, model: str | None) -> ModelPrice | None:
        if model is not None and model in self.models:
            return self.models[model]
        return self.models.get("*")

    def cost(self, model: str | None, tokens: dict[str, int] | None) -> float | None:
        """The cost of ``tokens`` (``input``, ``cached_input``, ``output`` counts) on ``model``."""
        price = self.price(model)
        if price is None or tokens is None:
            return None
        return round(
            price.cost(
                input_tokens=tokens.get("input", 0),
                cached_input_tokens=tokens.get("cached_input", 0),
                output_tokens=tokens.get("output", 0),
            ),
            6,
        )

    @classmethod
    def from_mapping(cls, data: Any, *, source: str = "price table") -> PriceTable:
        """Validate a parsed table. Raises ``UsageError`` naming what is wrong."""
        if not isinstance(data, dict):
            raise UsageError(f"{source}: expected a table")
        unknown = sorted(set(data) - {"currency", "models"})
        if unknown:
            raise UsageError(f"{source}: unknown key(s) {', '.join(unknown)}; allowed: currency, models")
        currency = data.get("currency", "USD")
        if not isinstance(currency, str) or not currency:
            raise UsageError(f"{source}: 'currency' must be a non-empty string")
        models = data.get("models")
        if not isinstance(models, dict) or not models:
            raise UsageError(f'{source}: no [models."<name>"] tables')
        out: dict[str, ModelPrice] = {}
        for name, entry in models.items():
            where = f"{source}: model {name!r}"
            if not isinstance(entry, dict):
                raise UsageError(f"{where}: expected a table of prices")
            bad = sorted(set(entry) - set(_KINDS))
            if bad:
                raise UsageError(f"{where}: unknown key(s) {', '.join(bad)}; allowed: {', '.join(_KINDS)}")
            values: dict[str, float] = {}
            for kind in _KINDS:
                value = entry.get(kind)
                if value is None:
                    continue
                if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                    raise UsageError(f"{where}: {kind!r} must be a number")
                if value < 0:
                    raise UsageError(f"{where}: {kind!r} must not be negative")
                values[kind] = float(value)
            if "input" not in values or "output" not in values:
                raise UsageError(f"{where}: 'input' and 'output' prices are required")
            out[name] = ModelPrice(
                input=values["input"], output=values["output"], cached_input=values.get("cached_input")
            )
        return cls(models=out, currency=currency)


def load_prices(path: str | os.PathLike[str]) -> PriceTable:
    """Read a price table (TOML, or JSON for a ``.json`` file). Raises ``UsageError``."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read the price table {str(p)!r}: {exc}") from exc
    try:
        data = json.loads(text) if p.suffix.lower() == ".json" else tomllib.loads(text)
    except ValueError as exc:  # json.JSONDecodeError and tomllib.TOMLDecodeError are ValueErrors
        raise UsageError(f"the price table {str(p)!r} is not valid {p.suffix or 'TOML'}: {exc}") from exc
    return PriceTable.from_mapping(data, source=p.name)
