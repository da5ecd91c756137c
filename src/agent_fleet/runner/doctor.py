"""``diagnose``: is this machine ready to run codex tasks? Each check says what is wrong and what to do.

Checks, in order: the codex binary (path, and its version against the supported range); the
credential source codex will use (its name and where it is, never its value; not needed when the
config overrides choose a ``model_provider``); codex's sandbox (``codex sandbox -- true`` runs, and a
write outside the workspace is refused; for ``sandbox="danger-full-access"`` it says that nothing is
sandboxed and the approval policy is then the only guard); the app-server handshake (spawn +
``initialize``, timed); the account codex reports (``agent-fleet login`` stores one).
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from agent_fleet._codex_binary import MINIMUM_CODEX_VERSION, PINNED_CODEX_VERSION, check_codex_version
from agent_fleet.codex import CodexOptions, CodexProvider, codex_version_async, credential_sources, find_codex
from agent_fleet.errors import AgentFleetError, ProviderUnavailable
from agent_fleet.runner.providers import uses_custom_model_provider

__all__ = ["Check", "diagnose"]

_SANDBOX_TIMEOUT = 30.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Check:
    """One check: ``detail`` says what was found, ``hint`` what to do when it is not ``ok``."""

    name: str
    ok: bool
    detail: str
    hint: str = ""


async def _run(argv: list[str], env: dict[str, str], cwd: str) -> tuple[int | None, str]:
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), _SANDBOX_TIMEOUT)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return None, "timed out"
    return proc.returncode, out.decode(errors="replace")


def _error_line(text: str) -> str:
    """The line that says what went wrong: codex's ``Error: ...`` line, else the first non-warning line."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    for line in lines:
        if line.startswith("Error:"):
            return line
    lines = [line for line in lines if not line.startswith("WARNING")]
    return lines[0] if lines else ""


async def _sandbox(binary: Path, options: CodexOptions) -> Check:
    env = options.child_env()
    with tempfile.TemporaryDirectory(prefix="agent-fleet-doctor-") as tmp:
        argv = [os.fspath(binary), "sandbox", *options.config_args(), "--"]
        code, out = await _run([*argv, "true"], env, tmp)
        if code != 0:
            return Check(
                name="sandbox",
                ok=False,
                detail=f"`codex sandbox -- true` failed ({'timed out' if code is None else f'exit {code}'}): "
                + _error_line(out),
                hint="fix the error shown; if this kernel lacks Landlock/seccomp support (some containers), "
                "use --sandbox danger-full-access only in a disposable environment",
            )
        outside = Path(tmp).parent / f"agent-fleet-doctor-probe-{os.getpid()}"
        code, out = await _run([*argv, "sh", "-c", f"echo probe > '{outside}'"], env, tmp)
        written = outside.exists()
        if written:
            outside.unlink()
            return Check(
                name="sandbox",
                ok=False,
                detail="a sandboxed command could write outside its workspace",
                hint="the sandbox does not enforce write restrictions here; do not rely on it",
            )
    return Check(
        name="sandbox",
        ok=True,
        detail="commands run sandboxed; a write outside the workspace is refused (under --sandbox "
        "danger-full-access nothing is sandboxed: the approval policy is then the only guard)",
    )


_UNSANDBOXED = Check(
    name="sandbox",
    ok=True,
    detail="OFF (danger-full-access): nothing confines the agent's commands; the approval policy is the "
    "only guard (use it only in a disposable environment)",
)


def _version_check(binary: Path, version: str) -> Check:
    """The codex binary and its version against the supported range."""
    try:
        warning = check_codex_version(version)
    except ProviderUnavailable:
        return Check(
            name="codex",
            ok=False,
            detail=f"{binary} is codex {version}, older than the oldest supported, {MINIMUM_CODEX_VERSION}",
            hint=f"install agent-fleet's bundled codex ({PINNED_CODEX_VERSION}) "
            "or point CODEX_BIN at a newer one",
        )
    tested = f"; not the tested {PINNED_CODEX_VERSION}, supported from {MINIMUM_CODEX_VERSION}"
    note = tested if warning else ""
    return Check(name="codex", ok=True, detail=f"{binary} (version {version}{note})")


