"""Path-based judgments on commands: which files a command writes or reads, and whether that is allowed.

* ``vital-path``: writing, moving or deleting anything under the system trees (``/etc``, ``/usr``,
  ``/usr/local``, ``/opt``, ``/srv``, ``/var`` but ``/var/tmp``, ``/boot``, ``/root`` ...), kernel
  interfaces (``/proc/sys``, ``/proc/sysrq-trigger``, ``/sys``), another user's home, and the home
  directory's hidden entries (shell start-up files, ``~/.ssh``, ``~/.gnupg``, ``~/.config``,
  ``~/.local/bin`` ...; ``~/.cache`` excepted); ``crontab`` installing jobs. Paths inside the session's
  workspace are exempt (a workspace may live under ``/opt`` or ``/root``), unless the workspace root is
  itself one of the protected directories.
* ``write-outside-workspace``: when the session has a workspace (a ``cwd``), any written, moved or
  deleted path outside its box: the workspace and its writable roots (the session's own temporary
  directory among them). The shared ``/tmp``, ``/var/tmp`` and ``/dev/shm`` are outside; only the
  name ``mktemp`` prints counts as the box's (``mktemp`` creates it in ``$TMPDIR``, which the providers
  point at the box's temporary directory).
* ``vital-path`` also for what runs code later even inside the workspace (``_protected``): the
  repository's git directory, ``core.hooksPath`` targets, the agents' settings, shell start-up files.
* ``credential-access``: any word of any command (or ``<`` redirection) naming a credential file -- SSH
  keys, cloud and registry credentials, ``~/.netrc``, ``~/.git-credentials``, gpg secret keys,
  ``/etc/shadow``, ``/proc/*/environ``, ``.env`` files outside the workspace -- except for programs that
  only look at metadata (``ls``, ``stat``, ``test``); ``gpg --export-secret-keys``; the environment
  (``env``, ``printenv``, ``set``) or a secret-named variable sent to a network program or ``/dev/tcp``.

Which operands a program writes is a table (``rm``: all, ``cp``: the last or ``-t``, ``tee``: all,
``sed -i``: the files ...). A word with an unresolved variable is judged as if the variable were empty
too (``$X/etc/passwd`` is ``/etc/passwd``); globs are matched against the protected names.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
from collections.abc import Iterator, Sequence
from dataclasses import replace

from agent_fleet.policy._hosts import host_of
from agent_fleet.policy.bash._shell import Redirect, SimpleCommand
from agent_fleet.policy.bash._words import MKTEMP_NAME
from agent_fleet.policy.rules._links import through_links, virtual_links
from agent_fleet.policy.rules._protected import protected_reason
from agent_fleet.policy.rules._secrets import (
    HOME_CREDENTIALS,
    SECRET_PRINTERS,
    SYSTEM_CREDENTIALS,
    secret_goes_home,
)
from agent_fleet.policy.rules._targets import inside, resolve_target
from agent_fleet.policy.rules._tools import well_known
from agent_fleet.policy.rules._verdict import VIRTUAL_CWD, RuleContext, Violation
from agent_fleet.policy.rules._writes import split_options, written_words

__all__ = [
    "NETWORK",
    "RULES",
    "credential_violation",
    "leaked_later",
    "path_violation",
    "redirect_violation",
    "written_words",
]

#: The ids these rules decide, with what each guards against.
RULES: dict[str, str] = {
    "vital-path": "writing, moving or deleting system files, another user's home, shell start-up files,"
    " ~/.ssh, ~/.config and other home configuration, or installing cron jobs",
    "write-outside-workspace": "writing, moving or deleting a path outside the session's workspace",
    "credential-access": "reading credential files (~/.ssh, ~/.aws, ~/.netrc ...), exporting secret keys,"
    " printing stored secrets or secret variables, or sending the environment or secret variables over the"
    " network or into the history",
}

_TEMP_ROOTS = ("/tmp", "/var/tmp", "/dev/shm", "/private/tmp", "/private/var/tmp", "/var/folders")
_HARMLESS = ("/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "/dev/zero", "/dev/full")
_HARMLESS_TREES = ("/dev/fd/", "/proc/self/fd/", "/dev/pts/", "/dev/tcp/", "/dev/udp/")
_SYSTEM_TREES = frozenset(
    {"bin", "boot", "etc", "lib", "lib32", "lib64", "libx32", "opt", "root", "sbin", "snap", "srv", "usr"}
    | {"var", "nix", "System", "Library", "Applications", "private", "proc", "sys", "run", "cores", "dev"}
)
_HOME_SAFE = (".cache",)
#: Package caches under the home directory: clearing one costs a download, nothing else.
_HOME_CACHES = (
    ".npm/_cacache", ".npm/_npx", ".npm/_logs", ".gradle/caches", ".m2/repository", ".cargo/registry",
    ".cargo/git", ".pnpm-store", ".yarn/cache", ".bun/install/cache", "Library/Caches", ".local/share/pnpm",
    ".nuget/packages", ".ivy2/cache", ".sbt/boot", ".conda/pkgs", ".gem/ruby",
)  # fmt: skip
#: Programs that copy whole trees: a home directory (or ~/.config) carries every credential with it.
_ARCHIVERS = frozenset({"cp", "tar", "zip", "7z", "rsync", "scp", "rclone", "cpio", "bsdtar", "gtar"})
_PATH_TOKEN = re.compile(r"(?:~|\$HOME|\$\{HOME\}|/)[^\s;|&)'\"`]*")
_KEY_USERS = frozenset({"ssh", "scp", "sftp", "ssh-add", "ssh-keygen", "ssh-copy-id", "autossh", "mosh"})
_WRITE_OPS = frozenset({">", ">>", ">|", "&>", "&>>", "<>", "&>|"})
_READ_OPS = frozenset({"<", "<>"})
#: A repository's hooks and configuration: what is written there runs on later git commands.
_GIT_CODE = re.compile(
    r"/\.git/(?:hooks(?:/|$)|config$|config\.worktree$|modules/.+/(?:hooks(?:/|$)|config$))"
)

_READ_HARMLESS = (".ssh/known_hosts", ".ssh/*.pub")
_METADATA_ONLY = frozenset({"ls", "stat", "test", "[", "du", "exa", "eza", "tree", "realpath", "readlink"})
_HOME_LIKE = re.compile(r"^/(?:root|home/[^/]+|Users/[^/]+)(?=/|$)")
_GLOB = re.compile(r"[*?\[]")
_PATHLIKE = re.compile(r"[/~$.`_*?\[]|netrc|environ|shadow")
_LEADING_VAR = re.compile(r"^(?:\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*|\$\([^)]*\)|`[^`]*`)+")

NETWORK = frozenset(
    {"curl", "wget", "nc", "ncat", "netcat", "socat", "scp", "sftp", "ssh", "ftp", "tftp", "telnet", "dig"}
    | {"nslookup", "host", "drill", "http", "https", "xh", "aria2c", "lwp-request", "sendmail", "mail"}
    | {"mailx", "mutt", "openssl", "rsync", "smbclient", "ncftp", "ping", "websocat", "gsutil", "rclone"}
    | {"s3cmd", "httpie", "powershell", "pwsh", "cadaver", "lftp", "axel", "fetch"}
)
_REROUTES = ("--resolve", "--connect-to", "--doh-url", "--dns-servers", "--unix-socket", "--abstract-unix")
_ENV_DUMPERS = frozenset({"env", "printenv", "set", "export", "declare", "typeset", "compgen"})
_SECRET_VAR = re.compile(
    r"\$\{?[A-Za-z0-9_]*(?:SECRET|TOKEN|PASSWORD|PASSWD|API_?KEY|ACCESS_KEY|PRIVATE_KEY|CREDENTIAL|SESSION_KEY)"
    r"[A-Za-z0-9_]*",
    re.IGNORECASE,
)


# --------------------------------------------------------------------------------------------------
# Judging paths.


def _variants(word: str, ctx: RuleContext) -> Iterator[str]:
    """The absolute paths ``word`` may name: from ``cwd`` and each ``cd`` target, and with a leading
    unresolved variable taken as empty."""
    words = [word]
    match = _LEADING_VAR.match(word)
    if match is not None and not word.startswith(("$HOME", "${HOME}", "$PWD", "${PWD}")):
        rest = word[match.end() :]
        if rest.startswith("/"):
            words.append(rest)
    for candidate in words:
        for cwd in dict.fromkeys((ctx.cwd, *ctx.cd_targets)):
            path = resolve_target(candidate, cwd=cwd, home=ctx.home)
            if path is not None:
                yield path
                yield from through_links(path, ctx)
        yield from virtual_links(candidate, ctx)


def _home_relative(path: str, home: str) -> str | None:
    if path == home or path.startswith(home.rstrip("/") + "/"):
        return path[len(home.rstrip("/")) + 1 :]
    match = _HOME_LIKE.match(path)
    if match is not None:
        return path[match.end() + 1 :]
    return None


def _compile(patterns: Sequence[str]) -> re.Pattern[str]:
    """One regular expression: a path equal to, or under, any of ``patterns`` (``*`` spans ``/``)."""
    forms: list[str] = []
    for pattern in patterns:
        stem = pattern.removesuffix("/*")
        forms += [fnmatch.translate(pattern), fnmatch.translate(stem), fnmatch.translate(stem + "/*")]
    return re.compile("|".join(f"(?:{form})" for form in forms))


def _matches(path: str, patterns: Sequence[str], compiled: re.Pattern[str]) -> bool:
    """``path`` (may hold globs) equals, lies under, or may match one of ``patterns``."""
    if compiled.match(path):
        return True
    if _GLOB.search(path):
        # A glob in the word: could it name the protected file or its directory?
        return any(
            fnmatch.fnmatchcase(pattern.replace("*", sample), path)
            or fnmatch.fnmatchcase(pattern.removesuffix("/*"), path)
            for pattern in patterns
            for sample in _SAMPLES
        )
    return False


#: Names a ``*`` in a protected pattern stands for when a globbed word is matched against it.
_SAMPLES = ("x", "id_rsa", "id_ed25519", "id_ecdsa", "credentials", "config", "hosts.yml", "default")


_CREDENTIALS_RE = _compile(HOME_CREDENTIALS)
_SYSTEM_CREDENTIALS_RE = _compile(SYSTEM_CREDENTIALS)
_HARMLESS_RE = re.compile("|".join(fnmatch.translate(p) for p in _READ_HARMLESS))


def _protected_roots(ctx: RuleContext) -> tuple[str, ...]:
    """Workspace roots that exempt paths under them from the vital check (not `/`, home, a system dir)."""
    found: list[str] = []
    for root in ctx.roots:
        parts = [p for p in root.split("/") if p]
        if len(parts) < 2 or root == ctx.home or ctx.home.startswith(root.rstrip("/") + "/"):
            continue
        found.append(root)
    return tuple(found)


def _temp(path: str) -> bool:
    return any(path == root or path.startswith(root + "/") for root in _TEMP_ROOTS)


def vital_reason(path: str, ctx: RuleContext) -> str | None:
    """Why writing ``path`` (absolute, normalised) harms the machine or the user's setup, or ``None``."""
    if path in _HARMLESS or path.startswith(_HARMLESS_TREES) or _temp(path):
        return None
    if inside(path, _protected_roots(ctx)):
        return None
    if path.startswith(("/proc/sys", "/proc/sysrq-trigger", "/sys/")):
        return f"{path} changes the running kernel"
    rel = _home_relative(path, ctx.home)
    if rel is not None:
        owner = path[: len(path) - len(rel)].rstrip("/") if rel else path
        if owner != ctx.home and not path.startswith(ctx.home.rstrip("/") + "/") and path != ctx.home:
            return f"{path} is in another user's home"
        first = rel.split("/", 1)[0]
        cache = any(rel == c or rel.startswith(c + "/") for c in _HOME_CACHES)
        if (first.startswith(".") or first in ("bin", "Library")) and first not in _HOME_SAFE and not cache:
            return f"{path} is the user's configuration or start-up files (~/{first})"
        return None
    parts = [part for part in path.split("/") if part]
    if parts and (parts[0] in _SYSTEM_TREES or _GLOB.search(parts[0])):
        return f"{path} is a system location"
    return None


