"""Shape drift in the parts of codex's messages that decide what an approval is about.

A newer (or older) codex may spell a field differently (``movePath`` where 0.163 sends ``move_path``)
or add a kind (a change kind after ``add``/``delete``/``update``). Judged on the fields it knows, the
bridge would miss what the unknown one says (a rename's destination, a new permission), so a request
whose safety-deciding parts carry anything not listed here is declined, and the notice names the field.
Only these parts are checked: the file changes of a change item or a legacy patch approval, and a
requested permission profile (a command's ``additionalPermissions``, a permission request). Other
fields codex adds to a request (metadata, proposed amendments we never choose) do not change what it is
about and are ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = ["change_drift", "legacy_change_drift", "profile_drift"]

_CHANGE: Final = frozenset({"path", "kind", "diff"})
#: v2 ``PatchChangeKind`` by its ``type``: the keys each may carry.
_KINDS: Final[Mapping[str, frozenset[str]]] = {
    "add": frozenset({"type"}),
    "delete": frozenset({"type"}),
    "update": frozenset({"type", "move_path"}),
}
#: legacy ``FileChange`` (``applyPatchApproval.fileChanges`` values) by its ``type``.
_LEGACY: Final[Mapping[str, frozenset[str]]] = {
    "add": frozenset({"type", "content"}),
    "delete": frozenset({"type", "content"}),
    "update": frozenset({"type", "unified_diff", "move_path"}),
}
_PROFILE: Final = frozenset({"fileSystem", "network"})
_FILE_SYSTEM: Final = frozenset({"entries", "globScanMaxDepth", "read", "write"})
_NETWORK: Final = frozenset({"enabled"})


def _extra(value: Mapping[str, Any], known: frozenset[str], where: str) -> str | None:
    unknown = sorted(k for k in value if k not in known)
    return f"{where}.{unknown[0]}" if unknown else None


def _typed(value: Any, kinds: Mapping[str, frozenset[str]], where: str) -> str | None:
    if isinstance(value, str):  # a bare kind name (as some versions and our own mapping write it)
        return None if value in kinds else f"{where} {value!r}"
    if not isinstance(value, Mapping):
        return None  # not an object: the type checks of the bridge decline it as malformed
    kind = value.get("type")
    if kind not in kinds:
        return f"{where}.type {kind!r}"
    return _extra(value, kinds[str(kind)], where)


def change_drift(change: Mapping[str, Any], where: str = "change") -> str | None:
    """The first field of a v2 ``FileUpdateChange`` this version does not know, or None."""
    return _extra(change, _CHANGE, where) or _typed(change.get("kind"), _KINDS, f"{where}.kind")


def legacy_change_drift(change: Any, where: str = "fileChanges") -> str | None:
    """The first field of a legacy ``FileChange`` this version does not know, or None."""
    return _typed(change, _LEGACY, where)


def profile_drift(profile: Any, where: str = "permissions") -> str | None:
    """The first field of a requested permission profile this version does not know, or None."""
    if not isinstance(profile, Mapping):
        return None
    found = _extra(profile, _PROFILE, where)
    file_system, network = profile.get("fileSystem"), profile.get("network")
    if found is None and isinstance(file_system, Mapping):
        found = _extra(file_system, _FILE_SYSTEM, f"{where}.fileSystem")
    if found is None and isinstance(network, Mapping):
        found = _extra(network, _NETWORK, f"{where}.network")
    return found
