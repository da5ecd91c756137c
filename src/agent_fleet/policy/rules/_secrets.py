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

__all__ = [
    "HOME_CREDENTIALS",
    "KEY_FILES",
    "NOT_SECRET",
    "SECRET_PRINTERS",
    "SYSTEM_CREDENTIALS",
    "secret_goes_home",
]

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
    # Build tools, registries and CLIs that keep tokens in plain files.
    ".m2/settings*.xml",
    ".gradle/gradle.properties",
    ".ivy2/.credentials",
    ".sbt/*credentials*",
    ".config/github-copilot/*",
    ".config/glab-cli/*",
    ".config/composer/auth.json",
    ".composer/auth.json",
    ".nuget/NuGet/NuGet.Config",
    ".config/NuGet/NuGet.Config",
    ".config/configstore/*",
    ".config/netlify/*",
    ".local/share/com.vercel.cli/*",
    ".fly/config.yml",
    ".supabase/access-token",
    ".databrickscfg",
    ".snowsql/config",
    ".config/sops/age/*",
    ".config/containers/auth.json",
    ".config/hcloud/*",
    ".config/linode-cli",
    ".config/ngrok/*",
    ".ngrok2/*",
    ".wrangler/config/*",
    ".config/.wrangler/*",
    # Browser sessions: cookies are logins.
    ".mozilla/*/cookies.sqlite",
    ".config/google-chrome/*/Cookies",
    ".config/chromium/*/Login Data",
    ".config/chromium/*/Cookies",
    ".config/BraveSoftware/*/Login Data",
)
SYSTEM_CREDENTIALS: Final[tuple[str, ...]] = (
    "/etc/shadow*",
    "/etc/gshadow*",
    "/etc/sudoers*",
    "/etc/ssh/*_key",
    "/etc/ssl/private/*",
    "/proc/*/environ",
    "/proc/*/mem",
    "/proc/kcore",
    "/dev/mem",
    "/dev/kmem",
    "/dev/port",
    "/var/run/secrets/*",
    "/run/secrets/*",
    "/etc/kubernetes/*.conf",
    "/etc/kubernetes/pki/*",
    "/var/lib/kubelet/pki/*",
    "/etc/rancher/*",
    "/var/lib/jenkins/secrets/*",
    "/var/lib/jenkins/credentials.xml",
    "/etc/letsencrypt/live/*",
    "/etc/letsencrypt/archive/*",
    "/etc/wireguard/*",
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


#: Commands that print stored secrets: ``(program pattern, alternatives)``; each alternative is a tuple
#: of regular expressions that must each match some argument (``fullmatch``). Listing secrets' names,
#: describing them without values or checking who one is logged in as does not print a secret.
SECRET_PRINTERS: Final[tuple[tuple[str, tuple[tuple[str, ...], ...]], ...]] = (
    ("git", (("credential", "fill|get"), ("credential-.+", "get"))),
    ("git-credential-.+", (("get",),)),
    ("gh", (("auth", "token"),)),
    ("glab", (("auth", "status", "-t|--show-token"), ("config", "get", "token"))),
    ("kubectl|oc|k3s", (("config", "--raw"), ("get", "secrets?(/.*)?|secrets?\\..*", "-o.*|--output.*"))),
    ("gcloud", (("print-access-token|print-identity-token",), ("secrets", "versions", "access"))),
    ("az", (("get-access-token",), ("keyvault", "secret", "show|download"))),
    (
        "aws",
        (
            ("export-credentials",),
            ("configure", "get", ".*(secret|token|key_id).*"),
            ("sts", "get-session-token|assume-role.*|get-federation-token"),
            ("secretsmanager", "get-secret-value|batch-get-secret-value"),
            ("ssm", "get-parameters?(-by-path)?", "--with-decryption"),
            ("ecr", "get-authorization-token"),
        ),
    ),
    ("vault", (("token", "lookup"), ("print", "token"), ("kv", "get|export"), ("read",))),
    ("op", (("read",), ("item", "get", "--reveal"), ("item", "get", "--fields.*|--otp"), ("inject",))),
    ("doppler", (("secrets", "get|download"),)),
    ("infisical", (("secrets", "get"), ("export",))),
    ("sops", (("-d|--decrypt|decrypt",),)),
    ("chamber", (("read|export",),)),
    ("berglas", (("access",),)),
    ("ansible-vault", (("view",),)),
    ("heroku", (("config|config:get",),)),
    ("bw|lpass|gopass|pass", (("get|show",),)),
    ("docker-credential-.+", (("get",),)),
    ("secret-tool", (("lookup",),)),
    ("keyring", (("get",),)),
    ("heroku", (("auth:token",),)),
    ("doctl", (("auth", "token"),)),
    ("npm|pnpm|yarn", (("config", "get", ".*(_authToken|_auth|_password|npmAuthToken).*"),)),
    ("security", (("find-generic-password|find-internet-password|dump-keychain",),)),
)


#: Where a secret-named variable is meant to be sent: its name's prefix -> the service's hosts (a host
#: or a ``.suffix``). ``curl -H "Authorization: Bearer $OPENAI_API_KEY" https://api.openai.com/...`` is
#: how the key is used; the same header to any other host is how it is stolen.
_SECRET_HOMES: Final[tuple[tuple[str, tuple[str, ...]], ...]] = (
    ("GITHUB_", ("github.com", ".github.com", ".githubusercontent.com", "ghcr.io")),
    ("GH_", ("github.com", ".github.com", ".githubusercontent.com", "ghcr.io")),
    ("GITLAB_", ("gitlab.com", ".gitlab.com")),
    ("OPENAI_", ("api.openai.com",)),
    ("ANTHROPIC_", ("api.anthropic.com",)),
    ("HF_", ("huggingface.co", ".huggingface.co")),
    ("HUGGINGFACE", ("huggingface.co", ".huggingface.co")),
    ("NPM_", ("registry.npmjs.org",)),
    ("PYPI_", ("pypi.org", "upload.pypi.org", "test.pypi.org")),
    ("GEMINI_", ("generativelanguage.googleapis.com",)),
    ("GOOGLE_API", (".googleapis.com",)),
    ("MISTRAL_", ("api.mistral.ai",)),
    ("GROQ_", ("api.groq.com",)),
    ("COHERE_", ("api.cohere.ai", "api.cohere.com")),
    ("DEEPSEEK_", ("api.deepseek.com",)),
    ("OPENROUTER_", ("openrouter.ai",)),
    ("XAI_", ("api.x.ai",)),
    ("TOGETHER_", ("api.together.xyz",)),
    ("REPLICATE_", ("api.replicate.com",)),
    ("SLACK_", ("slack.com", ".slack.com")),
    ("STRIPE_", ("api.stripe.com",)),
    ("CLOUDFLARE_", ("api.cloudflare.com",)),
    ("CF_API", ("api.cloudflare.com",)),
    ("VERCEL_", ("api.vercel.com",)),
    ("NETLIFY_", ("api.netlify.com",)),
    ("SENTRY_", ("sentry.io", ".sentry.io")),
    ("LINEAR_", ("api.linear.app",)),
    ("NOTION_", ("api.notion.com",)),
    ("DIGITALOCEAN_", ("api.digitalocean.com",)),
    ("CIRCLE", ("circleci.com",)),
    ("BUILDKITE_", ("api.buildkite.com",)),
    ("DISCORD_", ("discord.com",)),
    ("TELEGRAM_", ("api.telegram.org",)),
    ("DATADOG_", (".datadoghq.com", ".datadoghq.eu")),
    ("DD_API", (".datadoghq.com", ".datadoghq.eu")),
    ("AWS_", (".amazonaws.com",)),
    ("JIRA_", (".atlassian.net",)),
    ("ATLASSIAN_", (".atlassian.net", "api.atlassian.com")),
    ("CONFLUENCE_", (".atlassian.net",)),
    ("BITBUCKET_", ("api.bitbucket.org", "bitbucket.org")),
    ("SNYK_", ("snyk.io", "api.snyk.io")),
    ("CODECOV_", ("codecov.io", "api.codecov.io")),
    ("SONAR_", ("sonarcloud.io",)),
    ("FIGMA_", ("api.figma.com",)),
    ("PAGERDUTY_", ("api.pagerduty.com",)),
    ("SUPABASE_", (".supabase.co",)),
    ("RENDER_", ("api.render.com",)),
    ("FLY_", ("api.fly.io", "api.machines.dev")),
    ("RAILWAY_", ("backboard.railway.app",)),
)
_LOOPBACK: Final[frozenset[str]] = frozenset(
    {"localhost", "127.0.0.1", "::1", "0.0.0.0", "host.docker.internal"}
)


def secret_goes_home(names: set[str], hosts: set[str]) -> bool:
    """Do the secret-named variables ``names`` go only to the services they belong to (or to this
    machine)? ``hosts`` must be every host the command talks to; none known means no."""
    if not hosts or not names:
        return False
    for host in hosts:
        if host in _LOOPBACK or host.endswith(".localhost") or host.startswith("127."):
            continue
        for name in names:
            homes = next((h for prefix, h in _SECRET_HOMES if name.upper().startswith(prefix)), ())
            if not any(host == home or (home.startswith(".") and host.endswith(home)) for home in homes):
                return False
    return True
