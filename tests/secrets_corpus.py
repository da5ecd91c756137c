"""Secret shapes and ordinary look-alikes, shared by the redaction tests and ``bench/redaction.py``.

Every secret is built from pieces at import time (no scanner flags this file, and no real credential is
in it). ``SECRETS`` maps a name to ``(text, secret)``: ``text`` is how the secret appears in agent content,
``secret`` the part that must not survive redaction. ``LOOKALIKES`` must come out byte for byte.

The shapes and their contexts follow the rule sources' documented examples: gitleaks' rule generators
(``cmd/generate/config/rules/*.go``: their true positives, and their false positives among the
look-alikes), detect-secrets' plugins and the vendors' own documentation (the example tokens of Discord's,
Telegram's and Mailgun's docs, AWS' documented example keys, which are look-alikes: they are published).
"""

from __future__ import annotations

import random

_A36 = "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"  # 36 mixed characters
_A40 = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzQ3kP9aVvLw"  # 40: the shape of an AWS secret access key
_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_HEX = "0123456789abcdef"
_BASE64 = _ALNUM + "+/"
_BECH32 = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"


def _rand(n: int, alphabet: str = _ALNUM, *, seed: int) -> str:
    """``n`` characters of ``alphabet``, the same on every run (a token's shape, never a token)."""
    rng = random.Random(seed)
    return "".join(rng.choice(alphabet) for _ in range(n))


_AZURE = _rand(86, _BASE64, seed=1) + "=="
_TWILIO = "SK" + _rand(32, _HEX, seed=2)
_SENDGRID = "SG." + _rand(22, _ALNUM + "_-", seed=3) + "." + _rand(43, _ALNUM + "_-", seed=4)
_DOCKER = "dckr_" + "pat_" + _rand(27, _ALNUM + "_-", seed=5)
_VAULT = "hvs." + _rand(92, _ALNUM + "_-", seed=6)
_HEROKU = "HRKU-" + "AA" + _rand(58, _ALNUM + "_-", seed=7)
_DATADOG = _rand(40, "abcdefghijklmnopqrstuvwxyz0123456789", seed=8)
_SHOPIFY = "shpat_" + _rand(32, _HEX, seed=9)
_DISCORD = "MTk4NjIyNDgzNDcxOTI1MjQ4" + "." + "Cl2FMQ" + "." + "ZnCjm1XVW7vRze4b7Cq4se7kKWs"  # Discord's docs
_TELEGRAM = "110201543" + ":" + "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"  # Telegram's docs
_MAILGUN = "key-" + "3ax6xnjp29jd6fds4gc373sgvjxteol0"  # Mailgun's docs
_AGE = "AGE-SECRET-" + "KEY-1" + _rand(58, _BECH32, seed=10)
_PEM_LINES = "\n".join(_rand(64, _BASE64, seed=20 + i) for i in range(4))
_PEM_BODY = (
    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\nVJTUt9Us8cKjMzEfYyjiWA4R4/M2bS1GB4t7NXp98C3S"
)
_JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    + ".eyJzdWIiOiIxMjM0NTY3ODkwIn0"
    + ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)