def credential_reason(word: str, ctx: RuleContext) -> str | None:
    if not _PATHLIKE.search(word):
        return None
    if ctx.cwd is None and escapes(word):
        base = posixpath.basename(word)
        if base == ".env" or base.startswith(".env."):
            return f"{word!r} is an environment file outside the working directory"
    for path in _variants(word, ctx):
        rel = _home_relative(path, ctx.home)
        if rel is not None:
            if not _GLOB.search(rel) and _HARMLESS_RE.match(rel):
                continue
            if _matches(rel, HOME_CREDENTIALS, _CREDENTIALS_RE):
                return f"{word!r} is a credential file ({path})"
        if _matches(path, SYSTEM_CREDENTIALS, _SYSTEM_CREDENTIALS_RE):
            return f"{word!r} is a credential file ({path})"
        base = posixpath.basename(path)
        env_file = (base == ".env" or base.startswith(".env.")) and not base.endswith(
            (".example", ".sample", ".template")
        )
        if env_file and (
            (ctx.roots and not inside(path, ctx.roots))
            or (not ctx.roots and (word.startswith(("/", "~", "$")) or escapes(word)))
        ):
            return f"{word!r} is an environment file outside the workspace"
    return None


def escapes(word: str) -> bool:
    """A relative path that climbs out of the directory it is used in (``..``, ``../x``, ``a/../../x``)."""
    if word.startswith("~+"):
        word = "." + word[2:]
    if not word or word.startswith(("/", "~", "$", "`")):
        return False
    return posixpath.normpath(word).split("/", 1)[0] == ".."


