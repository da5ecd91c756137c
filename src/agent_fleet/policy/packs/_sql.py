"""Database clients: find the statements a client would run, and judge them.

SQL comes from the client's options (``psql -c``, ``mysql -e``, ``sqlite3 DB "SQL"``, ``--file``), from
here-documents, here-strings, ``< file.sql`` and ``echo ... |``; it is judged on a real parse
(``sqlglot``, imported only when a database client is seen). Destructive: ``DROP``, ``TRUNCATE``,
``DELETE``/``UPDATE`` without a ``WHERE`` (or with one that is always true), ``ALTER ... DROP``,
``COPY ... PROGRAM``. SQL that does not parse is read token by token; text that cannot even be tokenised
is declined when it names ``DROP``/``TRUNCATE``/``DELETE``/``UPDATE`` at all (fail closed).
MongoDB shell code and Redis commands are not SQL: their destructive calls are few and named
(``dropDatabase()``, ``deleteMany({})``, ``FLUSHALL``), so they are matched by name.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agent_fleet.policy.bash._shell import SimpleCommand
from agent_fleet.policy.packs._argv import (
    JudgeContext,
    option_values,
    read_small_file,
    split_args,
    stdin_texts,
)

__all__ = [
    "judge_cypher",
    "judge_http_wipe",
    "judge_mongo",
    "judge_private_db",
    "judge_redis",
    "judge_sql",
    "sql_danger",
]

# sqlglot warns (on stderr, through logging) each time it falls back to an opaque statement; we judge
# those ourselves, so the warning is noise in the agent's output.
logging.getLogger("sqlglot").setLevel(logging.ERROR)


@dataclass(frozen=True, slots=True)
class _Client:
    dialect: str | None
    sql_options: tuple[str, ...] = ()
    file_options: tuple[str, ...] = ()
    value_options: tuple[str, ...] = ()
    positional_sql: int | None = None  # index of the first positional holding SQL (sqlite3 DB SQL...)
    after: str | None = None  # positional SQL only after this word (bq query SQL, cockroach sql)


_PG_VALUES = ("-d", "--dbname", "-h", "--host", "-p", "--port", "-U", "--username", "-v", "--set", "-P")
_MY_VALUES = ("-D", "--database", "-h", "--host", "-P", "--port", "-u", "--user", "-S", "--socket")
CLIENTS: dict[str, _Client] = {
    "psql": _Client("postgres", ("-c", "--command"), ("-f", "--file"), (*_PG_VALUES, "-o", "-L")),
    "pgcli": _Client("postgres", ("-c", "--command"), (), _PG_VALUES),
    "mysql": _Client("mysql", ("-e", "--execute"), (), _MY_VALUES),
    "mariadb": _Client("mysql", ("-e", "--execute"), (), _MY_VALUES),
    "mycli": _Client("mysql", ("-e", "--execute"), (), _MY_VALUES),
    "sqlite3": _Client("sqlite", ("-cmd",), (), ("-cmd", "-separator", "-nullvalue"), positional_sql=1),
    "sqlite": _Client("sqlite", ("-cmd",), (), ("-cmd",), positional_sql=1),
    "litecli": _Client("sqlite", ("-e", "--execute"), (), ()),
    "duckdb": _Client("duckdb", ("-c", "-cmd", "-s"), (), ("-c", "-cmd", "-s"), positional_sql=1),
    "clickhouse-client": _Client("clickhouse", ("-q", "--query"), ("--queries-file",), ("-h", "--host")),
    "clickhouse": _Client("clickhouse", ("-q", "--query"), ("--queries-file",), ("-h", "--host")),
    "cqlsh": _Client(None, ("-e", "--execute"), ("-f", "--file"), ("-u", "-p", "-k")),
    "sqlcmd": _Client("tsql", ("-Q", "-q"), ("-i",), ("-S", "-U", "-P", "-d")),
    "usql": _Client(None, ("-c", "--command"), ("-f", "--file"), ()),
    "snowsql": _Client("snowflake", ("-q", "--query"), ("-f", "--filename"), ("-a", "-u", "-d", "-s")),
    "beeline": _Client("hive", ("-e",), ("-f",), ("-u", "-n", "-p")),
    "hive": _Client("hive", ("-e",), ("-f",), ()),
    "impala-shell": _Client("hive", ("-q", "--query"), ("-f", "--query_file"), ("-i",)),
    "trino": _Client("trino", ("--execute",), ("-f", "--file"), ("--server", "--catalog", "--schema")),
    "presto": _Client("presto", ("--execute",), ("-f", "--file"), ("--server", "--catalog", "--schema")),
    "spark-sql": _Client("spark", ("-e",), ("-f",), ()),
    "vsql": _Client("postgres", ("-c", "--command"), ("-f", "--file"), _PG_VALUES),
    "cockroach": _Client("postgres", ("-e", "--execute"), ("-f", "--file"), ("--url", "--host", "-d")),
    "bq": _Client("bigquery", (), (), ("--project_id", "--location"), positional_sql=0, after="query"),
    "turso": _Client("sqlite", (), (), (), positional_sql=0, after="shell"),
    "wrangler": _Client("sqlite", ("--command",), ("--file",), ("--env",)),
    "supabase": _Client("postgres", ("--command",), ("--file", "-f"), ()),
    "sqlplus": _Client("oracle", (), (), ()),
    "isql": _Client(None, (), (), ()),
    "mssql-cli": _Client("tsql", ("-Q", "--query"), ("-i", "--input-file"), ("-S", "-U", "-d")),
}
_GENERIC = _Client(
    None,
    ("-c", "--command", "-e", "--execute", "-q", "--query", "--sql"),
    ("-f", "--file"),
    (),
    positional_sql=0,
)
#: Options of other programs that carry a SQL statement (cloud data APIs).
SQL_VALUE_OPTIONS: dict[str, tuple[str, ...]] = {
    "aws": ("--sql",),
    "gcloud": ("--sql",),
    "az": ("--query-text",),
}

_META_LINE = re.compile(r"^\s*[\\.]")  # psql \d, sqlite .tables
_SHELL_META = re.compile(r"^\s*(\\!|\.shell\b|\.system\b|\\o\s*\||\.once\s*\||\.output\s*\|)", re.MULTILINE)
_INCLUDE = re.compile(r"^\s*(?:\\i|\\ir|\\include|\.read|source)\s+(\S+)", re.MULTILINE | re.IGNORECASE)
_MAX_PARSED = 20_000  # characters: a full parse of this takes ~0.1 s
_MAX_TOKENISED = 200_000
_DESTRUCTIVE_NAME = re.compile(r"drop|truncate|wipe|reset|purge|destroy|delete|teardown|nuke|clean", re.I)
_DYNAMIC_HEADS = frozenset({"DO", "EXECUTE", "EXEC", "PREPARE", "CALL"})
_CRUDE = re.compile(r"\b(drop|truncate|delete|update)\b", re.IGNORECASE)


def _sources(cmd: SimpleCommand, argv: Sequence[str], ctx: JudgeContext, client: _Client) -> list[str]:
    args = argv[1:]
    texts = option_values(args, client.sql_options)
    for name in client.file_options:
        for path in option_values(args, (name,)):
            content = read_small_file(path, ctx)
            if content is not None:
                texts.append(content)
            elif _DESTRUCTIVE_NAME.search(path.rsplit("/", 1)[-1]):
                texts.append(f"DROP /* unreadable file {path} */ x")
    if client.positional_sql is not None:
        positionals = split_args(args, (*client.value_options, *client.sql_options, *client.file_options))
        words = list(positionals.positionals)
        if client.after is not None:
            words = words[words.index(client.after) + 1 :] if client.after in words else []
        texts.extend(words[client.positional_sql :])
    texts.extend(stdin_texts(cmd, ctx))
    for word in _stdin_files(cmd):
        if read_small_file(word, ctx) is None and _DESTRUCTIVE_NAME.search(word.rsplit("/", 1)[-1]):
            texts.append(f"DROP /* unreadable file {word} */ x")
    return texts


def _stdin_files(cmd: SimpleCommand) -> list[str]:
    files = [r.target for r in cmd.redirects if r.op == "<"]
    for argv in cmd.stdin:
        if argv and argv[0] in ("cat", "zcat", "gunzip", "bzcat", "xzcat"):
            files.extend(word for word in argv[1:] if not word.startswith("-"))
    return files


def _tautology(where: Any) -> bool:
    from sqlglot import exp

    cond = where.this if isinstance(where, exp.Where) else where
    while isinstance(cond, exp.Paren):
        cond = cond.this
    if isinstance(cond, exp.Boolean):
        return bool(cond.this)
    if isinstance(cond, exp.Literal) and not cond.is_string:
        return cond.this not in ("0", "0.0")
    if isinstance(cond, exp.EQ | exp.Is) and cond.left == cond.right:
        return True
    if isinstance(cond, exp.Or):
        return _tautology(cond.left) or _tautology(cond.right)
    return False


def _statement_danger(stmt: Any, dialect: str | None) -> str | None:
    from sqlglot import exp

    for node in stmt.walk():
        if isinstance(node, exp.Drop):
            return f"DROP {node.args.get('kind') or ''}".strip()
        if isinstance(node, exp.TruncateTable):
            return "TRUNCATE"
        if isinstance(node, exp.Delete | exp.Update):
            verb = "DELETE" if isinstance(node, exp.Delete) else "UPDATE"
            where = node.args.get("where")
            if where is None:
                return f"{verb} without WHERE"
            if _tautology(where):
                return f"{verb} with an always-true WHERE"
        actions = node.args.get("actions") or () if isinstance(node, exp.Alter) else ()
        if any(
            isinstance(action, exp.Drop) or type(action).__name__.startswith("Drop") for action in actions
        ):
            return "ALTER ... DROP"
        if isinstance(node, exp.Command):
            found = _token_danger(node.sql(dialect=dialect), dialect)
            if found is not None:
                return found
        if isinstance(node, exp.Copy) and "PROGRAM" in node.sql().upper():
            return "COPY ... PROGRAM (runs a shell command on the server)"
    return None


def _unquote(text: str) -> str:
    dollar = re.fullmatch(r"(\$[A-Za-z_]*\$)(.*)\1", text, re.DOTALL)
    if dollar:
        return dollar.group(2)
    if len(text) >= 2 and text[0] == text[-1] == "'":
        return text[1:-1].replace("''", "'")
    return text


def _token_danger(sql: str, dialect: str | None = None, depth: int = 0) -> str | None:
    """Judge SQL the parser rejected, statement by statement, on sqlglot's tokens."""
    from sqlglot import TokenType
    from sqlglot.dialects.dialect import Dialect

    try:
        tokens = Dialect.get_or_raise(dialect).tokenize(sql)
    except Exception:  # the tokenizer raises several error types; any failure means "cannot read"
        crude = _CRUDE.search(sql)
        return f"unreadable SQL naming {crude.group(1).upper()}" if crude else None
    statements: list[list[Any]] = [[]]
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON:
            statements.append([])
        else:
            statements[-1].append(token)
    for statement in statements:
        if not statement:
            continue
        words = [token.text.upper() for token in statement if token.token_type != TokenType.STRING]
        head = str(words[0]) if words else ""
        if _DYNAMIC_HEADS & set(words) and depth < 3:  # DO $$ ... EXECUTE 'DROP ...' $$: judge the strings
            for token in statement:
                if token.token_type in (TokenType.STRING, TokenType.HEREDOC_STRING, TokenType.RAW_STRING):
                    inner = _token_danger(_unquote(token.text), dialect, depth + 1)
                    if inner is not None:
                        return inner
        if head in ("DROP", "TRUNCATE"):
            return head
        if head in ("DELETE", "UPDATE") and "WHERE" not in words:
            return f"{head} without WHERE"
        if head == "ALTER" and "DROP" in words:
            return "ALTER ... DROP"
        if head == "COPY" and "PROGRAM" in words:
            return "COPY ... PROGRAM (runs a shell command on the server)"
    return None