SECRETS: dict[str, tuple[str, str]] = {
    "openai": ("export OPENAI='sk-proj-" + _A36 + "'", "sk-proj-" + _A36),
    "anthropic": ("key sk-ant-api03-" + _A36 + "-xyz", "sk-ant-api03-" + _A36),
    "github_ghp": ("token: ghp_" + _A36, "ghp_" + _A36),
    "github_gho": ("gho_" + _A36 + " is the oauth token", "gho_" + _A36),
    "github_ghs": ("GIT_ASKPASS=echo ghs_" + _A36, "ghs_" + _A36),
    "github_pat": ("github_pat_11ABCDEFG0" + _A36 + "_" + _A36[:22], "github_pat_11ABCDEFG0" + _A36),
    "gitlab": ("git clone https://oauth2@gitlab.com/x.git # glpat-" + _A36[:20], "glpat-" + _A36[:20]),
    "aws_key_id": ("aws_access_key_id = AKIA" + "IOSFODNN7EXAMPL2", "AKIA" + "IOSFODNN7EXAMPL2"),
    "aws_secret": ("aws_secret_access_key = " + _A40, _A40),
    "aws_secret_json": ('{"SecretAccessKey": "' + _A40 + '"}', _A40),
    "jwt": ("cookie session=" + _JWT + "; Path=/", _JWT),
    "slack": ("SLACK_HOOK xoxb-" + "123456789012-1234567890123-" + _A36[:24], "xoxb-123456789012"),
    "google": ("https://maps.googleapis.com/x?key=AIza" + "SyA" + _A36[:32], "AIzaSyA" + _A36[:32]),
    "stripe_sk": ("stripe.api_key = sk_" + "live_" + _A36[:24], "sk_live_" + _A36[:24]),
    "stripe_rk": ("rk_" + "live_" + _A36[:24] + " restricted", "rk_live_" + _A36[:24]),
    "huggingface": ("huggingface-cli login --token hf_" + _A36[:34], "hf_" + _A36[:34]),
    "npm": ("//registry.npmjs.org/:_authToken=npm_" + _A36, "npm_" + _A36),
    "pem": (
        "cat id_rsa\n-----BEGIN PRIVATE KEY-----\n" + _PEM_BODY + "\n-----END PRIVATE KEY-----\ndone",
        "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7",
    ),
    "pem_cut": ("-----BEGIN OPENSSH PRIVATE KEY-----\n" + _PEM_BODY, "VJTUt9Us8cKjMzEfYyjiWA4R4"),
    "x_api_key": ("curl -H 'x-api-key: " + "Zm9vYmFyMTIzNDU2Nzg5' https://api", "Zm9vYmFyMTIzNDU2Nzg5"),
    "basic_auth": ("Authorization: Basic " + "dXNlcjpodW50ZXIy", "dXNlcjpodW50ZXIy"),
    "bearer": ("curl -H 'Authorization: Bearer " + "abc.def-123456' url", "abc.def-123456"),
    "url_password": ("git remote add o https://deploy:" + "S3cr3tPw0rd@github.com/o/r.git", "S3cr3tPw0rd"),
    "postgres_url": ("DATABASE_URL=postgresql://app:" + "pgpass-9911@db:5432/app", "pgpass-9911"),
    "mysql_p": ("mysql -u root -p" + "Hunter2Pass mydb < dump.sql", "Hunter2Pass"),
    "password_flag": ("psql --password " + "Tr0ub4dor&3 -h db", "Tr0ub4dor&3"),
    "password_flag_eq": ("tool login --password=" + "correcthorse99", "correcthorse99"),
    "password_yaml": ("database:\n  password: " + "p4ssw0rd-yaml\n  user: app", "p4ssw0rd-yaml"),
    "password_code": ('connect(host="db", password="' + 'quoted-Secret1")', "quoted-Secret1"),
    "name_key": ("export SERVICE_API_KEY=" + "9f8e7d6c5b4a39281706", "9f8e7d6c5b4a39281706"),
    "name_token": ("DEPLOY_TOKEN=" + "tok-aa11bb22cc33 ./deploy.sh", "tok-aa11bb22cc33"),
    "quoted_api_key": ('api_key = "' + 'live-4f9a8b7c6d5e"', "live-4f9a8b7c6d5e"),
    # The same inside a string that escapes its quotes (a command line shown by codex, JSON in JSON).
    "escaped_json": ('echo "{\\"SecretAccessKey\\": \\"' + _A40 + '\\"}"', _A40),
    "escaped_password": ('run "password=\\"' + 'esc4ped-Secret\\""', "esc4ped-Secret"),
    # The shapes the hand-written list missed (issue 29), as their sources document them.
    "azure_storage": (
        "DefaultEndpointsProtocol=https;AccountName=acct1;AccountKey="
        + _AZURE
        + ";EndpointSuffix=core.windows.net",
        _AZURE,
    ),
    "twilio": ('client = Client("' + _TWILIO + '", api_secret)', _TWILIO),
    "sendgrid": ("sg = SendGridAPIClient('" + _SENDGRID + "')", _SENDGRID),
    "docker_hub": ("echo " + _DOCKER + " | docker login -u fleetbot --password-stdin", _DOCKER),
    "vault": ("vault login " + _VAULT, _VAULT),
    "heroku": ('const KEY = "' + _HEROKU + '"', _HEROKU),
    "datadog": ("datadog_access_token: " + _DATADOG, _DATADOG),
    "shopify": ("curl -H 'X-Shopify-Access-Token: " + _SHOPIFY + "' https://shop.example/admin", _SHOPIFY),
    "discord": ("client.run('" + _DISCORD + "')", _DISCORD),
    "telegram": ('bot = telebot.TeleBot("' + _TELEGRAM + '")', _TELEGRAM),
    "mailgun": ("curl -s --user 'api:" + _MAILGUN + "' https://api.mailgun.net/v3/x/messages", _MAILGUN),
    "age": ("# created: 2026-11-23\n" + _AGE, _AGE),
    # A token in a command line shown inside a quoted string: its quotes come escaped.
    "heroku_escaped": ('bash -lc "echo \\"' + _HEROKU + '\\" > key.txt"', _HEROKU),
    "vault_escaped": ('bash -lc "vault login \\"' + _VAULT + '\\""', _VAULT),
    # A private key whose BEGIN line was cut off (the start of a long output was dropped).
    "pem_body": ("…" + _PEM_LINES[20:] + "\n-----END RSA PRIVATE KEY-----\nok", _PEM_LINES[20:60]),
    # ... and the same in a diff (a task's final diff adds the key file, its head cut off).
    "pem_body_diff": (
        "@@ -0,0 +1,5 @@\n+…" + _PEM_LINES[20:].replace("\n", "\n+") + "\n+-----END RSA PRIVATE KEY-----",
        _PEM_LINES[70:120],
    ),
}

