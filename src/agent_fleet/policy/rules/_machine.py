"""More of the machine: privilege bits, firewall and network changes, disk encryption and volume groups,
operating-system packages removed, and processes killed by the list.

* ``privilege-escalation``: a set-user-id or set-group-id bit given to a file (``chmod u+s``,
  ``chmod 4755``, ``install -m 4755``), file capabilities (``setcap``), ``machinectl shell``/``login``.
  A set-uid copy of a shell is root for whoever runs it next.
* ``system``: any firewall change (``iptables``/``nft``/``ufw``/``firewall-cmd`` doing anything but
  listing or checking; a ``DROP`` rule cuts the machine off as surely as a flush opens it); network
  configuration (``ip ... add|del|set|replace|change|flush``, ``tc`` queueing rules, ``hostname NAME``,
  ``ifconfig IF ...``); removing operating-system packages (``apt remove``, ``dpkg -r``, ``dnf erase``,
  ``pacman -R``, ``apk del``, ``snap remove`` ...); ``kill`` of the processes a listing of every process
  (or of a user's, or of init and the session's supervisors) names: ``kill $(ps -eo pid=)``,
  ``pgrep -u root | xargs kill``, ``kill $(pidof systemd)``, ``pkill -f /usr/sbin/sshd``. A listing
  narrowed by ``grep``/``awk``/``head`` picks processes; that stays the agent's business.
* ``disk-write``: ``cryptsetup luksFormat|erase|...`` and removing LVM volume groups or physical
  volumes (``vgremove``, ``pvremove``).
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Sequence

from agent_fleet.policy.bash._commands import SimpleCommand
from agent_fleet.policy.rules._system import INIT_NAMES
from agent_fleet.policy.rules._verdict import RuleContext, Violation
from agent_fleet.policy.rules._writes import split_options

__all__ = ["machine_violation"]

_SETID_SYMBOLIC = re.compile(r"(?:^|,)[ugoa]*[-+=][rwxXt]*s")
_SETID_OCTAL = re.compile(r"0*[2-7][0-7]{3}")
_FIREWALL_READ = frozenset(
    {"-L", "--list", "-S", "--list-rules", "-C", "--check", "-h", "--help", "-V", "--version", "-n"}
    | {"-v", "--verbose", "--numeric", "-x", "--exact", "--line-numbers", "-t", "--table", "-w", "--wait"}
)
_FIREWALL_LOOK = frozenset({"-L", "--list", "-S", "--list-rules", "-C", "--check", "-h", "--help", "-V"})
_IPTABLES = frozenset(
    {"iptables", "ip6tables", "iptables-legacy", "iptables-nft", "ip6tables-legacy", "ip6tables-nft"}
    | {"ebtables", "arptables", "iptables-restore", "ip6tables-restore", "nft", "ufw", "firewall-cmd"}
)
_IP_OBJECTS = frozenset(
    {"link", "l", "address", "addr", "a", "route", "r", "ro", "rule", "neigh", "neighbour", "n", "netns"}
    | {"tunnel", "tuntap", "maddress", "mroute", "xfrm", "vrf", "nexthop", "tcp_metrics", "token"}
)
_IP_CHANGES = re.compile(r"add|append|del|delete|set|replace|change|flush|prepend|exec|attach|save|restore")
_TC_CHANGES = frozenset({"add", "del", "delete", "replace", "change", "link", "exec"})
_PACKAGE_REMOVAL: dict[str, frozenset[str]] = {
    "apt": frozenset({"remove", "purge", "autoremove", "autopurge"}),
    "apt-get": frozenset({"remove", "purge", "autoremove", "autopurge"}),
    "aptitude": frozenset({"remove", "purge"}),
    "yum": frozenset({"remove", "erase", "autoremove"}),
    "dnf": frozenset({"remove", "erase", "autoremove"}),
    "microdnf": frozenset({"remove"}),
    "zypper": frozenset({"remove", "rm"}),
    "apk": frozenset({"del"}),
    "snap": frozenset({"remove"}),
    "flatpak": frozenset({"uninstall", "remove"}),
    "port": frozenset({"uninstall"}),
    "emerge": frozenset({"--unmerge", "-C", "--depclean"}),
}
_CRYPTSETUP = frozenset(
    {"luksFormat", "format", "erase", "luksErase", "reencrypt", "luksKillSlot", "luksRemoveKey", "repair"}
)
#: Groups whose members are root in all but name (``docker`` too, but ``sg docker CMD`` is everyday use).
_POWER_GROUPS = frozenset({"root", "sudo", "wheel", "admin", "disk", "shadow"})
_FILTERS = frozenset({"grep", "egrep", "fgrep", "rg", "awk", "gawk", "mawk", "head", "tail", "sed", "jq"})
_CATCH_ALL = frozenset({".", ".*", "", "^", "$", "*", "^.*$", "^.*"})


def _setid(cmd: SimpleCommand) -> Violation | None:
    args = list(cmd.argv[1:])
    modes: list[str] = []
    if cmd.program == "chmod":
        modes = [arg for arg in args if not arg.startswith("--")]
    elif cmd.program == "install":
        values, _ = split_options(args, "mogtS", ("--mode", "--owner", "--group", "--target-directory"))
        modes = values.get("-m", []) + values.get("--mode", [])
    for mode in modes:
        if _SETID_SYMBOLIC.search(mode) or _SETID_OCTAL.fullmatch(mode):
            return Violation(
                rule="privilege-escalation",
                reason=f"{cmd.program} {mode} sets a set-user-id or set-group-id bit",
            )
    return None


def _firewall(program: str, args: Sequence[str]) -> Violation | None:
    operands = [arg for arg in args if not arg.startswith("-")]
    if program == "ufw":
        if not operands or operands[0] in ("status", "show", "version", "app"):
            return None
    elif program == "nft":
        if (
            not operands
            or operands[0] in ("list", "monitor", "describe")
            or "-c" in args
            or "--check" in args
        ):
            return None
    elif program == "firewall-cmd":
        changes = [a for a in args if a.startswith("--") and not a.startswith(("--list", "--get", "--query"))]
        if not changes or set(changes) <= {"--state", "--permanent", "--zone", "--help", "--version"}:
            return None
    elif not args:
        return None  # the help text
    elif (
        not program.endswith("-restore")
        and all(a in _FIREWALL_READ or not a.startswith("-") for a in args)
        and _FIREWALL_LOOK & set(args)
    ):
        return None
    return Violation(rule="system", reason=f"{program} {' '.join(args[:3])} changes the firewall")


def _network(program: str, args: Sequence[str]) -> Violation | None:
    operands = [arg for arg in args if not arg.startswith("-")]
    if program == "ip":
        if len(operands) >= 2 and operands[0] in _IP_OBJECTS and _IP_CHANGES.fullmatch(operands[1]):
            return Violation(rule="system", reason=f"ip {operands[0]} {operands[1]} changes networking")
        return None
    if program == "tc":
        if len(operands) >= 2 and operands[1] in _TC_CHANGES:
            return Violation(rule="system", reason=f"tc {operands[0]} {operands[1]} changes traffic control")
        return None
    if program in ("hostname", "hostnamectl") and operands:
        if program == "hostname" or operands[0].startswith("set-"):
            return Violation(rule="system", reason=f"{program} {operands[-1]} renames the machine")
        return None
    if program == "ifconfig" and len(operands) >= 2:
        return Violation(rule="system", reason=f"ifconfig {operands[0]} {operands[1]} changes an interface")
    return None


def _packages(program: str, args: Sequence[str]) -> Violation | None:
    operands = [arg for arg in args if not arg.startswith("-")]
    verbs = _PACKAGE_REMOVAL.get(program)
    removing = False
    if verbs is not None:
        removing = bool(operands and operands[0] in verbs) or bool(verbs & set(args) - {"remove"})
    elif program == "dpkg":
        removing = any(a in ("-r", "-P", "--remove", "--purge") for a in args)
    elif program == "pacman":
        removing = any(re.fullmatch(r"-R[a-z]*|--remove", a) for a in args)
    if removing:
        return Violation(rule="system", reason=f"{program} removes operating-system packages")
    return None


def _stages(text: str) -> list[list[str]]:
    stages: list[list[str]] = []
    for part in text.split("|"):
        try:
            words = shlex.split(part)
        except ValueError:
            return []
        if words:
            stages.append([posixpath.basename(words[0]), *words[1:]])
    return stages


def _lists_everything(argv: Sequence[str]) -> bool:
    """Does this command print the pids of every process, of a whole user, or of vital ones?"""
    if not argv:
        return False
    program, args = argv[0], list(argv[1:])
    if program == "ps":
        return any(
            (a.startswith("-") and not a.startswith("--") and bool(set(a[1:]) & set("eAuU")))
            or (not a.startswith("-") and "a" in a and "x" in a)
            for a in args
        )
    if program in ("pgrep", "pidof"):
        if any(a in ("-u", "-U", "-G", "--euid", "--uid", "--group") or a.startswith("-u") for a in args):
            return True
        patterns = [a for a in args if not a.startswith("-")]
        return any(p in _CATCH_ALL or _vital(p) for p in patterns)
    return False


def _vital(pattern: str) -> bool:
    name = posixpath.basename(pattern.strip("^$").split()[0]) if pattern.strip("^$").split() else ""
    return name in INIT_NAMES


def _mass_kill(cmd: SimpleCommand) -> Violation | None:
    if cmd.program in ("pkill", "killall"):
        for pattern in (a for a in cmd.argv[1:] if not a.startswith("-")):
            if "/" in pattern and _vital(pattern):
                return Violation(rule="system", reason=f"{cmd.program} {pattern} kills a vital process")
        return None
    if cmd.program != "kill":
        return None
    sources: list[list[list[str]]] = []
    for word in cmd.argv[1:]:
        for inner in re.findall(r"\$\((.*)\)|`(.*)`", word):
            sources.append(_stages(next(part for part in inner if part)))
    if "xargs" in cmd.wrappers and cmd.stdin:
        sources.append([list(argv) for argv in cmd.stdin])
    for stages in sources:
        if stages and _lists_everything(stages[0]) and not any(s[0] in _FILTERS for s in stages[1:]):
            shown = " ".join(stages[0])
            return Violation(rule="system", reason=f"kill of every process {shown!r} lists")
    return None


_DEBUGGERS = frozenset({"gdb", "lldb", "strace", "ltrace", "gcore", "pyrasite", "perf", "bpftrace", "py-spy"})


def _attaches(cmd: SimpleCommand) -> str | None:
    """A debugger attached to init or to a vital daemon (or told to call code in a process): it reads
    and writes that process's memory, root's if the process is root's."""
    if cmd.program not in _DEBUGGERS:
        return None
    args = list(cmd.argv[1:])
    pids = [args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-p", "--pid", "attach")]
    pids += [a.partition("=")[2] for a in args if a.startswith("--pid=")]
    if cmd.program in ("gcore", "pyrasite"):
        pids += [a for a in args if not a.startswith("-")]
    for pid in pids:
        vital = pid == "1" or any(name in pid for name in INIT_NAMES if len(name) > 3)
        injects = cmd.program in ("gdb", "lldb", "pyrasite") and any("call" in a or "set " in a for a in args)
        if vital or injects:
            return f"{cmd.program} attaches to process {pid} and can change what it runs"
    return None


def _enters_init(words: Sequence[str]) -> bool:
    """``nsenter -t 1`` / ``--target=1`` (the first process: the host's namespaces)."""
    for i, word in enumerate(words):
        if word in ("-t", "--target") and i + 1 < len(words) and words[i + 1] == "1":
            return True
        if word in ("-t1", "--target=1"):
            return True
    return False


def machine_violation(cmd: SimpleCommand, ctx: RuleContext) -> Violation | None:
    """The rule ``cmd`` breaks among the ones above, or ``None``."""
    program, args = cmd.program, cmd.argv[1:]
    if program in ("chmod", "install"):
        return _setid(cmd)
    if program == "setcap" and not any(a in ("-v", "--verify", "-h") for a in args):
        return Violation(rule="privilege-escalation", reason="setcap gives a file privileges (capabilities)")
    if program == "machinectl" and args[:1] and args[0] in ("shell", "login"):
        return Violation(rule="privilege-escalation", reason=f"machinectl {args[0]} opens a root shell")
    raising = ("--caps", "--addamb", "--inh", "--uid", "--user", "--chroot")
    capsh = program == "capsh" and any(a == "--" or a.startswith(raising) for a in args)
    if capsh or (program in ("newgrp", "sg") and set(args[:1]) & _POWER_GROUPS):
        why = f"{program} takes on privileged capabilities or groups"
        return Violation(rule="privilege-escalation", reason=why)
    if "nsenter" in (*cmd.wrappers, program) and _enters_init(cmd.written or cmd.argv):
        why = "nsenter into init's namespaces leaves the container"
        return Violation(rule="privilege-escalation", reason=why)
    if program == "auditctl" and not set(args) <= {"-l", "-s", "-h", "--help", "-v"}:
        return Violation(rule="system", reason="auditctl changes or disables the system's auditing")
    attached = _attaches(cmd)
    if attached is not None:
        return Violation(rule="privilege-escalation", reason=attached)
    if program == "journalctl" and any(a.startswith(("--vacuum", "--rotate")) for a in args):
        return Violation(rule="system", reason="journalctl --vacuum/--rotate deletes the system's logs")
    if program in _IPTABLES:
        return _firewall(program, args)
    if program in ("bindfs", "mount.fuse", "mount.bindfs") and args:
        return Violation(rule="system", reason=f"{program} mounts one tree onto another")
    if program == "cryptsetup" and _CRYPTSETUP & set(args):
        return Violation(rule="disk-write", reason="cryptsetup formats or erases an encrypted volume")
    if program in ("vgremove", "pvremove", "vgreduce", "lvreduce"):
        return Violation(rule="disk-write", reason=f"{program} destroys LVM volumes")
    return _network(program, args) or _packages(program, args) or _mass_kill(cmd)
