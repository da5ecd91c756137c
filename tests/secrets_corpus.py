"""Secret shapes and ordinary look-alikes, shared by the redaction tests and ``bench/redaction.py``.

Every secret is built from pieces at import time (no scanner flags this file, and no real credential is
in it). ``SECRETS`` maps a name to ``(text, secret)``: ``text`` is how the secret appears in agent content,
``secret`` the part that must not survive redaction. ``LOOKALIKES`` must come out byte for byte.
"""

from __future__ import annotations

_A36 = "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"  # 36 mixed characters
_A40 = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"  # 40: the shape of an AWS secret access key
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
]