def _git_code(word: str, verb: str) -> Violation:
    return Violation(
        rule="git-config-shell",
        reason=f"{verb} {word!r}: git runs hooks and configured commands from there on later commands",
    )


def _write_violation(word: str, verb: str, ctx: RuleContext) -> Violation | None:
    if _GIT_CODE.search("/" + posixpath.normpath(word).lstrip("/")):
        return _git_code(word, verb)
    base = posixpath.basename(word.rstrip("/"))
    if base.endswith(".pth") or base in ("sitecustomize.py", "usercustomize.py"):
        return Violation(rule="vital-path", reason=f"{verb} {word!r}: Python runs it at every start-up")
    if ctx.cwd is None and escapes(word):
        return Violation(
            rule="write-outside-workspace", reason=f"{verb} {word!r} climbs out of the working directory"
        )
    for path in _variants(word, ctx):
        if path.startswith("/\x00"):
            if not inside(path, (VIRTUAL_CWD,)):
                return Violation(
                    rule="write-outside-workspace",
                    reason=f"{verb} {word!r} climbs out of the working directory",
                )
            continue
        if path == "/" or path == ctx.home:
            return Violation(rule="vital-path", reason=f"{verb} {word!r} writes into {path} itself")
        if _GIT_CODE.search(path):
            return _git_code(word, verb)
        why = vital_reason(path, ctx)
        if why is not None:
            return Violation(rule="vital-path", reason=f"{verb} {word!r}: {why}")
        if ctx.roots and path not in _HARMLESS and not path.startswith(_HARMLESS_TREES):
            why = protected_reason(path, ctx.cwd, ctx.roots)
            if why is not None:
                return Violation(rule="vital-path", reason=f"{verb} {word!r}: {why}")
        if (
            ctx.roots
            and not inside(path, ctx.roots)
            and not inside(path, (MKTEMP_NAME,))
            and not inside(path, tuple(posixpath.join(ctx.home, c) for c in (".cache", *_HOME_CACHES)))
            and path not in _HARMLESS
            and not path.startswith(_HARMLESS_TREES)
        ):
            return Violation(
                rule="write-outside-workspace",
                reason=f"{verb} {word!r} ({path}) is outside the workspace",
            )
    return None


