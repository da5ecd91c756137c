"""JSON-RPC 2.0 over JSON Lines: a pure protocol core (``JsonRpcCore``) and an asyncio ``Connection``."""

from agent_fleet.jsonrpc.connection import (
    Connection,
    NotificationHandler,
    RequestHandler,
    RouteKey,
    StreamTransport,
    Subscription,
    Transport,
    param_key,
)
from agent_fleet.jsonrpc.core import (
    ErrorResponse,
    JsonRpcCore,
    Message,
    Notification,
    ProtocolError,
    ProtocolErrorKind,
    Request,
    Response,
)

__all__ = [
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