LOOKALIKES: list[str] = [
    "commit 3f786850e387550fdab836ed7e6dc881de23001b (HEAD -> main)",
    "Merge: 1a2b3c4 5d6e7f8",
    "request id 123e4567-e89b-12d3-a456-426614174000 done",
    "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "md5 d41d8cd98f00b204e9800998ecf8427e  empty.txt",
    'FIXTURE = "SGVsbG8sIFdvcmxkISBUaGlzIGlzIGEgdGVzdCBmaXh0dXJlIGZvciBiYXNlNjQ="',
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
    "def login(user: str, password: str) -> bool:",
    "    password = getpass.getpass()",
    "    if not token: raise ValueError('token required')",
    "token = tokens[0]",
    "PASSWORD_MIN_LENGTH = 12",
    "export API_KEY=$OPENAI_API_KEY",
    "GITHUB_TOKEN=${{ secrets.GITHUB_TOKEN }}",
    "primary_key = models.AutoField(primary_key=True)",
    "pip install scikit-learn sk-learn",
    "risk-assessment and task-manager and desk-lamp",
    "git clone git@github.com:openai/codex.git",
    "http://localhost:8080/api/v1/items?page=2",
    "ssh user@host.example.com -p 2222",
    "mysql -u root -p mydb",
    "docker login --password-stdin < file",
    "2026-11-23T08:00:43Z INFO worker-3 processed 1532 items in 2.3s",
    "Traceback (most recent call last):\n  File \"app.py\", line 3, in <module>\nKeyError: 'api_key'",
    "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----",
    "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUX\n-----END CERTIFICATE-----",
    "pytest -q tests/test_auth.py::test_bearer_header PASSED",
    "the Authorization header is checked in middleware.py",
    "AKIA is the prefix of an access key id",
    "ghp_ tokens are GitHub personal access tokens",
    "npm install left-pad@1.3.0 && npm test",
    "x = hf_model.generate(**inputs)",
    "const secretKey = process.env.SECRET_KEY;",
    # Documented examples and placeholders: published, or not a value at all.
    "aws_access_key_id = AKIA" + "IOSFODNN7EXAMPLE",
    "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY",
    'curl -H "Authorization: Bearer $TOKEN" https://api.example.com',
    "mysql -u root -p$MYSQL_ROOT_PASSWORD app",
    "psql --password ${PGPASSWORD} -h db",
    "git clone https://ci:${GITLAB_TOKEN}@gitlab.example.com/o/r.git",
    'password: "********"',
    "Use Bearer authentication; the Authorization header carries the token.",
    # gitleaks' documented false positives (its rule generators' FPs).
    "discord=000000000000000000",
    "s.xxxxxxxxxxxxxxxxxxxxxxxx",
    "  credentials: new AWS.SharedIniFileCredentials({ profile: '<YOUR_PROFILE>' })",
    "INFO 4 --- [           main] o.s.b.f.s.DefaultListableBeanFactory     : Overriding bean definition",
    "s.AcceptanceTimeoutSeconds ",
    "s.makeKubeConfigController = args",
    # Code that names keys and tokens without holding one.
    'api_version = "2024-10-01"',
    "key = os.environ['API_KEY']",
    "token = self.session.get_token()",
    "SKU-2049 ships 10:30:00 and order 1234567890:done",
]
