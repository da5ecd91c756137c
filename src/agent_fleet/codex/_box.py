"""A codex session's box: its writable world in codex's sandbox, and the door out of it kept shut.

The box is the session's workspace, its own temporary directory (``Spec.temp_dir``, else a private one
made here, mode 0700, removed with the session) and the writable roots it declares. codex's
``workspace-write`` sandbox gets exactly those as writable roots: ``exclude_slash_tmp`` and
``exclude_tmpdir_env_var`` take the shared ``/tmp`` and codex's own ``TMPDIR`` out (codex 0.163
honours both, tested), and the agent's commands get the box's directory as ``TMPDIR``.

The door. Under ``approvalPolicy: "untrusted"`` (every command comes to the approval bridge) codex 0.163
re-runs a command *without* the sandbox when the sandbox denied its first run, and does not ask again
once the command's approval was accepted -- for ``accept`` as for ``acceptForSession`` (it offers
only ``accept`` for commands). The policies that never retry (``on-request``, ``never``, ``granular``
without ``sandbox_approval``) or that ask for the retry (``granular`` with it) stop sending the
bridge the commands that run inside the sandbox; denied-read rules stop every unsandboxed run,
escalations included. So the box shuts the door itself: codex runs each of the session's commands as
``bash -c SCRIPT`` with ``BASH_ENV`` pointing at a tripwire (below), which bash reads before the
script. Inside codex's sandbox the tripwire's own directory cannot be written and the script runs;
outside it, the script runs only when the approval bridge accepted exactly this script as an
escalation (a one-use grant file, written here before the accept is sent); anything else -- the
silent unsandboxed retry -- exits 1 with a message and records the refusal.

The tripwire covers commands codex runs through bash (``/bin/bash -c`` / ``-lc``, the usual shell);
for another shell (the model may pick one) it cannot, so the bridge judges such a command as one that
may run outside the sandbox. A login shell (``-lc``) reads the user's profile before the tripwire, and
what a profile runs (a bash whose parent is bash, or one without ``-c``) passes it: that is the user's
own code, which codex runs outside the sandbox in any case; the shell codex starts is never one of
those (its parent is codex). Under ``danger-full-access`` nothing is sandboxed and there is no box:
the approval policy is then the only guard.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import posixpath
import shlex
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from agent_fleet.errors import UsageError

if TYPE_CHECKING:
    from agent_fleet.contract import Spec

__all__ = ["OS_SANDBOX", "SANDBOX_DEFAULT", "Box", "bash_script", "make_box", "session_box"]

#: The sandbox of a session whose ``Spec.sandbox`` is unset: it always has a workspace.
SANDBOX_DEFAULT: Final = "workspace-write"
#: What confines the agent's commands and file writes behind the approval policy (docs/approvals.md,
#: "Walls"; ``Capabilities.os_sandbox``); nothing under ``Spec.sandbox="danger-full-access"``.
OS_SANDBOX: Final = (
    "codex's sandbox (Linux: bubblewrap + seccomp; macOS: Seatbelt): writes only in the session's box "
    "(workspace, its temporary directory, declared roots), no network"
)
_GRANTS = "grants"
_REFUSED = "refused"
_BASHES: Final = frozenset({"bash"})
_BASH_FLAGS: Final = frozenset({"-c", "-lc", "-cl"})
_counter = itertools.count(1)

_TRIPWIRE = """\
# agent-fleet: the box's tripwire, read by bash (BASH_ENV) before each command of the session.
# codex's sandbox cannot write this directory; outside the sandbox a command runs only with a grant
# the approval bridge wrote for exactly this script (an accepted escalation), used once. codex starts
# every command as `bash -c SCRIPT`: a bash without -c, or one a bash started (what a login profile
# runs before this file is read), is not one of codex's.
__af_box={box}
__af_parent=
[ -r "/proc/$PPID/comm" ] && IFS= read -r __af_parent < "/proc/$PPID/comm"
if [ -n "$BASH_EXECUTION_STRING" ] && [ "$__af_parent" != bash ] \\
  && mkdir "$__af_box/probe.$$" 2>/dev/null; then
  rmdir "$__af_box/probe.$$"
  __af_ok=
  for __af_grant in "$__af_box"/{grants}/*; do
    [ -f "$__af_grant" ] || continue
    __af_text=
    IFS= read -r -d '' __af_text < "$__af_grant"
    if [ "$__af_text" = "$BASH_EXECUTION_STRING" ] && rm -f "$__af_grant"; then
      __af_ok=1
      break
    fi
  done
  if [ -z "$__af_ok" ]; then
    printf '%s\\n' "$BASH_EXECUTION_STRING" > "$__af_box/{refused}/$$" 2>/dev/null
    echo "agent-fleet: refused to run this command outside the sandbox (codex retried it unsandboxed" \\
      "after the sandbox denied it); a command that must leave the sandbox has to ask for it" \\
      "(sandbox_permissions: require_escalated) and be approved" >&2
    exit 1
  fi
fi
unset BASH_ENV __af_box __af_parent __af_ok __af_grant __af_text
"""


def _inside(path: str, roots: tuple[str, ...]) -> bool:
    real = os.path.realpath(path)
    for root in roots:
        base = os.path.realpath(root)
        if real == base or real.startswith(base.rstrip("/") + "/"):
            return True
    return False


def bash_script(command: Any) -> str | None:
    """The script of ``bash -c SCRIPT`` (``-lc`` too) as codex shows a command (a display string or an
    argv), or ``None`` when the command does not run through bash that way."""
    if isinstance(command, str):
        try:
            argv = shlex.split(command)
        except ValueError:
            return None
    elif isinstance(command, list | tuple) and all(isinstance(word, str) for word in command):
        argv = list(command)
    else:
        return None
    if len(argv) == 3 and posixpath.basename(argv[0]) in _BASHES and argv[1] in _BASH_FLAGS:
        return argv[2]
    return None


@dataclass(slots=True, kw_only=True)
class Box:
    """One session's box (see the module docstring). ``roots`` are its writable roots besides the
    workspace (the temporary directory first); ``control`` holds the tripwire and its grants (None:
    no tripwire, e.g. under ``danger-full-access``)."""

    workspace: str
    sandbox: str
    temp_dir: str | None = None
    roots: tuple[str, ...] = ()
    control: str | None = None
    owned: tuple[str, ...] = field(default_factory=tuple)

    @property
    def sandboxed(self) -> bool:
        return self.sandbox != "danger-full-access"

    @property
    def tripwire(self) -> str | None:
        return posixpath.join(self.control, "tripwire.sh") if self.control is not None else None

    def covers(self, command: Any) -> bool:
        """A run of ``command`` outside the sandbox is stopped unless granted (it goes through bash)."""
        return self.control is not None and bash_script(command) is not None

    def grant(self, command: Any) -> bool:
        """Let one run of ``command`` happen outside the sandbox (an accepted escalation). False when
        the command does not go through the tripwire (nothing to grant) or the grant cannot be written."""
        script = bash_script(command)
        if self.control is None or script is None:
            return False
        directory = posixpath.join(self.control, _GRANTS)
        name = f"{os.getpid()}-{next(_counter)}"
        try:
            partial = posixpath.join(directory, f".{name}")
            with open(partial, "w", encoding="utf-8", newline="") as handle:
                handle.write(script)
            os.replace(partial, posixpath.join(directory, name))
        except OSError:
            return False
        return True

    def refused(self) -> list[str]:
        """The scripts the tripwire refused to run outside the sandbox since the last call (each once)."""
        if self.control is None:
            return []
        directory = posixpath.join(self.control, _REFUSED)
        found: list[str] = []
        with contextlib.suppress(OSError):
            for entry in sorted(os.scandir(directory), key=lambda e: e.name):
                with contextlib.suppress(OSError):
                    found.append(Path(entry.path).read_text(encoding="utf-8", errors="replace").rstrip("\n"))
                    os.unlink(entry.path)
        return found

    def thread_config(
        self, config: Mapping[str, Any], env: Mapping[str, str]
    ) -> tuple[dict[str, Any], dict[str, str]]:
        """``config`` with the box's sandbox settings, and ``env`` (variables for the agent's commands)
        with its ``TMPDIR`` and tripwire. Unchanged under ``danger-full-access``."""
        if not self.sandboxed:
            return dict(config), dict(env)
        out = {
            key: value
            for key, value in config.items()
            if key != "sandbox_workspace_write" and not key.startswith("sandbox_workspace_write.")
        }
        table = config.get("sandbox_workspace_write")
        merged: dict[str, Any] = dict(table) if isinstance(table, Mapping) else {}
        for key, value in config.items():
            if key.startswith("sandbox_workspace_write."):
                merged[key.removeprefix("sandbox_workspace_write.")] = value
        merged.update(writable_roots=list(self.roots), exclude_slash_tmp=True, exclude_tmpdir_env_var=True)
        out["sandbox_workspace_write"] = merged
        variables = dict(env)
        if self.temp_dir is not None:
            variables["TMPDIR"] = self.temp_dir
        if self.tripwire is not None:
            variables["BASH_ENV"] = self.tripwire
        return out, variables

    def close(self) -> None:
        """Remove what the box made (its temporary directory when it made it, the tripwire). Idempotent."""
        owned, self.owned = self.owned, ()
        for path in owned:
            shutil.rmtree(path, ignore_errors=True)


def _private_dir(prefix: str, avoid: tuple[str, ...]) -> str | None:
    """A new 0700 directory outside every path of ``avoid`` (where the agent may write)."""
    for parent in (None, os.path.join(os.path.expanduser("~"), ".cache", "agent-fleet")):
        try:
            if parent is not None:
                os.makedirs(parent, mode=0o700, exist_ok=True)
            path = tempfile.mkdtemp(prefix=prefix, dir=parent)
        except OSError:
            continue
        if not _inside(path, avoid):
            return path
        shutil.rmtree(path, ignore_errors=True)
    return None


def make_box(
    workspace: str,
    sandbox: str | None,
    temp_dir: str | os.PathLike[str] | None,
    declared: tuple[str, ...],
    *,
    tripwire: bool = True,
) -> Box:
    """The box of a session in ``workspace``: its temporary directory (``temp_dir``, created if missing,
    else a private one), its roots (that directory, then ``declared``) and, when sandboxed and
    ``tripwire`` is asked for (not for ``codex exec``, which never runs anything unsandboxed: its
    approval policy is ``never``), the tripwire. Raises ``OSError`` when a directory cannot be made."""
    mode = sandbox or SANDBOX_DEFAULT
    owned: list[str] = []
    if temp_dir is not None:
        temp = os.path.realpath(os.path.expanduser(os.fspath(temp_dir)))
        os.makedirs(temp, mode=0o700, exist_ok=True)
    else:
        temp = tempfile.mkdtemp(prefix="agent-fleet-tmp-")
        owned.append(temp)
    roots = tuple(dict.fromkeys((temp, *declared)))
    box = Box(workspace=workspace, sandbox=mode, temp_dir=temp, roots=roots, owned=tuple(owned))
    if not box.sandboxed or not tripwire:
        return box
    control = _private_dir("agent-fleet-box-", (workspace, *roots))
    if control is not None:
        for sub in (_GRANTS, _REFUSED):
            os.mkdir(posixpath.join(control, sub), 0o700)
        script = _TRIPWIRE.format(box=shlex.quote(control), grants=_GRANTS, refused=_REFUSED)
        Path(control, "tripwire.sh").write_text(script, encoding="utf-8")
        box.control = control
        box.owned = (*box.owned, control)
    return box


def session_box(workspace: str, spec: Spec, declared: tuple[str, ...], *, tripwire: bool = True) -> Box:
    """``make_box`` for ``spec``'s session; a directory that cannot be made is a ``UsageError``."""
    try:
        return make_box(workspace, spec.sandbox, spec.temp_dir, declared, tripwire=tripwire)
    except OSError as exc:
        raise UsageError(f"cannot make the session's box (Spec.temp_dir {spec.temp_dir!r}): {exc}") from exc