def sql_danger(sql: str, dialect: str | None = None) -> str | None:
    """What makes ``sql`` destructive, or ``None``. Client meta-commands (``\\d``, ``.tables``) are
    skipped; shell escapes (``\\!``, ``.shell``) are destructive by default."""
    escape = _SHELL_META.search(sql)
    if escape is not None:
        return f"a shell escape ({escape.group(1).strip()}) inside the client"
    body = "\n".join(line for line in sql.splitlines() if not _META_LINE.match(line))
    if not body.strip():
        return None
    if len(body) > _MAX_TOKENISED:  # a dump: too slow even to tokenise, judged by its words
        crude = _CRUDE.search(body)
        return f"a large SQL text naming {crude.group(1).upper()}" if crude else None
    if len(body) > _MAX_PARSED:  # a long script: statement by statement on tokens (a full parse is slow)
        return _token_danger(body, dialect)
    import sqlglot
    from sqlglot.errors import SqlglotError

    try:
        statements = sqlglot.parse(body, read=dialect)
    except SqlglotError:
        return _token_danger(body, dialect)
    except Exception:  # a parser bug on odd input: judge the tokens instead
        return _token_danger(body, dialect)
    for stmt in statements:
        if stmt is None:
            continue
        found = _statement_danger(stmt, dialect)
        if found is not None:
            return found
    return None