_GLOBAL_FLAGS = frozenset({"-g", "--global", "--location=global", "--user", "--user-install", "--system"})
_INSTALLERS = frozenset({"npm", "pnpm", "yarn", "bun", "pip", "pip3", "gem", "cargo", "composer", "deno"})


def _special_writes(cmd: SimpleCommand, ctx: RuleContext) -> Violation | None:
    """Writes the operand table cannot express: ``mv x /dev/null`` replaces the device node; a global
    or per-user install (``npm i -g``, ``pip install --user``, ``yarn global add``) writes programs
    onto the PATH outside the workspace (well-known tools excepted: ``npm i -g pnpm``); ``git
    worktree add`` may make a tree beside the workspace (what worktrees are for) but not in a system
    or home location."""
    args = cmd.argv[1:]
    if cmd.program == "mv" and len(args) >= 2 and not args[-1].startswith("-"):
        dest = posixpath.normpath(args[-1])
        if dest.startswith("/dev/") and not dest.startswith((*_HARMLESS_TREES, "/dev/shm/")):
            return Violation(rule="disk-write", reason=f"mv onto {dest} replaces the device node")
    if cmd.program in _INSTALLERS:
        words = [a for a in args if not a.startswith("-")]
        installing = bool({"install", "i", "add", "global", "update", "upgrade"} & set(words[:2]))
        packages = [w for w in words if w not in ("install", "i", "add", "global", "update", "upgrade")]
        if installing and (_GLOBAL_FLAGS & set(args) or words[:1] == ["global"]) and not well_known(packages):
            return Violation(
                rule="write-outside-workspace",
                reason=f"{cmd.program} installing globally or per user writes outside the workspace",
            )
    if cmd.program == "git" and "worktree" in args and "add" in args:
        rest = [a for a in args[args.index("add") + 1 :] if not a.startswith("-")]
        for word in rest[:1]:
            for path in _variants(word, ctx):
                why = vital_reason(path, ctx)
                if why is not None:
                    return Violation(rule="vital-path", reason=f"git worktree add {word!r}: {why}")
        return None
    return None


