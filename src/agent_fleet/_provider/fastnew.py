"""Cheap construction of slots dataclasses that are built once per streamed event."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def positional_new(cls: type[T]) -> Callable[..., T]:
    """A constructor taking every field of the slots dataclass ``cls`` positionally, in order.

    It sets the slots through their descriptors instead of running ``__init__``, which for a frozen
    dataclass costs one ``object.__setattr__`` call per field: about 3x cheaper, for hot paths that
    build one object per event. No defaults and no ``__post_init__``: pass every field.
    """
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    if not names or "__slots__" not in cls.__dict__ or hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__} is not a slots dataclass without __post_init__")
    namespace: dict[str, Any] = {"new": object.__new__, "cls": cls}
    body = []
    for i, name in enumerate(names):
        namespace[f"set{i}"] = getattr(cls, name).__set__
        body.append(f"    set{i}(o, a{i})\n")
    params = ", ".join(f"a{i}" for i in range(len(names)))
    source = f"def new_{cls.__name__}({params}):\n    o = new(cls)\n{''.join(body)}    return o\n"
    exec(source, namespace)  # generated from the field count, as dataclasses generates __init__
    make: Callable[..., T] = namespace[f"new_{cls.__name__}"]
    return make
