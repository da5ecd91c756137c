"""Commands that act on the whole machine: every process, the power state, the kernel, the firewall,
mandatory access control, users and mounts. One rule id, ``system``.

Judged on the normalised argv: ``kill`` of pid 1, -1, 0 or a process group; ``pkill``/``killall`` by
user, of everything (``.``), of init or the session's supervisors; ``killall5``; ``shutdown``,
``reboot``, ``halt``, ``poweroff``, ``init 0|6``, ``telinit``; ``systemctl`` power verbs, ``isolate``,
``default``, and ``stop|disable|mask|kill`` of vital units; ``service X stop`` and ``/etc/init.d/X stop``
for vital units; ``setenforce 0``, ``aa-teardown``, ``aa-disable``; ``ufw disable|reset``, ``iptables -F``
/``-X``/``-P ... ACCEPT``, ``nft flush``; ``sysctl -w``/``key=value``/``-p``; ``swapoff``, ``umount``,
``mount -o remount``, ``modprobe -r``, ``rmmod``, ``insmod``; interfaces down, route flush; clock
setting; user and password administration (``passwd``, ``useradd``, ``usermod``, ``visudo`` ...).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from agent_fleet.policy.rules._verdict import Violation

__all__ = ["INIT_NAMES", "RULES", "system_violation"]

#: The id this rule decides.
RULES: dict[str, str] = {
    "system": "whole-machine commands: kill -1, shutdown, reboot, firewall, SELinux/AppArmor, sysctl ...",
}

_POWER = frozenset({"shutdown", "reboot", "halt", "poweroff", "killall5", "telinit", "kexec", "sysrq"})
_SYSTEMCTL_POWER = frozenset(
    {"poweroff", "reboot", "halt", "kexec", "suspend", "hibernate", "hybrid-sleep", "suspend-then-hibernate"}
    | {"isolate", "rescue", "emergency", "default", "soft-reboot", "switch-root", "daemon-reexec"}
)
_SYSTEMCTL_STOP = frozenset(
    {"stop", "disable", "mask", "kill", "restart", "try-restart", "reload-or-restart"}
)
_VITAL_UNITS = re.compile(
    r"(ssh|sshd|openssh-server|networking|network|NetworkManager|systemd-\w+|dbus|auditd|apparmor|selinux"
    r"|firewalld|ufw|iptables|nftables|fail2ban|docker|containerd|cron|crond|rsyslog|journald|polkit"
    r"|getty@.*|gdm|lightdm|sddm|display-manager|udev|multi-user|graphical|basic|sysinit|local-fs|init)"
    r"(\.service|\.target|\.socket)?",
)
_INIT_NAMES = frozenset(
    {"init", "systemd", "launchd", "sshd", "dbus-daemon", "containerd", "dockerd", "Xorg", "gnome-shell"}
    | {"kworker", "kthreadd", "journald", "systemd-journald", "systemd-logind", "login", "bash", "sh", "zsh"}
    | {"codex", "claude", "tmux", "screen", "sshd-session", "agetty"}
    # Security agents: killing one blinds the machine's monitoring.
    | {"auditd", "falcon-sensor", "falcond", "osqueryd", "wazuh-agentd", "ossec-agentd", "SentinelAgent"}
    | {"sentinelone", "clamd", "fail2ban-server", "aide", "tripwire", "elastic-agent", "datadog-agent"}
)
#: Processes the machine or the session cannot lose (``pkill sshd``, ``kill $(pidof systemd)``).
INIT_NAMES = _INIT_NAMES
_USER_ADMIN = frozenset(
    {"passwd", "chpasswd", "useradd", "adduser", "userdel", "deluser", "usermod", "groupadd", "groupdel"}
    | {"groupmod", "gpasswd", "visudo", "vipw", "vigr", "chsh", "chfn", "newusers", "pwck", "grpck"}
    | {"chage", "pam-auth-update", "authconfig", "update-alternatives", "dscl"}
)
_KERNEL = frozenset({"rmmod", "insmod", "modprobe", "kexec", "swapoff", "swapon", "sysrq", "efibootmgr"})
_FIREWALL = frozenset({"iptables", "ip6tables", "iptables-legacy", "iptables-nft", "ebtables", "arptables"})
_SIGNAL = re.compile(r"-(?:[0-9]+|[A-Z][A-Z0-9+-]*|s|n)$")


def _operands(args: Sequence[str]) -> list[str]:
    return [arg for arg in args if not arg.startswith("-")]


def _kill(args: Sequence[str]) -> Violation | None:
    rest = list(args)
    operands: list[str] = []
    i = 0
    while i < len(rest):
        arg = rest[i]
        if arg == "--":
            operands.extend(rest[i + 1 :])
            break
        if arg in ("-s", "-n", "--signal"):
            i += 2
            continue
        if arg in ("-l", "-L", "--list", "--table"):
            return None
        if not operands and _SIGNAL.match(arg) and arg not in ("-1", "-0"):
            i += 1
            continue
        if not operands and arg in ("-1", "-0") and i + 1 < len(rest):
            i += 1  # `kill -1 PID`: signal 1 (HUP) then the pid
            continue
        operands.append(arg)
        i += 1
    for pid in operands:
        value = pid.lstrip("%")
        if pid.startswith("%"):
            continue
        if re.fullmatch(r"-?[0-9]+", value) and (int(value) <= 1):
            return Violation(
                rule="system", reason=f"kill {pid} signals init, every process or a process group"
            )
        if pid in ("$PPID", "${PPID}", "$$", "${$}") or (pid.startswith("-") and "$" in pid):
            return Violation(rule="system", reason=f"kill {pid} signals the agent's own shell or parent")
    return None


def _pkill(program: str, args: Sequence[str]) -> Violation | None:
    flags: set[str] = set()
    patterns: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("-u", "-U", "--uid", "--euid", "-G", "--group", "-g", "--pgroup", "-s", "--session"):
            return Violation(rule="system", reason=f"{program} {arg} kills every process of a user or group")
        if arg.startswith(("--user", "--uid", "--euid", "-u")):
            return Violation(rule="system", reason=f"{program} {arg} kills every process of a user")
        if arg.startswith("-") and len(arg) > 1:
            flags.update(arg[1:])
            if arg in ("-t", "--terminal", "-P", "--parent", "-F", "--pidfile", "--ns", "--nslist"):
                i += 1
        else:
            patterns.append(arg)
        i += 1
    if "v" in flags and program == "pkill":
        return Violation(rule="system", reason="pkill -v kills every process that does not match")
    if program == "killall" and ("r" in flags or "regexp" in flags):
        patterns = [p if p not in (".", ".*", "") else "." for p in patterns]
    for pattern in patterns:
        if pattern in (".", ".*", "", "^", "$", "*", "-1") or re.fullmatch(r"\^?\.\*?\$?", pattern):
            return Violation(rule="system", reason=f"{program} {pattern!r} matches every process")
        if pattern in _INIT_NAMES:
            return Violation(
                rule="system", reason=f"{program} {pattern} kills a process the machine or session needs"
            )
    return None


def _systemctl(args: Sequence[str]) -> Violation | None:
    operands = _operands(args)
    if not operands:
        return None
    verb = operands[0]
    if verb in _SYSTEMCTL_POWER:
        return Violation(rule="system", reason=f"systemctl {verb} changes the machine's state")
    power_units = {
        f"{name}.target" for name in ("reboot", "poweroff", "halt", "kexec", "rescue", "emergency")
    }
    if verb in ("start", "restart", "isolate") and power_units & set(operands[1:]):
        return Violation(rule="system", reason=f"systemctl {verb} of a power or rescue target")
    if verb in _SYSTEMCTL_STOP:
        for unit in operands[1:]:
            if _VITAL_UNITS.fullmatch(unit) or unit in ("*", "--all"):
                return Violation(rule="system", reason=f"systemctl {verb} {unit} stops a vital service")
    if verb in ("set-default", "set-property", "daemon-reload", "enable", "link", "edit", "revert"):
        return Violation(rule="system", reason=f"systemctl {verb} changes system services")
    return None


def _service(args: Sequence[str]) -> Violation | None:
    operands = _operands(args)
    if (
        len(operands) >= 2
        and operands[1] in ("stop", "restart", "disable", "teardown", "force-stop")
        and (_VITAL_UNITS.fullmatch(operands[0]) or operands[0].endswith(("apparmor", "ssh", "networking")))
    ):
        return Violation(rule="system", reason=f"service {operands[0]} {operands[1]} stops a vital service")
    if operands[:1] == ["--status-all"]:
        return None
    return None


def _firewall(program: str, args: Sequence[str]) -> Violation | None:
    for i, arg in enumerate(args):
        if arg in ("-F", "--flush", "-X", "--delete-chain", "-Z") or re.fullmatch(
            r"-[A-Za-z]*F[A-Za-z]*", arg
        ):
            return Violation(rule="system", reason=f"{program} {arg} removes firewall rules")
        if arg in ("-P", "--policy") and i + 2 < len(args) and args[i + 2].upper() == "ACCEPT":
            return Violation(rule="system", reason=f"{program} -P ... ACCEPT opens the firewall")
    return None


def system_violation(argv: Sequence[str]) -> Violation | None:
    """The ``system`` rule for this argv, or ``None`` (see the module docstring)."""
    if not argv:
        return None
    program, args = argv[0], list(argv[1:])
    operands = _operands(args)
    match program:
        case "kill":
            return _kill(args)
        case "pkill" | "killall" | "pgrep-kill" | "skill" | "slay":
            return _pkill(program, args)
        case _ if program in _POWER:
            if program == "shutdown" and ("-c" in args or "--help" in args):
                return None
            return Violation(rule="system", reason=f"{program} stops or restarts the machine")
        case "init" | "openrc-shutdown" | "runlevel":
            if operands and operands[0] in ("0", "6", "1", "s", "S", "q", "Q", "emergency"):
                return Violation(rule="system", reason=f"init {operands[0]} changes the runlevel")
            return None
        case "systemctl":
            return _systemctl(args)
        case "service" | "rc-service":
            return _service(args)
        case "setenforce":
            return Violation(rule="system", reason="setenforce changes SELinux enforcement")
        case "aa-teardown" | "aa-disable" | "aa-complain" | "apparmor_parser":
            if program == "apparmor_parser" and not ({"-R", "--remove"} & set(args)):
                return None
            return Violation(rule="system", reason=f"{program} weakens AppArmor")
        case "ufw":
            if operands[:1] and operands[0] in ("disable", "reset", "allow", "default", "delete"):
                return Violation(rule="system", reason=f"ufw {operands[0]} weakens the firewall")
            return None
        case "nft":
            if "flush" in operands or "delete" in operands:
                return Violation(rule="system", reason="nft flush/delete removes firewall rules")
            return None
        case _ if program in _FIREWALL:
            return _firewall(program, args)
        case "sysctl":
            if any(arg in ("-w", "--write", "-p", "--load", "--system") for arg in args) or any(
                "=" in op for op in operands
            ):
                return Violation(rule="system", reason="sysctl changes kernel parameters")
            return None
        case "umount" | "swapoff" | "mount":
            if program == "mount" and not operands and "-a" not in args and "--all" not in args:
                return None  # `mount` alone lists the mounts
            return Violation(rule="system", reason=f"{program} changes the machine's mounts")
        case "modprobe":
            if "-r" in args or "--remove" in args or operands:
                return Violation(rule="system", reason="modprobe loads or removes kernel modules")
            return None
        case _ if program in _KERNEL:
            return Violation(rule="system", reason=f"{program} changes the running kernel")
        case "ip" | "ifconfig" | "ifdown" | "nmcli" | "route":
            text = " ".join(args)
            if re.search(r"\b(down|flush|del|delete|disconnect|off)\b", text) or program == "ifdown":
                return Violation(rule="system", reason=f"{program} {text} takes networking down")
            return None
        case "hwclock" | "timedatectl" | "date":
            clock = any(re.fullmatch(r"\d{8}(\d{2}){0,2}(\.\d\d)?", op) for op in operands)
            if (
                program == "date"
                and not clock
                and not any(a in ("-s", "--set") or a.startswith("--set=") for a in args)
            ):
                return None
            if program == "timedatectl" and not (operands and operands[0].startswith("set")):
                return None
            if program == "hwclock" and not ({"-w", "--systohc", "--set", "-s", "--hctosys"} & set(args)):
                return None
            return Violation(rule="system", reason=f"{program} sets the system clock")
        case _ if program in _USER_ADMIN:
            return Violation(
                rule="system", reason=f"{program} changes users, passwords or system alternatives"
            )
        case "dbus-send" | "busctl" | "gdbus" | "qdbus":
            text = " ".join(args)
            if re.search(r"login1|systemd1", text) and re.search(
                r"PowerOff|Reboot|Halt|Suspend|Hibernate|Kexec", text
            ):
                return Violation(
                    rule="system", reason=f"{program} asks logind or systemd to stop the machine"
                )
            return None
        case "loginctl":
            if operands[:1] and operands[0] in (
                "terminate-session",
                "terminate-user",
                "kill-session",
                "kill-user",
                "poweroff",
                "reboot",
            ):
                return Violation(rule="system", reason=f"loginctl {operands[0]} ends sessions")
            return None
        case "chattr":
            return Violation(rule="system", reason="chattr changes file attributes (immutable, append-only)")
        case _:
            return None