def path_violation(cmd: SimpleCommand, ctx: RuleContext) -> Violation | None:
    """``vital-path``/``write-outside-workspace`` for the files ``cmd`` writes; ``crontab``."""
    if cmd.program == "crontab" and not ({"-l", "-h", "--help"} & set(cmd.argv[1:])):
        return Violation(rule="vital-path", reason="crontab installs jobs that run outside the session")
    found = _special_writes(cmd, ctx)
    if found is not None:
        return found
    if cmd.program in ("ln", "link") or (cmd.program == "cp" and "-s" in cmd.argv):
        ctx = replace(ctx, follow_links=False)  # the link itself is made here, not written through
    for word in written_words(cmd.argv):
        if word in ("-", ""):
            continue
        found = _write_violation(word, cmd.program, ctx)
        if found is not None:
            return found
    return None


def redirect_violation(redirect: Redirect, ctx: RuleContext) -> Violation | None:
    if redirect.op in _WRITE_OPS or (redirect.op.endswith(">") and not redirect.op.endswith("&>")):
        if redirect.op in (">&", "<&") or re.fullmatch(r"[0-9-]+", redirect.target):
            return None
        return _write_violation(redirect.target, f"redirection {redirect.op}", ctx)
    if redirect.op in _READ_OPS:
        why = credential_reason(redirect.target, ctx)
        if why is not None:
            return Violation(rule="credential-access", reason=f"reading {why}")
    return None