def judge_sql(cmd: SimpleCommand, argv: Sequence[str], ctx: JudgeContext) -> str | None:
    program = argv[0]
    client = CLIENTS.get(program)
    if client is None and program not in SQL_VALUE_OPTIONS:
        client = _GENERIC  # a client named in a user's pack: options, files, operands, stdin
    if client is None:
        names = SQL_VALUE_OPTIONS.get(program, ())
        texts = option_values(argv[1:], names, attached=False)
        dialect = None
    else:
        texts = _sources(cmd, argv, ctx, client)
        dialect = client.dialect
    for text in texts:
        for included in _INCLUDE.findall(text):
            content = read_small_file(included, ctx)
            if content is not None:
                texts.append(content)
            elif _DESTRUCTIVE_NAME.search(included.rsplit("/", 1)[-1]):
                texts.append(f"DROP /* unreadable file {included} */ x")
        if len(texts) > 64:
            break
    for text in texts:
        found = sql_danger(text, dialect)
        if found is not None:
            return found
    return None


_MONGO = re.compile(
    r"\.\s*(dropDatabase|dropAllUsers|dropAllRoles|dropUser|dropRole|dropIndexes)\s*\("
    r"|\.\s*drop\s*\(\s*\)"
    r"|\.\s*(deleteMany|remove|updateMany|replaceOne|deleteOne|bulkWrite)\s*\(\s*(\{\s*\}\s*)?[,)]"
    r"|\b(dropDatabase|shutdown|shutdownServer|renameCollection)\b\s*['\"]?\s*:"
    r"|\.\s*shutdownServer\s*\(",
)


