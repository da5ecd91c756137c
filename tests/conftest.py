"""Fixtures for the whole suite: one ``workspace``, and the guard that keeps unit tests unit tests.

A test that runs a real program end to end carries the ``e2e`` marker, so ``pytest -m "not e2e"`` (the
unit run, under a minute) runs none of them: a real agent binary (the codex binary, ``codex
exec-server``, the Claude Code CLI), the agent-fleet CLI in a process of its own that a test signals or
completes with, a browser or a real terminal, bash replaying the policy's corpora, the documentation
build, the API fuzzer. Unit tests run in process (a git repository or a fake codex script as a fixture
is fine). The autouse guard below records every process a test without the marker starts and fails the
test if one of them is a real agent binary (a fake codex script in a temporary directory is not).
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import functools
import importlib.util
import itertools
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
from _pytest.mark.expression import Expression

from agent_fleet._codex_binary import find_codex
from agent_fleet.errors import ProviderUnavailable

# Bytecode. With PYTHONDONTWRITEBYTECODE set, pytest caches no assertion-rewritten module, so every worker
# parses, rewrites and compiles ~700 modules at each start (~10 s of CPU per worker), and every Python child
# a test starts (the CLI, a daemon) compiles agent_fleet again (~0.3 s each). The suite keeps its bytecode
# under .pytest_cache/pycache instead: still none in the source tree, which is what that setting is for.
# Set here, before test modules are imported and before xdist starts its workers (they inherit it).
if sys.dont_write_bytecode and not sys.pycache_prefix:
    _PYCACHE = Path(__file__).resolve().parents[1] / ".pytest_cache" / "pycache"
    sys.pycache_prefix = str(_PYCACHE)
    sys.dont_write_bytecode = False
    os.environ["PYTHONPYCACHEPREFIX"] = str(_PYCACHE)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


def _real_binaries() -> frozenset[str]:
    found: set[str] = set()
    with contextlib.suppress(ProviderUnavailable):
        found.add(os.path.realpath(find_codex()))
    # Located, not imported: importing the SDK costs every worker a second.
    sdk = importlib.util.find_spec("claude_agent_sdk")
    for location in (sdk.submodule_search_locations or []) if sdk is not None else []:
        bundled = Path(location) / "_bundled" / "claude"
        if bundled.exists():
            found.add(os.path.realpath(bundled))
    for name in ("codex", "claude"):
        on_path = shutil.which(name)
        if on_path:
            found.add(os.path.realpath(on_path))
    return frozenset(found)


_REAL = _real_binaries()


def _program(args: Any) -> str:
    first = args if isinstance(args, str | bytes | os.PathLike) else next(iter(args), "")
    path = os.fsdecode(first)
    if os.sep not in path:
        path = shutil.which(path) or path
    return os.path.realpath(path)


@functools.cache  # asked for every path collected
def _selects_no_e2e_test(markexpr: str) -> bool:
    """Whether ``-m markexpr`` deselects every test marked ``e2e``, whatever other marks it carries: false
    for each true/false assignment of the other names the expression mentions, with ``e2e`` true."""
    if not markexpr.strip():
        return False
    try:
        expression = Expression.compile(markexpr)
    except Exception:
        return False  # pytest reports a bad expression itself
    others = sorted(set(re.findall(r"[\w.+-]+", markexpr)) - {"e2e", "and", "or", "not"})[:10]
    for values in itertools.product((False, True), repeat=len(others)):
        marks = {"e2e": True, **dict(zip(others, values, strict=True))}
        if expression.evaluate(functools.partial(_marked, marks)):
            return False
    return True


def _marked(marks: dict[str, bool], name: str, /, **_: object) -> bool:
    return marks.get(name, False)


def _markexpr(config: pytest.Config) -> str:
    return str(config.getoption("markexpr", "") or "")


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """A run that selects no e2e test does not import the e2e-only modules (``*_e2e.py``, whose tests are
    all marked e2e: checked whenever they are collected): about a second less start-up per worker."""
    if collection_path.name.endswith("_e2e.py") and _selects_no_e2e_test(_markexpr(config)):
        return True
    return None


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """Workers for ``-n auto`` (addopts): two for a run with e2e tests, which drive real agent binaries
    (CPU-bound, some timed); three when ``-m`` leaves every e2e test out (``-m "not e2e"``), where tests
    wait on children, sockets and daemons' shutdowns more than they compute and a third worker fills
    those waits on a two-core machine. ``-n N`` on the command line overrides both."""
    return 3 if _selects_no_e2e_test(_markexpr(config)) else 2


#: Test files that take longest (8-60 s of wall time each, measured; CI's fuzzing a minute): handed out
#: first, so that under ``--dist loadfile`` no worker starts one while the others are finishing (xdist's
#: own order puts one-test files last). Order only: an entry gone stale costs nothing.
_LONGEST_FIRST = (
    "tests/serve/test_schemathesis.py",
    "tests/policy/test_policy_stall.py",
    "tests/policy/test_policy_limits.py",
    "tests/cli/test_exits.py",
    "tests/serve/test_security.py",
    "tests/test_docs.py",
    "tests/policy/test_policy_adversarial.py",
    "tests/policy/test_policy_redteam_bash.py",
    "tests/codex/test_approvals_loop.py",
    "tests/codex/test_appserver_fake.py",
    "tests/serve/test_dashboard_units.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Files in ``_LONGEST_FIRST`` first, then as xdist's default order (most tests first), which
    ``--no-loadscope-reorder`` (addopts) leaves to this; a file's own tests keep their order. And every
    test of an ``*_e2e.py`` file is marked e2e (``pytest_ignore_collect`` relies on it)."""
    unmarked = [
        item.nodeid
        for item in items
        if item.path.name.endswith("_e2e.py") and item.get_closest_marker("e2e") is None
    ]
    if unmarked:
        raise pytest.UsageError(f"mark these tests e2e (they are in *_e2e.py files): {', '.join(unmarked)}")
    rank = {name: i for i, name in enumerate(_LONGEST_FIRST)}
    counts = collections.Counter(item.nodeid.split("::")[0] for item in items)

    def key(item: pytest.Item) -> tuple[int, int]:
        name = item.nodeid.split("::")[0]
        return rank.get(name, len(rank)), -counts[name]

    items.sort(key=key)


