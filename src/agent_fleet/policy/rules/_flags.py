"""Option spelling for the programs whose flags decide a built-in rule: GNU long options may be
abbreviated (``rm --recu``), short ones bundled (``-rf``) and placed after operands."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["LONG_OPTIONS", "canonical", "short_flags"]

#: Long options of the programs whose flags decide a rule, for GNU-style abbreviations (``--recu``).
LONG_OPTIONS: dict[str, tuple[str, ...]] = {
    "rm": (
        "force",
        "interactive",
        "one-file-system",
        "no-preserve-root",
        "preserve-root",
        "recursive",
        "dir",
        "verbose",
        "help",
    ),
    "chmod": (
        "changes",
        "silent",
        "quiet",
        "verbose",
        "no-preserve-root",
        "preserve-root",
        "reference",
        "recursive",
        "help",
    ),
    "chown": (
        "changes",
        "silent",
        "quiet",
        "verbose",
        "dereference",
        "no-dereference",
        "from",
        "no-preserve-root",
        "preserve-root",
        "reference",
        "recursive",
        "help",
    ),
}
LONG_OPTIONS["chgrp"] = LONG_OPTIONS["chown"]


def canonical(name: str, options: tuple[str, ...]) -> str:
    """The long option ``name`` abbreviates (GNU getopt: an exact name or a unique prefix)."""
    if not options or name in options:
        return name
    matches = [option for option in options if option.startswith(name)]
    return matches[0] if len(matches) == 1 else name


def short_flags(args: Sequence[str], program: str = "") -> tuple[set[str], list[str]]:
    """Split ``args`` into option letters/long names and operands (options may follow operands)."""
    options = LONG_OPTIONS.get(program, ())
    flags: set[str] = set()
    operands: list[str] = []
    for i, arg in enumerate(args):
        if arg == "--":
            operands.extend(args[i + 1 :])
            break
        if arg.startswith("--"):
            flags.add(canonical(arg[2:].partition("=")[0], options))
        elif arg.startswith("-") and len(arg) > 1:
            flags.update(arg[1:])
        else:
            operands.append(arg)
    return flags, operands
