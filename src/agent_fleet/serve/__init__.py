"""``agent-fleet serve``: one daemon, one warm provider per kind, the provider contract over HTTP.

The daemon owns the providers (a codex app-server child started on first use and restarted on a
crash), the approval policy with its queue of deferred approvals, a small SQLite store of sessions
and their events, and the batches it runs. See ``docs/api.md`` for the API and
``agent_fleet.remote.RemoteProvider`` for the client.
"""

from agent_fleet.serve._server import Daemon, ServeConfig, default_state_dir, is_loopback

__all__ = ["Daemon", "ServeConfig", "default_state_dir", "is_loopback"]