@pytest.fixture(autouse=True, scope="session")
def _private_state_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The fleet's state directory (batch records, boxes, the daemon's state) of every test, and of every
    process a test starts (Ray nodes included), is a temporary one: never the user's own."""
    saved = os.environ.get("XDG_STATE_HOME")
    os.environ["XDG_STATE_HOME"] = str(tmp_path_factory.mktemp("xdg-state"))
    yield
    if saved is None:
        os.environ.pop("XDG_STATE_HOME", None)
    else:
        os.environ["XDG_STATE_HOME"] = saved


@pytest.fixture(autouse=True)
def _no_real_binary_outside_e2e(request: pytest.FixtureRequest) -> Iterator[None]:
    if request.node.get_closest_marker("e2e") is not None:
        yield
        return
    started: list[str] = []
    original = subprocess.Popen.__init__

    def recording(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        program = _program(args)
        if program in _REAL:
            started.append(program)
        original(self, args, *rest, **kwargs)

    subprocess.Popen.__init__ = recording  # type: ignore[method-assign]
    try:
        yield
    finally:
        subprocess.Popen.__init__ = original  # type: ignore[method-assign]
    if started:
        pytest.fail(f"this test started a real agent binary ({started[0]}): mark it @pytest.mark.e2e")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """An empty directory for an agent to work in."""
    path = tmp_path / "workspace"
    path.mkdir()
    return path


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, object, object]:
    """A test marked ``alone`` (one that measures time a person would wait) runs while no other test
    does: under pytest-xdist each test holds a shared lock on one file per run, an ``alone`` test an
    exclusive one, so the other worker waits between its tests. Without xdist this changes nothing."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if run is None:
        return (yield)
    mode = fcntl.LOCK_EX if item.get_closest_marker("alone") is not None else fcntl.LOCK_SH
    with open(f"/tmp/agent-fleet-tests-{run}.lock", "a") as lock:
        fcntl.flock(lock, mode)
        try:
            return (yield)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
