"""The reaper: one long-lived supervisor per agent-fleet process (Linux), so that no descendant of a
child it starts outlives that child, whatever process group or session it moved to.

Run once per agent-fleet process as ``python -I -S _reaper.py CONTROL_FD`` by ``agent_fleet._process``
(standard library only, imported by nothing), which starts it on its first child. Starting a child
costs a ``fork`` of this small, already running interpreter instead of a new interpreter per child.

The reaper
----------
It reads requests on the ``SOCK_SEQPACKET`` socket ``CONTROL_FD``: each message carries four file
descriptors (``SCM_RIGHTS``): the child's *lifeline* (a stream socket whose other end only
agent-fleet holds) and its stdin, stdout and stderr. For each it forks a *supervisor* (below) and
closes its copies. EOF on the control socket (agent-fleet is gone) ends it; the supervisors hold
their own lifelines and go on ending their trees. The reaper is a child subreaper too: should a
supervisor die (killed), the orphans of its tree come to the reaper, which kills them.

A supervisor (one per child)
----------------------------
It makes itself a session leader and a *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``): every
orphan of the subtree is reparented to it instead of PID 1, so the whole tree stays reachable as its
descendants however often they ``setsid``. It reads the request (one JSON line on the lifeline:
``argv``, ``env``, ``cwd``, ``grace``), forks and execs ``argv`` with the given stdio, reports
``pid CHILD SUPERVISOR`` (or ``err ERRNO WHAT`` when the chdir or the exec failed) on the lifeline and
closes its copies of the stdio, so the pipes close when the child's tree is gone.

The tree is ended (SIGTERM to every direct child and its process group, again to each newcomer as
orphans are reparented, then SIGKILL after the grace, until none is left) when:

- the child exits (grace at most 1 s: what it left behind is stray);
- agent-fleet writes ``T`` on the lifeline (``GRACE`` seconds) or ``K`` (SIGKILL at once), or the
  supervisor gets SIGTERM, SIGINT or SIGHUP (``GRACE`` seconds) or SIGUSR1 (SIGKILL at once);
- the lifeline reaches EOF: agent-fleet's process is gone (its end is never inherited by anyone).

Only unreaped children are ever signalled, so a recycled PID is never hit. The supervisor then writes
``exit STATUS`` (the child's raw wait status) on the lifeline and exits, so the status means what it
would without the reaper.
"""

import contextlib
import ctypes
import json
import os
import select
import signal
import socket
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
STRAY_GRACE = 1.0
_STOPS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1)
_stop: list[signal.Signals] = []
_libc = ctypes.CDLL(None, use_errno=True)


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


# -- a supervisor: one child's tree --------------------------------------------------------------------


