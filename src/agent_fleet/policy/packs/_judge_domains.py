"""Judges for smaller domains: deployments to production started through a forge, the workspace
uploaded to a bucket nobody vetted, and code or data sent by mail.

* ``production-dispatch``: ``gh workflow run deploy.yml -f environment=production``, ``gh workflow run
  X --field target=prod``, ``gh api -X POST .../actions/workflows/W/dispatches -f inputs[env]=production``,
  ``gh api .../dispatches -f event_type=deploy-prod``: a workflow started against production (an input,
  the workflow's name or the event naming prod, production or live).
* ``bucket-upload``: the workspace (``.``, ``$PWD``, the working directory or more) copied, synced or
  moved into a bucket (``aws s3 sync . s3://b``,
  ``aws s3 cp --recursive``, ``gsutil cp/rsync``, ``gcloud storage cp/rsync``, ``rclone copy/sync``,
  ``az storage blob upload(-batch)``, ``azcopy``, ``s3cmd put/sync``, ``mc cp/mirror``) whose bucket is not
  on the allow-list (``allowed_hosts`` names it as ``BUCKET`` or ``BUCKET.s3.amazonaws.com``).
  Downloads (a bucket as the source) are fine.
* ``mail-out``: ``git send-email`` (patches of the repository mailed away), and mail programs
  (``mail``, ``mailx``, ``sendmail``, ``mutt``, ``msmtp``, ``swaks`` ...) sending a file, a pipe or an
  attachment to an address whose domain is not allowed. A message typed on the command line
  (``echo done | mail -s done me@corp``) is just a message.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence

from agent_fleet.policy.bash._commands import SimpleCommand
from agent_fleet.policy.packs._argv import JudgeContext, option_values, split_args

__all__ = ["judge_bucket_upload", "judge_mail_out", "judge_production_dispatch"]

_PRODUCTION = re.compile(r"(?i)(?:^|[=\-_./:\[\]\s])(?:prod|production|live|prd)(?:$|[\-_./:\]\s])")
_WORKFLOW_VALUES = ("-f", "--field", "-F", "--raw-field", "--json", "-r", "--ref", "-R", "--repo")
_BUCKET = re.compile(r"^(?:s3|gs|s3a|gcs|az|abfss?|wasbs?|r2|b2|oss|cos|minio)://([^/]+)", re.IGNORECASE)
_AZURE_BLOB = re.compile(r"^https://([a-z0-9]+)\.(?:blob|dfs)\.core\.windows\.net", re.IGNORECASE)
_UPLOADERS = {
    "aws": ("s3", ("cp", "sync", "mv")),
    "gsutil": ("", ("cp", "rsync", "mv")),
    "gcloud": ("storage", ("cp", "rsync", "mv")),
    "s3cmd": ("", ("put", "sync", "mv", "cp")),
    "azcopy": ("", ("copy", "cp", "sync")),
    "rclone": ("", ("copy", "sync", "move", "copyto", "moveto")),
    "mc": ("", ("cp", "mirror", "mv")),
}
_MAILERS = frozenset(
    {"mail", "mailx", "s-nail", "sendmail", "mutt", "neomutt", "msmtp", "ssmtp", "swaks", "mpack", "biabam"}
)
_ADDRESS = re.compile(r"[\w.+-]+@([A-Za-z0-9.-]+\.[A-Za-z]{2,})")
_LITERAL_FEEDERS = frozenset({"echo", "printf"})


def judge_production_dispatch(cmd: SimpleCommand, argv: Sequence[str], ctx: JudgeContext) -> str | None:
    """A workflow started against production through the forge's CLI or API."""
    if argv[0] not in ("gh", "glab"):
        return None
    args = argv[1:]
    parsed = split_args(args, (*_WORKFLOW_VALUES, "-X", "--method", "-H", "--header", "-q", "--jq"))
    words = list(parsed.positionals)
    inputs = option_values(args, ("-f", "--field", "-F", "--raw-field", "--variables", "--var"))
    if words[:2] in (["workflow", "run"], ["ci", "run"], ["run", "dispatch"], ["workflow", "dispatch"]):
        named = [*words[2:3], *inputs]
        hit = next((w for w in named if _PRODUCTION.search(w)), None)
        return f"starts the workflow against production ({hit!r})" if hit is not None else None
    if words[:1] == ["api"] and any(re.search(r"/dispatches/?$", w) for w in words[1:]):
        hit = next((w for w in [*words[1:], *inputs] if _PRODUCTION.search(w)), None)
        return f"dispatches a workflow against production ({hit!r})" if hit is not None else None
    return None


