"""Logging codex in and out through the app-server's ``account/*`` methods (``CodexProvider``'s).

- ``account()``: ``account/read`` -> ``CodexAccount`` (what codex will use: an API key, a ChatGPT
  account with its e-mail and plan, or none, and whether the model provider needs an OpenAI login);
- ``login_api_key(key)``: ``account/login/start {type: "apiKey", apiKey}``; codex stores the key in its
  ``CODEX_HOME`` (``auth.json``); the key is never logged or kept here;
- ``login_chatgpt_device_code()``: ``account/login/start {type: "chatgptDeviceCode"}`` answers with a
  verification URL and a one-time code for the user; ``DeviceCodeLogin.wait()`` waits for codex's
  ``account/login/completed`` with that login's id; ``cancel()`` sends ``account/login/cancel``;
- ``logout()``: ``account/logout``;
- ``account/chatgptAuthTokens/refresh`` (a server request): the ``auth_refresh_handler``'s tokens.

A refused login raises ``AuthenticationError`` (not retryable); an app-server that cannot be reached,
``ProviderUnavailable`` / ``ConnectionClosed`` as for any request.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any, Protocol

from agent_fleet.codex import _overload
from agent_fleet.codex import _server_requests as _requests
from agent_fleet.codex.options import CodexOptions
from agent_fleet.errors import AgentFleetError, AuthenticationError, RPCError, UsageError
from agent_fleet.events import Error
from agent_fleet.jsonrpc import Connection, Request

__all__ = ["AccountMixin", "CodexAccount", "DeviceCodeLogin"]

LOGIN_COMPLETED = "account/login/completed"


@dataclass(frozen=True, slots=True, kw_only=True)
class CodexAccount:
    """The account codex will use: ``kind`` is ``"apiKey"``, ``"chatgpt"``, another kind codex names,
    or None when it has none; ``email`` and ``plan`` for a ChatGPT account; ``requires_openai_auth``:
    whether the configured model provider needs an OpenAI login at all. ``raw``: codex's answer."""

    kind: str | None
    email: str | None = None
    plan: str | None = None
    requires_openai_auth: bool = True
    raw: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        """One line for people: ``ChatGPT (me@example.com, plus)``, ``API key``, ``none``."""
        if self.kind == "chatgpt":
            details = ", ".join(p for p in (self.email, self.plan) if p)
            return f"ChatGPT ({details})" if details else "ChatGPT"
        if self.kind == "apiKey":
            return "API key"
        return self.kind or "none"


class _Host(Protocol):
    options: CodexOptions

    async def _connection(self) -> Connection: ...


@dataclass(slots=True)
class DeviceCodeLogin:
    """A ChatGPT device-code login in progress: show ``verification_url`` and ``user_code`` to the user,
    then ``await wait()`` (``AuthenticationError`` if codex reports it failed) or ``cancel()``."""

    login_id: str
    verification_url: str
    user_code: str
    _done: asyncio.Future[dict[str, Any]]
    _host: Any

    async def wait(self, timeout: float | None = None) -> None:  # noqa: ASYNC109 - a login may take minutes
        """Wait until the user completed the login (``TimeoutError`` after ``timeout`` seconds)."""
        async with asyncio.timeout(timeout):
            outcome = await asyncio.shield(self._done)
        if not outcome.get("success"):
            raise AuthenticationError(
                f"the ChatGPT login failed: {outcome.get('error') or 'no reason given'}"
            )

    async def cancel(self) -> None:
        """Stop waiting for this login (``account/login/cancel``)."""
        conn = await self._host._connection()
        await _overload.request(
            conn, "account/login/cancel", {"loginId": self.login_id}, timeout=self._host.options.rpc_timeout
        )
        if not self._done.done():
            self._done.set_result({"success": False, "error": "cancelled"})


