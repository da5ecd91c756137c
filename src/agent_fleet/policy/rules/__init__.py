"""The built-in rules: always on, never overridable, judged on what ``bash`` read.

Job: decide whether a parsed script breaks one of the built-in safety rules (lost work or history,
the machine's vital paths, privilege, credentials, code that cannot be seen, the whole system).

Contract:

* in: a ``ParsedScript`` and a ``RuleContext`` (the workspace, writable roots, home; ``_verdict``);
* out: the first ``Violation`` (a stable rule id and a reason) in the documented order, or ``None``
  (``_rules.find_violation``); the strict profile's proof of harmlessness is ``_strict``;
* every rule id a built-in rule may give is listed with its meaning (``_rules.BUILTIN_RULES``);
* pure: reads no file, runs nothing, holds no state; a rule that cannot tell declines (fails closed).

Modules: ``_rules`` (the order and the program-specific rules; ``BUILTIN_RULES`` is gathered from the
tables the rule modules keep of the ids they decide), ``_files`` and ``_links`` (paths written, moved,
deleted or read, through links), ``_targets`` and ``_writes`` (which words name which paths), ``_git``,
``_system`` and ``_machine`` (the whole machine), ``_execution`` (code run that cannot be seen),
``_unseen`` (destruction fed by data the policy cannot see, archivers that delete what they read),
``_secret_use`` and ``_secrets`` (credentials), ``_tools`` (well-known developer tools), ``_flags``
(option spelling), ``_strict``, ``_verdict`` (the values).

May use: ``bash`` (what a script runs), ``agent_fleet.policy._hosts``; never ``packs``, ``requests``
or ``engine``.
"""
