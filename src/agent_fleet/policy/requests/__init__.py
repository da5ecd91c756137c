"""The requests that are not shell commands: file changes, reads, network access, permission grants,
tools.

Job: judge a non-command ``ApprovalRequest`` against the session's workspace and the configuration.

Contract:

* in: an ``ApprovalRequest`` (its ``cwd`` is the session's workspace, set by the provider: nothing the
  peer sends chooses the limits) and the relevant configuration (allowed hosts, MCP tools);
* out: a declining ``Decision``, or ``None`` when nothing here objects (the engine then applies the
  kind's default); ``_paths.check_paths`` is the containment verdict for a list of paths;
* pure: paths are resolved (``realpath``) but no file is read or written.

Modules: ``_requests`` (reads, network, permissions, tools), ``_paths`` (containment of file changes,
``realpath`` that resolves each directory of a request once).

May use: ``rules`` (the one list of credential files), ``agent_fleet.policy._types``; never ``bash``,
``packs`` or ``engine``.
"""