async def _account_check(provider: CodexProvider, options: CodexOptions) -> Check:
    """The account codex reports (``account/read``): a ChatGPT login, an API key, or none (then the
    credentials check above says what to do; this one only reports)."""
    try:
        account = await provider.account()
    except AgentFleetError as exc:
        return Check(
            name="account", ok=False, detail=f"codex did not say: {exc}", hint="see the app-server check"
        )
    if account.kind is not None:
        return Check(name="account", ok=True, detail=account.describe())
    if uses_custom_model_provider(options.config) or not account.requires_openai_auth:
        return Check(name="account", ok=True, detail="none (not needed by the configured model provider)")
    env = options.child_env()
    if env.get("OPENAI_API_KEY") or env.get("CODEX_API_KEY"):
        return Check(name="account", ok=True, detail="none stored; the API key in the environment is used")
    return Check(
        name="account",
        ok=True,
        detail="none stored (log in: agent-fleet login, or printenv OPENAI_API_KEY | agent-fleet login "
        "--api-key)",
    )


def _home_check(options: CodexOptions) -> Check | None:
    home = options.child_env().get("CODEX_HOME")
    if home and not Path(home).expanduser().is_dir():
        return Check(
            name="codex home",
            ok=False,
            detail=f"CODEX_HOME points at {home!r}, which does not exist",
            hint=f"create it (mkdir -p {home}) or unset CODEX_HOME",
        )
    return None


async def diagnose(options: CodexOptions | None = None, *, sandbox: str | None = None) -> list[Check]:
    """Run every check; never raises for what it finds. ``sandbox``: the mode the runs will use
    (``danger-full-access``, or ``sandbox_mode`` in the config overrides, reports that nothing is
    sandboxed instead of testing the sandbox)."""
    opts = options or CodexOptions()
    checks: list[Check] = []
    binary: Path | None = None
    try:
        found = find_codex(opts.codex_bin)
        version = await codex_version_async(found)
    except ProviderUnavailable as exc:
        checks.append(
            Check(
                name="codex",
                ok=False,
                detail=exc.message,
                hint="reinstall agent-fleet (it bundles codex: pip install agent-fleet) or set CODEX_BIN",
            )
        )
    else:
        checks.append(_version_check(found, version))
        if checks[-1].ok:
            binary = found

    home = _home_check(opts)
    if home is not None:
        checks.append(home)

    if uses_custom_model_provider(opts.config):
        detail = f"model provider {opts.config['model_provider']!r} from the config overrides"
        checks.append(Check(name="credentials", ok=True, detail=detail))
    else:
        sources = credential_sources(opts.codex_home, environ=opts.child_env())
        if sources:
            first = sources[0]
            where = f" ({first.detail})" if first.detail else ""
            more = f"; also present: {', '.join(s.name for s in sources[1:])}" if sources[1:] else ""
            checks.append(Check(name="credentials", ok=True, detail=f"{first.name}{where}{more}"))
        else:
            checks.append(
                Check(
                    name="credentials",
                    ok=False,
                    detail="no credential found (CODEX_API_KEY, OPENAI_API_KEY, $CODEX_HOME/auth.json)",
                    hint="set OPENAI_API_KEY, or run `codex login`",
                )
            )

    if binary is None:
        checks.append(
            Check(name="sandbox", ok=False, detail="skipped: no usable codex", hint="fix codex first")
        )
        checks.append(
            Check(name="app-server", ok=False, detail="skipped: no usable codex", hint="fix codex first")
        )
        return checks

    unsandboxed = "danger-full-access" in (sandbox, opts.config.get("sandbox_mode"))
    checks.append(_UNSANDBOXED if unsandboxed else await _sandbox(binary, opts))

    started = time.monotonic()
    provider = CodexProvider(opts)
    try:
        await provider.start()
        elapsed = time.monotonic() - started
        checks.append(Check(name="app-server", ok=True, detail=f"handshake in {elapsed * 1000:.0f} ms"))
        checks.append(await _account_check(provider, opts))
    except AgentFleetError as exc:
        detail = str(getattr(exc, "message", exc))
        reason = _error_line(getattr(exc, "stderr_tail", "") or "")
        checks.append(
            Check(
                name="app-server",
                ok=False,
                detail=f"{detail}: {reason}" if reason else detail,
                hint="check the codex installation and the -c overrides; `codex app-server` must start",
            )
        )
    finally:
        await provider.shutdown()
    return checks
