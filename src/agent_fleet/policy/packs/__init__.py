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

Modules: ``_packs`` (loading and matching packs; one dict pass indexes the rules by program),
``_judges`` (the judges packs name in ``check``, and the script-level judges), ``_judge_*`` (judges by
domain: ``_judge_guard_rails`` for agents started or configured without their checks, ``_judge_domains``
for production dispatches, bucket uploads and mail, ``_judge_proxy`` for credentials through a proxy
...), ``_sql`` (database clients), ``_argv`` (what a judge sees of one command), ``_nested`` (commands
run elsewhere: containers, environments, other machines). The allow-list is ``agent_fleet.policy._hosts``.
See docs/rule-packs.md for the file format.

May use: ``bash``, ``rules``, ``agent_fleet.policy._hosts``; never ``requests`` or ``engine``.
"""