def _bucket(word: str) -> str | None:
    match = _BUCKET.match(word) or _AZURE_BLOB.match(word)
    return match.group(1).lower() if match is not None else None


def _remote(word: str) -> bool:
    """A bucket URL or an rclone/mc remote (``name:path``), not a local path."""
    return _bucket(word) is not None or bool(re.match(r"^[A-Za-z][\w-]*:(?!//)", word))


def judge_bucket_upload(cmd: SimpleCommand, argv: Sequence[str], ctx: JudgeContext) -> str | None:
    """Local files put into a bucket that is not on the allow-list."""
    program = argv[0]
    if program == "az":
        words = list(split_args(argv[1:]).positionals)
        if words[:3] in (["storage", "blob", "upload"], ["storage", "blob", "upload-batch"]):
            account = option_values(argv[1:], ("--account-name",))
            name = account[0] if account else "an Azure storage account"
            if not account or not _trusted_bucket(account[0].lower(), ctx):
                return f"az storage blob upload sends local files to {name}"
        return None
    if program not in _UPLOADERS:
        return None
    prefix, verbs = _UPLOADERS[program]
    words = list(
        split_args(argv[1:], ("--profile", "--region", "--exclude", "--include", "--acl")).positionals
    )
    if prefix:
        if words[:1] != [prefix]:
            return None
        words = words[1:]
    if not words or words[0] not in verbs:
        return None
    operands = [w for w in words[1:] if w]
    if len(operands) < 2:
        return None
    sources, dest = operands[:-1], operands[-1]
    if not _remote(dest) or all(_remote(s) for s in sources):
        return None  # a download, or a copy between buckets
    whole = next((s for s in sources if _whole_workspace(s, ctx)), None)
    if whole is None:
        return (
            None  # a build's output (`aws s3 sync ./dist s3://site`): publishing, as the forge pack sees it
        )
    bucket = _bucket(dest) or dest.split(":", 1)[0]
    if _trusted_bucket(bucket, ctx):
        return None
    return f"{program} {words[0]} uploads {whole!r} to {dest!r}, a bucket not on the allow-list"


def _whole_workspace(word: str, ctx: JudgeContext) -> bool:
    """``.``, ``./``, ``*``, ``$PWD``, the working directory or one of its ancestors, home, ``/``."""
    if word.rstrip("/") in ("", ".", "*", "./*", "$PWD", "${PWD}", "~", "$HOME", "..", "../*"):
        return True
    path = ctx.resolve(word)
    if path is None:
        return False
    base = ctx.cwd or ""
    return ctx.sensitive_dir(path) or (
        bool(base) and (base == path or base.startswith(path.rstrip("/") + "/"))
    )


def _trusted_bucket(bucket: str, ctx: JudgeContext) -> bool:
    """A bucket the user named in ``allowed_hosts`` (by itself or as its storage host name); a bucket
    name is not a host, so loopback rules do not apply to it."""
    names = (bucket, f"{bucket}.s3.amazonaws.com", f"{bucket}.storage.googleapis.com")
    return any(fnmatch.fnmatchcase(name, pattern.lower()) for name in names for pattern in ctx.hosts.user)


def judge_mail_out(cmd: SimpleCommand, argv: Sequence[str], ctx: JudgeContext) -> str | None:
    """Patches or files mailed to an address whose domain is not on the allow-list."""
    program, args = argv[0], argv[1:]
    if program == "git":
        words = list(split_args(args).positionals)
        if words[:1] == ["send-email"] and "--dry-run" not in args:
            return "git send-email mails the repository's patches away"
        return None
    if program not in _MAILERS:
        return None
    domains = [m.group(1).lower() for a in args for m in _ADDRESS.finditer(a)]
    if domains and all(ctx.hosts.trusted(d) for d in domains):
        return None
    attached = option_values(args, ("-a", "-A", "--attach", "--attach-file", "-attach"))
    fed_file = any(r.op == "<" for r in cmd.redirects)
    piped = any(feeder and feeder[0] not in _LITERAL_FEEDERS for feeder in cmd.stdin)
    if attached or fed_file or piped:
        what = "an attachment" if attached else "a file" if fed_file else "the output of " + cmd.stdin[-1][0]
        return f"{program} mails {what} to {', '.join(domains) or 'an address nobody checked'}"
    return None
