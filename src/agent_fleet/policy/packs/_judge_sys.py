"""Judges for the supply chain, global configuration, containers and exhaustion of this machine.

* installs (pip, uv, poetry, npm, yarn, pnpm, bun, gem, cargo, conda) from an index, URL or VCS whose
  host is not on the allow-list (``_hosts``), requirement files included; installs into the system's
  site-packages (``--break-system-packages``, ``--system``, ``--target /usr/...``, ``/usr/bin/python3 -m
  pip``);
* ``git config`` writes to the global/system configuration, or local keys that run programs;
* ``git push`` to a URL outside the allow-list, and pushes that delete or force-move tags;
* HTTP ``DELETE`` towards another machine;
* containers mounting ``/``, the home directory or the Docker socket;
* filling the disk: ``yes > f``, ``cat /dev/zero > f``, ``dd if=/dev/zero`` with no ``count=``,
  ``fallocate -l 500G``.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence

from agent_fleet.policy._hosts import host_of
from agent_fleet.policy.bash._shell import SimpleCommand
from agent_fleet.policy.packs._argv import WRITE_OPS, JudgeContext, option_values, read_small_file, split_args

__all__ = [
    "infinite_source",
    "judge_answered_yes",
    "judge_container_mount",
    "judge_cpu_burn",
    "judge_fill_disk",
    "judge_git_config",
    "judge_git_push",
    "judge_http_delete",
    "judge_install_source",
    "judge_system_site",
    "judge_unbounded_parallel",
]

_INDEX_OPTIONS = (
    "-i", "--index-url", "--extra-index-url", "--find-links", "--index", "--default-index",
    "--registry", "--source", "--git", "--trusted-host", "--channel", "--override-channels",
    "--pip-args", "--from", "--with", "--spec", "--package",
)  # fmt: skip
_NPM_FAMILY = frozenset({"npm", "pnpm", "yarn", "bun", "npx", "bunx", "pnpx"})
_INSTALL_WORDS = frozenset(
    {"install", "i", "add", "ci", "update", "upgrade", "up", "dlx", "x", "exec", "inject"}
)
_URL = re.compile(r"(?:(?:git|hg|svn|bzr)\+)?[A-Za-z][A-Za-z0-9+.-]*://[^\s\"']+|git@[^\s:]+:[^\s]+")
_SHORTHAND = {
    "github:": "github.com",
    "gitlab:": "gitlab.com",
    "bitbucket:": "bitbucket.org",
    "gist:": "gist.github.com",
}
_GH_SHORTHAND = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]+(?:#\S*)?$")


def _spec_hosts(word: str, npm_install: bool) -> list[str | None]:
    """Hosts a requirement/package word would be fetched from (empty: from the configured index)."""
    hosts: list[str | None] = [host_of(url) for url in _URL.findall(word)]
    for prefix, host in _SHORTHAND.items():
        if word.startswith(prefix) or f"@{prefix}" in word:
            hosts.append(host)
    if npm_install and not hosts and _GH_SHORTHAND.match(word) and not word.startswith((".", "@", "/", "~")):
        hosts.append("github.com")  # npm install user/repo fetches from GitHub
    if word.startswith("file:") or word.startswith("file://"):
        return []
    return hosts


def _requirement_file_hosts(path: str, ctx: JudgeContext, depth: int = 0) -> list[tuple[str, str | None]]:
    found: list[tuple[str, str | None]] = []
    if host_of(path) is not None:
        return [(f"requirements from {path}", host_of(path))]
    content = read_small_file(path, ctx)
    if content is None or depth > 3:
        return found
    for line in content.splitlines():
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if words[0] in ("-r", "--requirement", "-c", "--constraint") and len(words) > 1:
            found.extend(_requirement_file_hosts(words[1], ctx, depth + 1))
            continue
        for value in option_values(words, (*_INDEX_OPTIONS, "-f")):
            found.append((f"{path}: {line.strip()}", host_of(value) or value.lower()))
        for word in words:
            found.extend((f"{path}: {line.strip()}", host) for host in _spec_hosts(word, False))
    return found


def judge_install_source(cmd: SimpleCommand, argv: Sequence[str], ctx: JudgeContext) -> str | None:
    program, args = argv[0], argv[1:]
    # npm-style installs run the package's lifecycle scripts: a git or tarball source is trusted only when
    # the user listed its host, never just because it is the repository's own forge.
    hosts = ctx.hosts if program in _NPM_FAMILY else ctx.hosts.with_forge(ctx.cwd)
    if program in ("npx", "bunx", "pnpx"):  # `npx tailwindcss -i in.css`: what follows is the tool's
        first = next((i for i, a in enumerate(args) if not a.startswith("-")), len(args))
        args = args[: first + 1]
    sources: list[tuple[str, str | None]] = []
    options = _INDEX_OPTIONS if program in ("conda", "mamba", "micromamba") else (*_INDEX_OPTIONS, "-f")
    for name in options:
        for value in option_values(args, (name,), attached=len(name) == 2):
            if name in ("--channel", "-c") and "://" not in value:
                continue
            if name in ("--from", "--with", "--spec", "--package", "--git", "--pip-args"):
                sources.extend(
                    (f"{name} {value}", host) for host in _spec_hosts(value, program in _NPM_FAMILY)
                )
                continue
            sources.append(
                (f"{name} {value}", host_of(value) or (value.lower() if "/" not in value else None))
            )
    if program in ("conda", "mamba", "micromamba"):
        for value in option_values(args, ("-c",), attached=False):
            if "://" in value:
                sources.append((f"-c {value}", host_of(value)))
    for path in option_values(args, ("-r", "--requirement", "-c", "--constraint")):
        if program not in _NPM_FAMILY and program not in ("conda", "mamba", "micromamba", "gem", "cargo"):
            sources.extend(_requirement_file_hosts(path, ctx))
    parsed = split_args(
        args, (*options, "-r", "--requirement", "-c", "--constraint", "-e", "--editable", "-p")
    )
    npm_install = program in _NPM_FAMILY and (
        program in ("npx", "bunx", "pnpx") or bool(set(parsed.positionals[:2]) & _INSTALL_WORDS)
    )
    positionals = parsed.positionals
    if program in ("npx", "bunx", "pnpx"):  # `npx tsx src/index.ts`: the package, then its arguments
        positionals = positionals[:1]
    elif program in _NPM_FAMILY and positionals[:1] and positionals[0] in ("exec", "x", "dlx"):
        positionals = positionals[:2]
    for word in (*positionals, *option_values(args, ("-e", "--editable"))):
        sources.extend((word, host) for host in _spec_hosts(word, npm_install))
    if set(parsed.positionals[:2]) & {"install", "i", "ci", "add", "sync", "lock", "update", "upgrade"}:
        sources.extend(_project_indexes(program, ctx))
    for what, host in sources:
        if not hosts.allows(host):
            return f"{what} fetches from {host or 'an unknown host'}, which is not on the allowed hosts"
    return None


_REGISTRY_LINE = re.compile(
    r"^\s*(?:@[\w.-]+:)?(?:registry|npmRegistryServer|index-url|extra-index-url|url)\s*[=:]\s*[\"']?([^\s\"']+)",
    re.MULTILINE,
)
_PROJECT_CONFIGS = {
    "npm": (".npmrc",),
    "pnpm": (".npmrc",),
    "npx": (".npmrc",),
    "yarn": (".npmrc", ".yarnrc", ".yarnrc.yml"),
    "bun": (".npmrc", "bunfig.toml"),
    "uv": ("uv.toml", "pyproject.toml"),
    "poetry": ("pyproject.toml",),
    "pdm": ("pyproject.toml",),
    "pip": ("pip.conf",),
    "pip3": ("pip.conf",),
}


def _project_indexes(program: str, ctx: JudgeContext) -> list[tuple[str, str | None]]:
    """Registries and indexes the project's own files point installs at: a hostile repository can
    name any host in its ``.npmrc`` or ``pyproject.toml``."""
    found: list[tuple[str, str | None]] = []
    for name in _PROJECT_CONFIGS.get(program, ()):
        text = read_small_file(name, ctx) if ctx.cwd else None
        if not text:
            continue
        if name == "pyproject.toml":
            text = "\n".join(
                line
                for line in text.splitlines()
                if re.match(r"\s*(url|index-url|extra-index-url)\s*=", line)
            )
        for url in _REGISTRY_LINE.findall(text):
            host = host_of(url)
            if host is not None:
                found.append((f"{name}: {url}", host))
    return found


_SYSTEM_PREFIXES = (
    "/usr",
    "/lib",
    "/lib64",
    "/opt",
    "/etc",
    "/bin",
    "/sbin",
    "/Library",
    "/System",
    "/var/lib",
)


def _system_path(path: str | None) -> bool:
    if path is None:
        return False
    packages = "site-packages" in path or "dist-packages" in path
    return path == "/" or packages or path.startswith(_SYSTEM_PREFIXES)


def judge_system_site(cmd: SimpleCommand, argv: Sequence[str], ctx: JudgeContext) -> str | None:
    args = argv[1:]
    parsed = split_args(args)
    if not ({"install", "sync", "add", "uninstall"} & set(parsed.positionals[:2])):
        return None
    if "--break-system-packages" in parsed.flags:
        return "--break-system-packages installs over the system's own packages"
    if argv[0] == "uv" and "--system" in parsed.flags:
        return "uv pip --system installs into the system interpreter"
    for value in option_values(args, ("-t", "--target", "--prefix", "--root", "--python")):
        if _system_path(ctx.resolve(value)):
            return f"installing into {value}"
    interpreter = next(
        (word for word in cmd.written if posixpath.basename(word).startswith(("python", "pip"))), ""
    )
    if interpreter.startswith(
        ("/usr/bin/", "/bin/", "/usr/local/bin/", "/usr/sbin/", "/System/", "/Library/")
    ):
        return f"{interpreter} installs into the system's site-packages"
    return None


_GIT_READ_FLAGS = frozenset(
    {"--get", "--get-all", "--get-regexp", "--get-urlmatch", "--list", "-l", "--show-origin"}
)
_GIT_WRITE_FLAGS = frozenset(
    {
        "--unset",
        "--unset-all",
        "--add",
        "--replace-all",
        "--rename-section",
        "--remove-section",
        "-e",
        "--edit",
    }
)
_GIT_CONFIG_VALUES = ("-f", "--file", "--blob", "--type", "--default", "--comment", "--value")
_EXEC_KEYS = re.compile(
    r"^(core\.(fsmonitor|sshcommand|pager|editor|askpass|gitproxy)|credential\..*helper|filter\..*\.(clean|smudge|process)"
    r"|diff\..*\.(textconv|command)|diff\.external|merge\..*\.driver|gpg\.(.*\.)?program|sequence\.editor"
    r"|uploadpack\.packobjectshook|core\.hookspath|include\.path|includeif\..*\.path|url\..*\.insteadof"
    r"|protocol\..*\.allow|http\.sslverify|safe\.directory|core\.worktree|http\.(.*\.)?proxy"
    r"|core\.attributesfile|init\.templatedir|pager\..*|interactive\.difffilter)$",
    re.IGNORECASE,
)


_FORGES = frozenset({"github.com", "gitlab.com", "bitbucket.org", "codeberg.org", "ssh.dev.azure.com"})


def judge_git_config(cmd: SimpleCommand, argv: Sequence[str], ctx: JudgeContext) -> str | None:
    args = list(argv[1:])
    while args and args[0] != "config":
        args.pop(0)
    args = args[1:]
    parsed = split_args(args, _GIT_CONFIG_VALUES)
    words = list(parsed.positionals)
    action = (
        words.pop(0)
        if words and words[0] in ("get", "list", "set", "unset", "rename-section", "remove-section", "edit")
        else None
    )
    read = action in ("get", "list") or bool(parsed.flags & _GIT_READ_FLAGS)
    write = action in ("set", "unset", "rename-section", "remove-section", "edit") or bool(
        parsed.flags & _GIT_WRITE_FLAGS
    )
    if not write and (read or len(words) < 2):
        return None
    scope = "local"
    if parsed.flags & {"--global", "--system"}:
        scope = "global" if "--global" in parsed.flags else "system"
    for path in option_values(args, ("-f", "--file")):
        resolved = ctx.resolve(path)
        if resolved is None or not ctx.inside(resolved):
            scope = f"file {path}"
    key = words[0] if words else ""
    if scope != "local":
        return f"git config writes the {scope} configuration ({key or 'edit'})"
    value = words[1] if len(words) > 1 else ""
    if key.lower().startswith("alias.") and value.startswith("!"):
        return f"git config alias {key} runs a shell command"
    if _EXEC_KEYS.match(key):
        if key.lower() == "core.hookspath":
            if value in ("", "/dev/null"):
                return None  # hooks turned off
            resolved = ctx.resolve(value)
            if (resolved is not None and ctx.inside(resolved)) or (
                resolved is None and not value.startswith(("/", "~", "$"))
            ):
                return None
        return f"git config {key} makes git run or trust something new"
    if re.fullmatch(r"remote\..*\.(url|pushurl)", key, re.IGNORECASE):
        host = host_of(value)
        if host is not None and host not in _FORGES and not ctx.hosts.allows(host):
            return f"git config {key} sends pushes and fetches to {host}"
    return None


def _remote_url(name: str, ctx: JudgeContext) -> str:
    """``name``, or the URL the script itself gives that remote (``git remote add x URL && git push x``)."""
    for cmd in ctx.script.commands:
        if cmd.program != "git":
            continue
        words = split_args(cmd.argv[1:], ("-C", "-c", "-t", "-m", "--push")).positionals
        if len(words) >= 4 and words[0] == "remote" and words[1] in ("add", "set-url") and words[2] == name:
            return words[3]
    return name


_TAGLIKE = re.compile(r"^(refs/tags/.+|v?\d+(\.\d+)+([-+.].*)?)$")


def judge_git_push(cmd: SimpleCommand, argv: Sequence[str], ctx: JudgeContext) -> str | None:
    args = list(argv[1:])
    while args and args[0] != "push":
        args.pop(0)
    args = args[1:]
    parsed = split_args(args, ("--repo", "-o", "--push-option", "--receive-pack", "--exec"))
    flags = parsed.flags
    words = list(parsed.positionals)
    remote = _remote_url(words[0] if words else "origin", ctx)
    if remote:
        host = host_of(remote)
        if host is not None and not ctx.hosts.with_forge(ctx.cwd).allows(host):
            return f"pushing the repository to {host}, which is not on the allowed hosts"
    refspecs = words[1:]
    forced = bool({"--force", "-f", "--force-with-lease", "--force-if-includes"} & flags) or any(
        r.startswith("+") for r in refspecs
    )
    deleting = bool({"--delete", "-d"} & flags)
    for ref in refspecs:
        target = ref.lstrip("+").split(":")[-1]
        if ref.startswith(":") and _TAGLIKE.match(ref[1:]):
            return f"deleting the published tag {ref[1:]!r}"
        if deleting and _TAGLIKE.match(ref):
            return f"deleting the published tag {ref!r}"
        if forced and (_TAGLIKE.match(target) or "refs/tags/" in ref):
            return f"force-pushing the tag {target!r} overwrites a published release"
    if forced and "--tags" in flags:
        return "force-pushing tags overwrites published releases"
    return None


def judge_http_delete(cmd: SimpleCommand, argv: Sequence[str], ctx: JudgeContext) -> str | None:
    program, args = argv[0], argv[1:]
    method = ""
    if program in ("curl", "curlie"):
        values = option_values(args, ("-X", "--request"))
        method = values[-1] if values else ""
    elif program in ("wget", "wget2"):
        values = option_values(args, ("--method",))
        method = values[-1] if values else ""
    elif program in ("http", "https", "xh", "xhs"):
        positionals = split_args(args).positionals
        method = positionals[0] if positionals and positionals[0].isupper() else ""
    if method.upper() not in ("DELETE", "PURGE"):
        return None
    hosts = [
        host_of(word, bare=True)
        for word in split_args(
            args, ("-X", "--request", "-H", "--header", "-d", "--data", "-u", "-o")
        ).positionals
    ]
    hosts = [host for host in hosts if host]
    if hosts and all(ctx.hosts.trusted(host) for host in hosts):
        return None
    return f"HTTP {method.upper()} to {hosts[0] if hosts else 'an unknown host'}"


_SOCKETS = (
    "/var/run/docker.sock",
    "/run/docker.sock",
    "/run/podman/podman.sock",
    "/run/containerd/containerd.sock",
)
_HOME_SECRETS = (".ssh", ".aws", ".kube", ".config/gcloud", ".azure", ".gnupg", ".docker")


def judge_container_mount(cmd: SimpleCommand, argv: Sequence[str], ctx: JudgeContext) -> str | None:
    args = argv[1:]
    sources = [value.split(":", 1)[0] for value in option_values(args, ("-v", "--volume"))]
    for mount in option_values(args, ("--mount",)):
        fields = dict(part.partition("=")[::2] for part in mount.split(","))
        if fields.get("type", "volume") == "bind":
            sources.append(fields.get("source") or fields.get("src") or "")
    for source in sources:
        if not source.startswith(("/", "~", "$", ".")):
            continue  # a named volume
        path = ctx.resolve(source)
        if path is None:
            continue
        if path in _SOCKETS:
            return f"mounting the container engine's socket ({path}) gives the container this machine"
        if ctx.sensitive_dir(path) or any(path == posixpath.join(ctx.home, s) for s in _HOME_SECRETS):
            return f"mounting {path} into a container"
        if path.startswith(("/etc", "/root", "/boot", "/proc", "/sys", "/dev")):
            return f"mounting {path} into a container"
    for device in option_values(args, ("--device",)):
        if re.match(r"/dev/(sd|hd|vd|xvd|nvme|mmcblk|md|dm-|loop|mem|kmem|port)", device):
            return f"handing the device {device.split(':', 1)[0]} to a container"
    return None


_INFINITE = frozenset({"/dev/zero", "/dev/urandom", "/dev/random"})
_BOUNDS = frozenset({"head", "dd", "timeout", "grep", "sed", "awk", "cut"})
_SIZE = re.compile(r"^(\d+(?:\.\d+)?)\s*([KMGTPE]?)(i?B?)?$", re.IGNORECASE)
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40, "P": 2**50, "E": 2**60}
_HUGE = 10 * 2**30


def _size(text: str) -> int | None:
    match = _SIZE.match(text.strip())
    if match is None:
        return None
    return int(float(match.group(1)) * _UNITS[match.group(2).upper()])


def _writes_file(cmd: SimpleCommand) -> str | None:
    for redirect in cmd.redirects:
        if (
            redirect.op in WRITE_OPS
            and redirect.target != "/dev/null"
            and not redirect.target.startswith("/dev/fd")
        ):
            if redirect.target.isdigit() or redirect.target in ("&1", "&2", "-"):
                continue
            return redirect.target
    if cmd.program == "tee":
        operands = split_args(cmd.argv[1:]).positionals
        if operands and operands[0] != "/dev/null":
            return operands[0]
    return None


def infinite_source(argv: Sequence[str]) -> str | None:
    """What makes ``argv`` print without end (``yes``, ``seq inf``, ``cat /dev/zero``), or ``None``."""
    if not argv:
        return None
    if argv[0] == "yes":
        return "yes"
    if argv[0] == "seq" and any(
        a.lower() in ("inf", "infinity") or (_size(a) or 0) >= 10**9 for a in argv[1:]
    ):
        return "seq without end"
    if argv[0] in ("cat", "pv", "tail", "cp", "openssl", "base64", "od", "xxd", "tr") and any(
        a in _INFINITE for a in argv[1:]
    ):
        return f"{argv[0]} {next(a for a in argv[1:] if a in _INFINITE)}"
    return None


def judge_fill_disk(cmd: SimpleCommand, argv: Sequence[str], ctx: JudgeContext) -> str | None:
    program, args = argv[0], argv[1:]
    if program == "dd":
        source = next((a[3:] for a in args if a.startswith("if=")), "")
        dest = next((a[3:] for a in args if a.startswith("of=")), None)
        counts = [_size(a[6:]) for a in args if a.startswith("count=")]
        block = next((_size(a[3:]) for a in args if a.startswith(("bs=", "obs="))), 512) or 512
        bounded = bool(counts) and all(c is not None and c * block < _HUGE for c in counts)
        stdin_infinite = source == "" and any(infinite_source(a) for a in cmd.stdin)
        if (
            (source in _INFINITE or stdin_infinite)
            and not bounded
            and (dest or _writes_file(cmd)) not in (None, "/dev/null")
        ):
            return f"dd from {source or 'an endless stream'} with no count= fills the disk"
        return None
    if program in ("fallocate", "truncate", "mkfile", "xfs_mkfile"):
        for value in option_values(args, ("-l", "--length", "-s", "--size")):
            if "$(" in value or "`" in value:  # `fallocate -l $(df --output=avail ...)`: the free space
                return f"{program} of a size computed at run time ({value[:40]!r}), as large as the disk"
        for value in [
            *option_values(args, ("-l", "--length", "-s", "--size")),
            *split_args(args).positionals[:1],
        ]:
            size = _size(value.lstrip("+"))
            if size is not None and size >= _HUGE * (10 if program == "truncate" else 1):
                return f"{program} of {value} fills the disk"
        return None
    if program == "head":
        for value in option_values(args, ("-c", "--bytes")):
            size = _size(value)
            if size is not None and size >= _HUGE and (any(a in _INFINITE for a in args) or cmd.stdin):
                return f"head -c {value} writes an enormous file"
        return None
    own = infinite_source(argv)
    if own is not None:
        target = _writes_file(cmd) or (
            split_args(args).positionals[-1]
            if program == "cp" and len(split_args(args).positionals) > 1
            else None
        )
        if target is not None:
            return f"{own} into {target} never ends (fills the disk)"
        return None
    sources = [found for found in map(infinite_source, cmd.stdin) if found]
    if not sources or any(a and a[0] in _BOUNDS for a in cmd.stdin) or program in _BOUNDS:
        return None
    target = _writes_file(cmd)
    if target is not None:
        return f"{sources[0]} piped into {target} never ends (fills the disk)"
    if "xargs" in cmd.wrappers or program in ("xargs", "parallel"):
        return f"{sources[0]} piped into {program} starts commands without end"
    return None


def judge_cpu_burn(cmd: SimpleCommand, argv: Sequence[str], ctx: JudgeContext) -> str | None:
    """``yes > /dev/null &``: a process that spins forever in the background."""
    endless = argv[0] == "yes" or any(arg in _INFINITE for arg in argv[1:])
    if endless and cmd.background and not cmd.in_pipeline and not _writes_file(cmd):
        return f"{argv[0]} in the background keeps a CPU busy forever"
    return None


_YES_WORDS = frozenset({"y", "yes", "Y", "YES", "Yes"})


def judge_answered_yes(cmd: SimpleCommand, argv: Sequence[str], ctx: JudgeContext) -> str | None:
    """A confirmation prompt answered by the script itself (``yes | terraform apply``)."""
    for feeder in cmd.stdin:
        if feeder and feeder[0] == "yes":
            return "the confirmation is answered by `yes`"
        if (
            feeder
            and feeder[0] in ("echo", "printf")
            and _YES_WORDS & {w.strip("'\"\\n") for w in feeder[1:]}
        ):
            return f"the confirmation is answered by `{' '.join(feeder)}`"
    for redirect in cmd.redirects:
        if redirect.op in ("<<<", "<<", "<<-") and redirect.target.strip() in _YES_WORDS:
            return "the confirmation is answered by a here-string"
    return None


def judge_unbounded_parallel(cmd: SimpleCommand, argv: Sequence[str], ctx: JudgeContext) -> str | None:
    """``xargs -P 0`` (or ``parallel -j 0``) fed without end starts processes without limit; ``-P 1000``
    starts them by the thousand."""
    args = list(argv[1:])
    limits = [args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-P", "--max-procs", "-j", "--jobs")]
    limits += [a[2:] for a in args if a.startswith(("-P", "-j")) and len(a) > 2]
    limits += [a.partition("=")[2] for a in args if a.startswith(("--max-procs=", "--jobs="))]
    numeric = [int(v) for v in limits if v.isdigit()]
    if any(n >= 500 for n in numeric):
        return f"{argv[0]} running {max(numeric)} processes at once"
    if "0" not in limits:
        return None
    endless = any(
        r.op == "<" and r.target in ("/dev/zero", "/dev/urandom", "/dev/random") for r in cmd.redirects
    )
    endless = endless or any(infinite_source(feeder) for feeder in cmd.stdin)
    if endless:
        return f"{argv[0]} with no limit on processes, fed without end"
    many = max((_count(feeder) for feeder in (*cmd.stdin, *cmd.sources)), default=0)
    many = max(many, sum(1 for arg in args if arg not in (":::", "::::")) if ":::" in args else 0)
    if many > _FEW_JOBS:
        return f"{argv[0]} with no limit on processes, given {many} jobs at once"
    return None


_FEW_JOBS = 256


def _count(argv: Sequence[str]) -> int:
    """How many lines ``seq`` (or ``jot``) prints, when its words say; 0 when unknown."""
    if not argv or argv[0] not in ("seq", "jot"):
        return 0
    numbers = [_size(a) for a in argv[1:] if not a.startswith("-") or a[1:].isdigit()]
    known = [n for n in numbers if n is not None]
    if not known:
        return 0
    if argv[0] == "jot":
        return known[0]
    first, last = (1, known[0]) if len(known) == 1 else (known[0], known[-1])
    step = known[1] if len(known) == 3 else 1
    return abs(last - first) // max(1, abs(step)) + 1
