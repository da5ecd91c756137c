"""A batch's providers by name (the default one and any a task's ``provider`` asks for), started before
the first task and shut down at the end; ``options_for`` gives a provider the batch's options when they
are its own type."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from agent_fleet.contract import Provider
from agent_fleet.runner.providers import check_provider, make_provider, provider_entry

__all__ = ["Providers", "options_for"]

_PROVIDER_SHUTDOWN_LIMIT = 10.0  # seconds; a provider that does not stop by then is left to its own kill


class Providers:
    """The batch's providers by name: the default one and any a task's ``provider`` asks for."""

    def __init__(self, given: Provider | None, default_name: str, options: Any) -> None:
        self.default_name = given.name if given is not None else default_name
        self.options = options
        self.given = given
        self.running: dict[str, Provider] = {}

    async def start(self, names: set[str]) -> None:
        for name in sorted(names):
            if self.given is not None and name == self.default_name:
                await self.given.start()
                self.running[name] = self.given
                continue
            options = options_for(name, self.options)
            check_provider(name, options)
            provider = make_provider(name, options)
            self.running[name] = provider
            await provider.start()

    def get(self, name: str | None) -> Provider:
        return self.running[name or self.default_name]

    async def shutdown(self) -> None:
        for provider in self.running.values():
            if provider is not self.given:
                with contextlib.suppress(Exception, TimeoutError):
                    await asyncio.wait_for(asyncio.shield(provider.shutdown()), _PROVIDER_SHUTDOWN_LIMIT)


def options_for(name: str, options: Any) -> Any:
    """``options`` when they are provider ``name``'s options type, else None (its defaults): a task that
    asks for another provider than the batch's gets that provider's defaults."""
    return options if isinstance(options, provider_entry(name).options_type) else None
