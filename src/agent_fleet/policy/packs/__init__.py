"""The domain packs: the policy's knowledge of domains (databases, clouds, clusters, forges, networks,
supply chain, exhaustion ...) as data, one TOML file per domain in this directory, plus the judges a pack
may name.

Job: decide whether a parsed script does something a domain rule forbids (``DROP TABLE``, ``terraform
destroy``, an upload to an unknown host, an install from an unvetted index).

Contract:

* in: a ``ParsedScript``, its text, the working directory, writable roots and home, and the host
  allow-list (``_hosts.HostList``: built-in indexes, ``allowed_hosts``, the repository's own forge);
* out: the first ``PackViolation`` (rule id ``domain/name``) or ``None`` (``_packs.PackSet.check_script``);
* a ``PackSet`` is built once per ``(rule_packs, allowed_hosts)`` and is safe to share between threads;
  it may read a few small regular files the command names (SQL, requirements, the repository's remote);
* a judge that fails declines (``packs/internal-error``): fails closed.

Modules: ``_packs`` (loading and matching packs), ``_judges`` (the judges packs name in ``check``),
``_judge_*`` (judges by domain), ``_sql`` (database clients), ``_argv`` (what a judge sees of one
command), ``_hosts`` (the allow-list), ``_nested`` (commands run elsewhere: containers, environments,
other machines). See docs/rule-packs.md for the file format.
"""