def _option_values(word: str) -> list[str]:
    """Path-like parts of one argument: ``--opt=PATH``, ``@PATH``, ``name=@PATH``, ``if=PATH``."""
    parts = [word]
    if "=" in word:
        parts.append(word.partition("=")[2])
    for part in list(parts):
        if "@" in part:
            parts.append(part.rpartition("@")[2])
        if part.startswith("-") and len(part) > 2 and not part.startswith("--"):
            parts.append(part[2:])
    if ":" in word:
        parts.extend(word.split(":"))
    return parts


_PRINTERS = tuple(
    (re.compile(program), tuple(tuple(re.compile(word) for word in words) for words in alternatives))
    for program, alternatives in SECRET_PRINTERS
)


def _prints_secret(argv: Sequence[str]) -> str | None:
    """The words that make ``argv`` print a stored secret (``aws secretsmanager get-secret-value``)."""
    if not argv:
        return None
    args = argv[1:]
    for program, alternatives in _PRINTERS:
        if not program.fullmatch(argv[0]):
            continue
        for words in alternatives:
            hits = [next((a for a in args if word.fullmatch(a)), None) for word in words]
            if all(hit is not None for hit in hits):
                return " ".join(hit for hit in hits if hit is not None)
    return None


def credential_violation(cmd: SimpleCommand, ctx: RuleContext) -> Violation | None:
    """``credential-access`` for ``cmd`` (see the module docstring)."""
    program = cmd.program
    if program in ("gpg", "gpg2") and any(
        arg.startswith(("--export-secret", "--export-ssh-key")) for arg in cmd.argv
    ):
        return Violation(rule="credential-access", reason="gpg exports secret keys")
    printed = _prints_secret(cmd.argv)
    if printed is not None:
        return Violation(rule="credential-access", reason=f"{program} {printed} prints stored secrets")
    if program not in _METADATA_ONLY:
        words = list(cmd.argv[1:])
        if program in ("tar", "bsdtar", "gtar", "zip", "rsync"):  # `tar -C ~ .ssh`: operands in DIR
            values, operands = split_options(cmd.argv[1:], "Cf", ("--directory", "--file"))
            for base in values.get("-C", []) + values.get("--directory", []):
                words += [posixpath.join(base, operand) for operand in operands]
        if program in _KEY_USERS:  # keys given to authenticate with are used, not read out
            if program in ("ssh-add", "ssh-keygen"):
                words = []
            words = [w for i, w in enumerate(words) if not (i and words[i - 1] == "-i") and w != "-i"]
            words = [w for w in words if not w.startswith("-i") and "identityfile" not in w.lower()]
        if "xargs" in cmd.wrappers:  # `ls ~/.ssh/id_* | xargs cat`: the names come from the pipe
            words += [word for argv in cmd.stdin for word in argv[1:]]
        for word in list(words):
            if "$(" in word or "`" in word:  # `cat $(ls ~/.ssh/id_*)`: paths named inside a substitution
                words += _PATH_TOKEN.findall(word)
        for word in words:
            for part in _option_values(word):
                why = credential_reason(part, ctx)
                if why is not None:
                    return Violation(rule="credential-access", reason=f"{program} reads {why}")
    if program in _ARCHIVERS:
        for word in cmd.argv[1:]:
            for path in _variants(word, ctx) if not word.startswith("-") else ():
                rel = _home_relative(path, ctx.home)
                if rel is not None and (rel == "" or rel.split("/")[0] in (".config", ".local")):
                    return Violation(
                        rule="credential-access", reason=f"{program} copies {word!r}, which holds credentials"
                    )
    network = program in NETWORK or any(
        r.op in _WRITE_OPS and r.target.startswith(("/dev/tcp/", "/dev/udp/")) for r in cmd.redirects
    )
    if network:
        dumped = (set(cmd.feeders) | set(cmd.substituted)) & _ENV_DUMPERS
        if program in _ENV_DUMPERS:
            dumped.add(program)
        if dumped:
            return Violation(
                rule="credential-access", reason=f"{sorted(dumped)[0]} sends the environment over the network"
            )
        texts = [
            *cmd.argv[1:],
            *(r.target for r in cmd.redirects if r.op in ("<<<", "<<", "<<-")),
            *(word for argv in cmd.stdin for word in argv[1:]),
        ]
        secret = next((word for word in texts if _SECRET_VAR.search(word)), None)
        if secret is not None:
            names = {m.group(0).lstrip("${") for word in texts for m in _SECRET_VAR.finditer(word)}
            hosts = {h for h in (host_of(a, bare=program in ("curl", "wget")) for a in cmd.argv[1:]) if h}
            if any(a.startswith(_REROUTES) for a in cmd.argv[1:]):
                hosts.add("?")  # `--resolve api.openai.com:443:IP`: the name no longer says where it goes
            if not secret_goes_home(names, hosts):
                return Violation(
                    rule="credential-access", reason=f"{program} sends a secret variable: {secret!r}"
                )
    return None