class AccountMixin:
    """Mixed into ``CodexProvider`` (which defines ``options`` and ``_connection``)."""

    options: CodexOptions
    _logins: dict[str, asyncio.Future[dict[str, Any]]]

    async def _connection(self) -> Connection:
        raise NotImplementedError

    def _live_handles(self) -> list[Any]:
        raise NotImplementedError

    async def _refresh_auth(self, conn: Connection, msg: Request) -> None:
        """``account/chatgptAuthTokens/refresh``: the ``auth_refresh_handler``'s tokens, else end
        every live turn with ``auth_failed`` (nothing can run until someone logs in again) and tell
        every idle session with its next turn (``System(auth_failed)``)."""
        params = msg.params if isinstance(msg.params, dict) else {}
        handler = self.options.auth_refresh_handler
        problem = "no auth_refresh_handler is configured"
        if handler is not None:
            try:
                tokens = await handler(params.get("previousAccountId"))
                with contextlib.suppress(AgentFleetError):
                    await conn.respond(msg.id, _requests.auth_tokens_response(tokens))
                return
            except Exception as exc:
                problem = f"the auth_refresh_handler failed: {type(exc).__name__}: {exc}"
        with contextlib.suppress(AgentFleetError):
            await conn.respond_error(msg.id, -32603, f"cannot refresh ChatGPT tokens: {problem}")
        message = (
            f"codex's ChatGPT authentication must be refreshed ({problem}); "
            "log in again (codex login) or give CodexOptions.auth_refresh_handler"
        )
        for handle in self._live_handles():
            handle.auth_failed(
                Error(code="auth_failed", message=message, data={"reason": params.get("reason")})
            )

    async def _account_call(self, method: str, params: Any) -> Any:
        conn = await self._connection()
        return await _overload.request(conn, method, params, timeout=self.options.rpc_timeout)

    async def account(self) -> CodexAccount:
        """The account codex will use (``account/read``)."""
        result = await self._account_call("account/read", {"refreshToken": False})
        r = result if isinstance(result, dict) else {}
        account = r.get("account") if isinstance(r.get("account"), dict) else None
        kind = account.get("type") if account is not None else None
        email = account.get("email") if account is not None else None
        plan = account.get("planType") if account is not None else None
        return CodexAccount(
            kind=kind if isinstance(kind, str) else None,
            email=email if isinstance(email, str) else None,
            plan=plan if isinstance(plan, str) else None,
            requires_openai_auth=r.get("requiresOpenaiAuth") is not False,
            raw=r,
        )

    async def login_api_key(self, api_key: str) -> None:
        """Log codex in with an OpenAI API key (stored by codex in its ``CODEX_HOME``)."""
        if not isinstance(api_key, str) or not api_key.strip() or any(c.isspace() for c in api_key.strip()):
            raise UsageError("the API key is empty or has spaces in it")
        try:
            await self._account_call("account/login/start", {"type": "apiKey", "apiKey": api_key.strip()})
        except RPCError as exc:
            raise AuthenticationError(f"codex refused the API key: {exc.message}") from None

    async def login_chatgpt_device_code(self) -> DeviceCodeLogin:
        """Start a ChatGPT device-code login; show the result's URL and code, then ``wait()``."""
        try:
            result = await self._account_call("account/login/start", {"type": "chatgptDeviceCode"})
        except RPCError as exc:
            raise AuthenticationError(f"codex could not start the ChatGPT login: {exc.message}") from exc
        r = result if isinstance(result, dict) else {}
        login_id, url, code = r.get("loginId"), r.get("verificationUrl"), r.get("userCode")
        if not (isinstance(login_id, str) and isinstance(url, str) and isinstance(code, str)):
            raise AuthenticationError(f"codex answered the device-code login without a code: {r!r}")
        done = self._logins.get(login_id)  # the completion may have come before this answer
        if done is None:
            done = self._logins[login_id] = asyncio.get_running_loop().create_future()
        return DeviceCodeLogin(
            login_id=login_id, verification_url=url, user_code=code, _done=done, _host=self
        )

    async def logout(self) -> None:
        """Log codex out (``account/logout``): it forgets the stored credential."""
        await self._account_call("account/logout", None)

    def _login_completed(self, params: Any) -> None:
        """``account/login/completed``: resolve the waiting login with that id."""
        p = params if isinstance(params, dict) else {}
        login_id = p.get("loginId")
        if not isinstance(login_id, str):
            return
        done = self._logins.get(login_id)
        if done is None:
            done = self._logins[login_id] = asyncio.get_running_loop().create_future()
        if not done.done():
            done.set_result(p)
