"""The reaper: a tiny supervisor between agent-fleet and each child it starts (Linux), so that no
descendant outlives the child, whatever process group or session it moved to.

Run as ``python -I -S _reaper.py FD GRACE -- ARGV...`` by ``agent_fleet._process`` (standard library
only, imported by nothing). It makes itself a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``):
every orphan of the subtree is reparented to it instead of PID 1, so the whole tree stays reachable
as its descendants however often they ``setsid``. Then it forks and execs ``ARGV`` (stdin, stdout and
stderr inherited), reports ``pid N`` (or ``err ERRNO`` when the exec failed) on the socket ``FD`` and
closes its own stdio, so the pipes close when the child's tree is gone, not when the reaper is.

The tree is ended (SIGTERM to every direct child and its process group, again to each newcomer as
orphans are reparented, then SIGKILL after the grace, until none is left) when:

- the child exits (grace at most 1 s: what it left behind is stray);
- the reaper gets SIGTERM, SIGINT or SIGHUP (``GRACE`` seconds), or SIGUSR1 (SIGKILL at once);
- the socket reaches EOF: agent-fleet's process is gone (its end is never inherited by anyone).

Only unreaped children are ever signalled, so a recycled PID is never hit. The reaper then exits
with the child's status (re-raising the signal that killed it), so ``returncode`` means what it did
without the reaper.
"""

import ctypes
import os
import select
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
STRAY_GRACE = 1.0
_stop: list[signal.Signals] = []


def _on_signal(signum: int, _frame: object) -> None:
    _stop.append(signal.Signals(signum))


def _children() -> list[int]:
    """Direct children of this process (which, as a subreaper, includes every orphan of the tree)."""
    me = os.getpid()
    try:
        with open(f"/proc/{me}/task/{me}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:  # a kernel without CONFIG_PROC_CHILDREN: scan the process table
        kids = []
        for name in os.listdir("/proc"):
            if name.isdigit():
                try:
                    with open(f"/proc/{name}/stat", "rb") as f:
                        stat = f.read()
                except OSError:
                    continue
                if int(stat[stat.rindex(b")") + 2 :].split()[1]) == me:
                    kids.append(int(name))
        return kids


def _signal(pid: int, sig: signal.Signals) -> None:
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, sig)  # its group too: what it started and has not yet left to us
        os.kill(pid, sig)
    except OSError:
        pass


def _reap(main: int, status: list[int]) -> None:
    while True:
        try:
            pid, st = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if pid == main:
            status.append(st)


def _end_tree(main: int, status: list[int], grace: float) -> None:
    deadline = time.monotonic() + grace
    signalled: set[tuple[int, signal.Signals]] = set()
    while True:
        _reap(main, status)
        kids = _children()
        if not kids:
            _reap(main, status)
            return
        sig = signal.SIGKILL if time.monotonic() >= deadline or signal.SIGUSR1 in _stop else signal.SIGTERM
        for pid in kids:
            if (pid, sig) not in signalled:
                signalled.add((pid, sig))
                _signal(pid, sig)
        time.sleep(0.02)


def main() -> None:
    fd, grace, sep, argv = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4:]
    assert sep == "--" and argv
    os.set_inheritable(fd, False)  # the child must not hold the lifeline
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        os.write(fd, f"err {ctypes.get_errno()} prctl\n".encode())
        os._exit(126)
    handled = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1)
    for sig in handled:
        signal.signal(sig, _on_signal)
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes select through the wakeup fd
    err_r, err_w = os.pipe2(os.O_CLOEXEC)
    reaper = os.getpid()
    pid = os.fork()
    if pid == 0:
        try:
            for sig in (*handled, signal.SIGCHLD):
                signal.signal(sig, signal.SIG_DFL)
            # Should the reaper itself be SIGKILLed, the child goes with it rather than live on unwatched.
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if os.getppid() != reaper:
                os._exit(127)
            os.execvp(argv[0], argv)
        except OSError as exc:
            os.write(err_w, str(exc.errno or 0).encode())
        os._exit(127)
    os.close(err_w)
    failure = os.read(err_r, 64)
    os.close(err_r)
    status: list[int] = []
    if failure:
        os.write(fd, b"err " + failure + b" exec\n")
        _end_tree(pid, status, 0.0)
        os._exit(127)
    os.write(fd, f"pid {pid}\n".encode())
    devnull = os.open(os.devnull, os.O_RDWR)
    for std in (0, 1, 2):
        os.dup2(devnull, std)
    while not status and not _stop:
        readable, _, _ = select.select([fd, wake_r], [], [], 5.0)
        if fd in readable and not os.read(fd, 64):
            _stop.append(signal.SIGTERM)  # agent-fleet is gone
        if wake_r in readable:
            while True:
                try:
                    if not os.read(wake_r, 256):
                        break
                except BlockingIOError:
                    break
        _reap(pid, status)
    _end_tree(pid, status, grace if _stop and not status else min(grace, STRAY_GRACE))
    os.close(fd)
    st = status[0] if status else 0
    if os.WIFSIGNALED(st):
        killed_by = os.WTERMSIG(st)
        signal.set_wakeup_fd(-1)
        if killed_by != signal.SIGKILL:  # which has no handler to reset
            signal.signal(killed_by, signal.SIG_DFL)
        os.kill(os.getpid(), killed_by)
        os._exit(128 + killed_by)
    os._exit(os.waitstatus_to_exitcode(st) if status else 1)


if __name__ == "__main__":
    main()
