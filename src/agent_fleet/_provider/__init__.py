"""What the providers share: the event stream, the handle base, background tasks, approval audit
events, prompt helpers. Private; imported by provider packages only.

Importing this package loads nothing: each module pulls in only what it needs (``audit`` is the one
that reaches the policy), so light callers (the exec-server client, the test kit) can use a piece
without the provider stack.
"""
