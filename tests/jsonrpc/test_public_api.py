"""Pin the public surface of agent_fleet.jsonrpc."""

import agent_fleet.jsonrpc as jsonrpc


def test_all_is_pinned() -> None:
    assert sorted(jsonrpc.__all__) == [
        "Connection",
        "ErrorResponse",
        "JsonRpcCore",
        "Message",
        "Notification",
        "NotificationHandler",
        "ProtocolError",
        "ProtocolErrorKind",
        "Request",
        "RequestHandler",
        "Response",
        "RouteKey",
        "StreamTransport",
        "Subscription",
        "Transport",
        "param_key",
    ]
    for name in jsonrpc.__all__:
        assert getattr(jsonrpc, name) is not None


def test_core_never_imports_asyncio() -> None:
    import ast
    import inspect

    from agent_fleet.jsonrpc import core

    tree = ast.parse(inspect.getsource(core))
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not any(name.startswith("asyncio") for name in imported)