def judge_mongo(cmd: SimpleCommand, argv: Sequence[str], ctx: JudgeContext) -> str | None:
    args = argv[1:]
    texts = option_values(args, ("--eval",), attached=False)
    parsed = split_args(
        args, ("--eval", "--host", "--port", "-u", "--username", "-p", "--password", "--file")
    )
    for word in (*parsed.positionals, *option_values(args, ("--file", "-f"), attached=False)):
        if word.endswith(".js"):
            content = read_small_file(word, ctx)
            if content is not None:
                texts.append(content)
            elif _DESTRUCTIVE_NAME.search(word.rsplit("/", 1)[-1]):
                return f"a script named like a wipe ({word}) that cannot be read"
    texts.extend(stdin_texts(cmd, ctx))
    for text in texts:
        found = _MONGO.search(text)
        if found is not None:
            return f"MongoDB shell code {found.group(0).strip()!r}"
    return None


_REDIS_DANGER = frozenset(
    {"FLUSHALL", "FLUSHDB", "SHUTDOWN", "SWAPDB", "REPLICAOF", "SLAVEOF", "MIGRATE", "RESTORE"}
    | {"BGREWRITEAOF", "FAILOVER"}
)
_REDIS_SUB = {
    "CONFIG": {"SET", "RESETSTAT", "REWRITE"},
    "DEBUG": None,
    "SCRIPT": {"FLUSH"},
    "FUNCTION": {"FLUSH", "DELETE", "RESTORE"},
    "CLUSTER": {"RESET", "FLUSHSLOTS", "FAILOVER", "FORGET"},
    "MODULE": {"LOAD", "LOADEX"},
    "ACL": {"SETUSER", "DELUSER", "LOAD"},
    "CLIENT": {"KILL"},
}
_REDIS_VALUES = (
    *("-h", "-p", "-s", "-a", "-u", "-n", "-r", "-i", "-d", "-D", "-e", "--user", "--pass", "--askpass"),
    *("--pattern", "--count", "--cacert", "--cert", "--key", "--tls-ciphers", "--sni", "--rdb"),
    *("--functions-rdb", "--eval", "--memkeys-samples", "--quoted-pattern"),
)


def _redis_words(words: Sequence[str], mass: bool) -> str | None:
    if not words:
        return None
    head = words[0].upper()
    if head in _REDIS_DANGER:
        return f"Redis {head}"
    if head in _REDIS_SUB:
        subs = _REDIS_SUB[head]
        sub = words[1].upper() if len(words) > 1 else ""
        if subs is None or sub in subs:
            return f"Redis {head} {sub}".strip()
    if head in ("DEL", "UNLINK", "EXPIRE") and (mass or any("*" in word for word in words[1:])):
        return f"Redis {head} of keys chosen in bulk"
    return None


