"""Commands run in another environment, container or machine are judged like the commands they run."""

from __future__ import annotations

import pytest

from agent_fleet.policy import evaluate_command
from agent_fleet.policy.packs._nested import nested_commands

CWD = "/nonexistent-ws/project"


@pytest.mark.parametrize(
    ("argv", "inner"),
    [
        (["docker", "exec", "-it", "-u", "postgres", "db", "psql", "-c", "x"], [["psql", "-c", "x"]]),
        (["docker", "compose", "-f", "c.yml", "exec", "-T", "db", "psql"], [["psql"]]),
        (["kubectl", "exec", "-n", "a", "pod", "--", "redis-cli", "PING"], [["redis-cli", "PING"]]),
        (["uv", "run", "--with", "rich", "python", "x.py"], [["python", "x.py"]]),
        (["aws-vault", "exec", "prod", "--", "aws", "s3", "ls"], [["aws", "s3", "ls"]]),
        (["ssh", "-p", "22", "-i", "k", "host", "ls", "-la"], ["ls -la"]),
        (["fly", "ssh", "console", "-C", "rm -rf /data"], ["rm -rf /data"]),
        (["docker", "ps"], []),
        (["ssh", "host"], []),
    ],
)
def test_nested_commands(argv: list[str], inner: list[str | list[str]]) -> None:
    assert nested_commands(argv) == inner


@pytest.mark.parametrize(
    ("command", "rule"),
    [
        ("docker exec -it db psql -U postgres -c 'DROP DATABASE app'", "database/sql-destructive"),
        ("docker compose exec db psql -U postgres -c 'DROP TABLE users'", "database/sql-destructive"),
        ("docker-compose exec -T db mysql -e 'DROP DATABASE shop'", "database/sql-destructive"),
        ("kubectl exec -it postgres-0 -- psql -c 'TRUNCATE users'", "database/sql-destructive"),
        ("kubectl exec redis-0 -n cache -- redis-cli FLUSHALL", "database/redis-destructive"),
        ("docker exec db sh -c 'psql -c \"drop table x\"'", "database/sql-destructive"),
        ("ssh prod 'psql -c \"DROP TABLE users\"'", "database/sql-destructive"),
        ("uv run python manage.py flush --noinput", "database/django-flush"),
        ("poetry run alembic downgrade base", "database/migration-reset"),
        ("bundle exec rake db:drop", "database/framework-db-wipe"),
        ("doppler run -- terraform destroy -auto-approve", "infrastructure/terraform-destroy"),
        ("aws-vault exec prod -- aws s3 rm s3://b --recursive", "cloud/aws-s3-remove"),
        ("ssh host 'rm -rf ~'", "rm-root"),  # the built-in rules apply on the other side too
        ("ssh host 'git reset --hard'", "git-reset-hard"),
    ],
)
def test_nested_dangerous(command: str, rule: str) -> None:
    decision = evaluate_command(command, cwd=CWD)
    assert (decision.action, decision.rule) == ("decline", rule), decision.reason


@pytest.mark.parametrize(
    "command",
    [
        "docker exec -it db psql -U postgres -c 'SELECT 1'",
        "docker compose exec web python manage.py migrate",
        "kubectl exec -it api-0 -- sh",
        "ssh host 'ls -la'",
        "ssh deploy@prod 'sudo systemctl restart app'",
        "uv run pytest -x",
        "docker compose run --rm web pytest",
        "ssh user@host 'cd app && git pull && npm ci'",
        "heroku run python manage.py migrate",
        "doppler run -- npm start",
    ],
)
def test_nested_everyday(command: str) -> None:
    assert evaluate_command(command, cwd=CWD).action == "allow_for_session"
