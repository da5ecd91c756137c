"""The exec-server client and the test kit load without the provider stack, the policy or tree-sitter.

Each import runs in a fresh interpreter, so what another test already imported cannot hide a leak.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

_HEAVY = ("agent_fleet.policy", "tree_sitter", "agent_fleet.codex", "agent_fleet.claude")


def _loaded_after(module: str) -> list[str]:
    code = f"import json, sys, {module}; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    names: list[str] = json.loads(out)
    return names


@pytest.mark.parametrize("module", ["agent_fleet.execserver", "agent_fleet.testing"])
def test_light_import(module: str) -> None:
    loaded = _loaded_after(module)
    assert module in loaded  # the probe really imported it
    leaked = [name for name in loaded if any(name == h or name.startswith(h + ".") for h in _HEAVY)]
    assert leaked == [], f"importing {module} loaded {leaked}"