def judge_redis(cmd: SimpleCommand, argv: Sequence[str], ctx: JudgeContext) -> str | None:
    parsed = split_args(argv[1:], _REDIS_VALUES)
    mass = "xargs" in cmd.wrappers or any("$(" in word or "`" in word for word in parsed.positionals)
    found = _redis_words(parsed.positionals, mass)
    if found is not None:
        return found
    for text in stdin_texts(cmd, ctx):
        for line in text.splitlines():
            found = _redis_words(line.split(), mass=False)
            if found is not None:
                return found
    return None


_CYPHER = re.compile(
    r"\bMATCH\s*\(\s*\w*\s*(:\s*\w+\s*)?\)\s*(DETACH\s+)?DELETE\b|\bDROP\s+(DATABASE|INDEX|CONSTRAINT|GRAPH)\b"
    r"|\bdb\._drop\s*\(|\btruncate\s*\(|\bg\.V\(\)\s*\.drop\(|CALL\s+apoc\.periodic\.iterate.*DELETE",
    re.IGNORECASE | re.DOTALL,
)


def judge_cypher(cmd: SimpleCommand, argv: Sequence[str], ctx: JudgeContext) -> str | None:
    args = argv[1:]
    texts = [
        *split_args(args, ("-u", "-p", "-a", "-d", "--database", "--format", "-f", "--file")).positionals
    ]
    texts += option_values(args, ("--javascript.execute-string", "-e", "--eval"))
    for path in option_values(args, ("-f", "--file")):
        content = read_small_file(path, ctx)
        texts.append(content if content is not None else "")
    texts.extend(stdin_texts(cmd, ctx))
    for text in texts:
        found = _CYPHER.search(text)
        if found is not None:
            return f"{found.group(0)[:60]!r} deletes the graph's data"
    return None


_WIPE_PATH = re.compile(r"/(_all|\*|_data|_index_template/\*|\.\*)(/|\?|$)|/_delete_by_query|/_flush_all")
_MATCH_ALL = re.compile(r"match_all|\{\s*\}")


def judge_http_wipe(cmd: SimpleCommand, argv: Sequence[str], ctx: JudgeContext) -> str | None:
    """``curl -X DELETE localhost:9200/_all``, ``.../idx/_delete_by_query`` matching everything: a wipe
    even on this machine (the HTTP-delete rule exempts loopback)."""
    args = argv[1:]
    methods = [m.upper() for m in option_values(args, ("-X", "--request", "--method"))]
    methods += [a for a in split_args(args).positionals if a in ("DELETE", "POST")]
    bodies = option_values(args, ("-d", "--data", "--data-raw", "--data-binary", "--json")) + [
        a for a in args if "match_all" in a
    ]
    for word in split_args(args, ("-X", "--request", "-H", "--header", "-d", "--data", "-u")).positionals:
        if "://" not in word and ":" not in word and "/" not in word:
            continue
        match = _WIPE_PATH.search(word)
        if match is None:
            continue
        if "_delete_by_query" in match.group(0):
            if any(_MATCH_ALL.search(body) for body in bodies):
                return f"delete-by-query matching everything at {word}"
            continue
        if "DELETE" in methods:
            return f"HTTP DELETE of {word}"
    return None


_PRIVATE_ROOTS = ("/root", "/var/lib", "/etc", "/Library", "/private/var", "/var/db")


def judge_private_db(cmd: SimpleCommand, argv: Sequence[str], ctx: JudgeContext) -> str | None:
    """A database file of the user or the system, outside the workspace (browser logins and cookies,
    messages, other applications' data): reading it is reading someone's secrets."""
    client = CLIENTS.get(argv[0], _GENERIC)
    positionals = split_args(argv[1:], (*client.value_options, *client.sql_options)).positionals
    if not positionals:
        return None
    path = ctx.resolve(positionals[0])
    if path is None or ctx.inside(path):
        return None
    home = ctx.home.rstrip("/") + "/"
    if path.startswith(home) or path.startswith(("/home/", "/Users/")) or path.startswith(_PRIVATE_ROOTS):
        return f"{positionals[0]} is a database outside the workspace"
    return None
