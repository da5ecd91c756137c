"""Credential files: the one list the policy judges them by, for commands (``_files``) and for file
reads (``_requests``).

- ``HOME_CREDENTIALS``: paths under a home directory (``fnmatch``; ``*`` spans ``/``), e.g. ``.ssh/*``;
- ``SYSTEM_CREDENTIALS``: absolute paths, e.g. ``/etc/shadow*``;
- ``KEY_FILES``: key and credential files by name, wherever they are (``*.pem``, ``.env``, ``id_rsa``):
  a file tool reading one is declined even inside the workspace; for commands, ``.env`` files count
  only outside the workspace (the project's own settings are its business);
- ``NOT_SECRET``: public halves, host lists and examples, by name (``*.pub``, ``known_hosts``,
  ``.env.example``).
"""

from __future__ import annotations

from typing import Final

__all__ = ["HOME_CREDENTIALS", "KEY_FILES", "NOT_SECRET", "SYSTEM_CREDENTIALS"]

HOME_CREDENTIALS: Final[tuple[str, ...]] = (
    ".ssh/*",
    ".aws/*",
    ".netrc",
    "_netrc",
    ".git-credentials",
    ".config/git/credentials",
    ".config/gh/*",
    ".config/hub",
    ".docker/config.json",
    ".kube/*",
    ".config/gcloud/*",
    ".azure/*",
    ".terraform.d/credentials.tfrc.json",
    ".terraformrc",
    ".pypirc",
    ".npmrc",
    ".yarnrc*",
    ".gnupg/*",
    ".password-store/*",
    ".vault-token",
    ".cargo/credentials*",
    ".gem/credentials",
    ".local/share/keyrings/*",
    ".codex/auth.json",
    ".claude/.credentials.json",
    ".claude.json",
    ".config/anthropic/*",
    ".config/openai/*",
    ".boto",
    ".s3cfg",
    ".pgpass",
    ".my.cnf",
    ".config/rclone/*",
    ".oci/*",
    ".config/doctl/*",
    ".config/op/*",
    ".mozilla/*/logins.json",
    ".mozilla/*/key4.db",
    ".config/google-chrome/*/Login Data",
    ".bash_history",
    ".zsh_history",
    ".histfile",
    ".python_history",
    ".psql_history",
    ".mysql_history",
    "Library/Keychains/*",
    "secrets/*",
)
SYSTEM_CREDENTIALS: Final[tuple[str, ...]] = (
    "/etc/shadow*",
    "/etc/gshadow*",
    "/etc/sudoers*",
    "/etc/ssh/*_key",
    "/etc/ssl/private/*",
    "/proc/*/environ",
    "/proc/*/mem",
    "/var/run/secrets/*",
    "/run/secrets/*",
    "/etc/kubernetes/*.conf",
    "/etc/rancher/*",
)
KEY_FILES: Final[tuple[str, ...]] = (
    "id_rsa",
    "id_dsa",
    "id_ecdsa",
    "id_ed25519",
    "id_ecdsa_sk",
    "id_ed25519_sk",
    ".netrc",
    "_netrc",
    ".git-credentials",
    ".pgpass",
    ".pypirc",
    ".npmrc",
    ".dockercfg",
    ".env",
    ".env.*",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.keystore",
    "*.jks",
    "credentials.json",
    "service-account*.json",
    ".credentials.json",
)
NOT_SECRET: Final[tuple[str, ...]] = (
    "*.pub",
    "known_hosts",
    "known_hosts.old",
    ".env.example",
    ".env.sample",
    ".env.template",
)