class _Lifeline:
    """The supervisor's end of the socket only agent-fleet holds the other end of."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.gone = False

    def read_commands(self) -> None:
        """Take what agent-fleet wrote (``T``: terminate, ``K``: kill) without blocking; EOF: gone."""
        while not self.gone:
            try:
                data = self.sock.recv(64, socket.MSG_DONTWAIT)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                self.gone = True
                _stop.append(signal.SIGTERM)  # agent-fleet is gone
                return
            self.take(data)

    @staticmethod
    def take(data: bytes) -> None:
        for command in data:
            if command == ord("K"):
                _stop.append(signal.SIGUSR1)
            elif command == ord("T"):
                _stop.append(signal.SIGTERM)

    def send(self, text: str) -> None:
        with contextlib.suppress(OSError):
            self.sock.sendall(text.encode())


def _end_tree(main: int, status: list[int], grace: float, lifeline: _Lifeline) -> None:
    deadline = time.monotonic() + grace
    signalled: set[tuple[int, signal.Signals]] = set()
    while True:
        _reap(main, status)
        kids = _children()
        if not kids:
            _reap(main, status)
            return
        lifeline.read_commands()
        sig = signal.SIGKILL if time.monotonic() >= deadline or signal.SIGUSR1 in _stop else signal.SIGTERM
        for pid in kids:
            if (pid, sig) not in signalled:
                signalled.add((pid, sig))
                _signal(pid, sig)
        time.sleep(0.02)


def _read_request(sock: socket.socket) -> tuple[list[str], dict[str, str], str | None, float, bytes]:
    """argv, env, cwd and grace (one JSON line agent-fleet's process wrote), and the commands it sent
    after it (a kill may follow the request at once)."""
    data = b""
    while b"\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            os._exit(1)  # agent-fleet went away before asking for anything
        data += chunk
    line, _, rest = data.partition(b"\n")
    request = json.loads(line)
    cwd = request.get("cwd")
    return request["argv"], request["env"], cwd, float(request["grace"]), rest


def supervise(fds: list[int]) -> None:
    """Run one child (see the module docstring). Never returns."""
    lifeline_fd, stdio = fds[0], fds[1:4]
    os.setsid()
    sock = socket.socket(fileno=lifeline_fd)
    lifeline = _Lifeline(sock)
    if _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        lifeline.send(f"err {ctypes.get_errno()} prctl\n")
        os._exit(126)
    for sig in _STOPS:
        signal.signal(sig, _on_signal)
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes select through the wakeup fd
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    argv, env, cwd, grace, early = _read_request(sock)
    err_r, err_w = os.pipe2(os.O_CLOEXEC)
    supervisor = os.getpid()
    pid = os.fork()
    if pid == 0:
        what = "exec"
        try:
            for sig in (*_STOPS, signal.SIGCHLD, signal.SIGPIPE, signal.SIGXFSZ):
                signal.signal(sig, signal.SIG_DFL)
            signal.set_wakeup_fd(-1)
            # Should the supervisor itself be SIGKILLed, the child goes with it rather than live on unwatched.
            _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if os.getppid() != supervisor:
                os._exit(127)
            for target, fd in enumerate(stdio):
                os.dup2(fd, target)  # (dup2 makes them inheritable)
            if cwd is not None:
                what = "chdir"
                os.chdir(cwd)
                what = "exec"
            os.execvpe(argv[0], argv, env)
        except OSError as exc:
            os.write(err_w, f"{exc.errno or 0} {what}".encode())
        os._exit(127)
    os.close(err_w)
    failure = os.read(err_r, 64)
    os.close(err_r)
    for fd in set(stdio):
        os.close(fd)
    devnull = os.open(os.devnull, os.O_RDWR)
    for std in (0, 1, 2):
        os.dup2(devnull, std)
    status: list[int] = []
    if failure:
        lifeline.send(f"err {failure.decode()}\n")
        _end_tree(pid, status, 0.0, lifeline)
        os._exit(127)
    lifeline.send(f"pid {pid} {supervisor}\n")
    lifeline.take(early)
    while not status and not _stop:
        readable, _, _ = select.select([lifeline_fd, wake_r], [], [], 5.0)
        if lifeline_fd in readable:
            lifeline.read_commands()
        if wake_r in readable:
            while True:
                try:
                    if not os.read(wake_r, 256):
                        break
                except BlockingIOError:
                    break
        _reap(pid, status)
    stopped = bool(_stop) and not status
    _end_tree(pid, status, grace if stopped else min(grace, STRAY_GRACE), lifeline)
    lifeline.send(f"exit {status[0] if status else 0}\n")
    os._exit(0)


# -- the reaper: one per agent-fleet process -------------------------------------------------------------

_supervisors: set[int] = set()


def _on_child(_signum: int, _frame: object) -> None:
    """A supervisor ended: reap it; kill whatever of its tree was left to us (it was killed itself)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        _supervisors.discard(pid)
    for pid in _children():
        if pid not in _supervisors:
            _signal(pid, signal.SIGKILL)


def serve(control_fd: int) -> None:
    control = socket.socket(fileno=control_fd)
    _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # stopped by its control socket's EOF (or SIGTERM/SIGKILL)
    signal.signal(signal.SIGCHLD, _on_child)
    while True:
        try:
            _, fds, _, _ = socket.recv_fds(control, 16, 8)
        except OSError:
            return
        if len(fds) != 4:  # EOF (agent-fleet is gone), or a message without its descriptors
            for fd in fds:
                os.close(fd)
            if not fds:
                return
            continue
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})  # known before it can be reaped
        try:
            pid = os.fork()
            if pid == 0:
                control.close()
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                for sig in (signal.SIGINT, signal.SIGHUP):
                    signal.signal(sig, signal.SIG_DFL)
                try:
                    supervise(fds)
                finally:
                    os._exit(1)
            _supervisors.add(pid)
        except OSError:
            pass  # no fork: the request's lifeline closes below, so agent-fleet sees the start fail
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
            for fd in fds:
                os.close(fd)


if __name__ == "__main__":
    serve(int(sys.argv[1]))