def leaked_later(commands: Sequence[SimpleCommand], ctx: RuleContext) -> Violation | None:
    """The environment or a credential written to a file, then that file sent over the network
    (``env > e.txt; curl -F f=@e.txt URL``)."""
    saved: dict[str, str] = {}
    for cmd in commands:
        targets = [r.target for r in cmd.redirects if r.op in (">", ">>", ">|", "&>", "&>>")]
        if cmd.program == "tee":  # `env | tee env.log`
            targets += [a for a in cmd.argv[1:] if not a.startswith("-")]
        if targets:
            sources = [n for n in (cmd.program, *cmd.feeders) if n in _ENV_DUMPERS]
            bare = replace(cmd, redirects=(), stdin=(), feeders=())
            if sources or credential_violation(bare, ctx) is not None:
                for target in targets:
                    saved[posixpath.basename(target)] = sources[0] if sources else cmd.program
        if saved and cmd.program == "git":  # `env > e.txt && git add e.txt && git commit`
            found = _recorded(cmd, saved)
            if found is not None:
                return found
        if saved and cmd.program in NETWORK:
            for word in cmd.argv[1:]:
                for part in _option_values(word):
                    source = saved.get(posixpath.basename(part))
                    if source is not None and part:
                        return Violation(
                            rule="credential-access",
                            reason=f"{cmd.program} sends {part!r}, written from {source}",
                        )
    return None


def _recorded(cmd: SimpleCommand, saved: dict[str, str]) -> Violation | None:
    """``git add``/``commit``/``stash`` of a file written from the environment or a credential (by name,
    or by adding everything)."""
    words = [a for a in cmd.argv[1:] if not a.startswith("-")]
    if not words or words[0] not in ("add", "commit", "stash"):
        return None
    named = [w for w in words[1:] if posixpath.basename(w.rstrip("/")) in saved]
    everything = words[0] == "add" and (
        not words[1:]
        or any(w in (".", "*", ":/") for w in words[1:])
        or "-A" in cmd.argv
        or "--all" in cmd.argv
    )
    if not named and not everything:
        return None
    source = saved[posixpath.basename(named[0].rstrip("/"))] if named else next(iter(saved.values()))
    return Violation(
        rule="credential-access",
        reason=f"git {words[0]} records a file written from {source}: secrets in history",
    )
