"""Model providers: the offline echo provider and the HTTP-backed real ones.

``create_provider`` dispatches on ``ProviderConfig.type`` through ``PROVIDER_FACTORIES``.
Provider modules export ``PROVIDER_TYPES: dict[type, constructor]``; they are listed in
``PROVIDER_MODULES`` and imported on first use, so `zeroclaw acp` with the echo provider
never pays for httpx. ``register_provider`` adds a constructor directly (tests, plugins).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Final, TypeAlias

from acp_server.agent.providers.base import Provider, ProviderError
from acp_server.config import ProviderConfig

ProviderFactory: TypeAlias = Callable[[ProviderConfig], Provider]

PROVIDER_MODULES: Final = (
    "acp_server.agent.providers.echo",
    "acp_server.agent.providers.openai",
    "acp_server.agent.providers.anthropic",
)
"""Modules with a ``PROVIDER_TYPES`` table, searched in order for an unknown type."""

PROVIDER_FACTORIES: Final[dict[str, ProviderFactory]] = {}
"""provider type → constructor; filled from ``PROVIDER_MODULES`` as they are imported."""

_loaded_modules: set[str] = set()


def register_provider(provider_type: str, factory: ProviderFactory) -> None:
    """Add or replace the constructor for a provider type."""
    PROVIDER_FACTORIES[provider_type] = factory


def _load_module(module_name: str) -> None:
    if module_name in _loaded_modules:
        return
    module = importlib.import_module(module_name)
    _loaded_modules.add(module_name)
    table: Mapping[str, ProviderFactory] = getattr(module, "PROVIDER_TYPES", {})
    for provider_type, factory in table.items():
        PROVIDER_FACTORIES.setdefault(provider_type, factory)


def known_provider_types() -> list[str]:
    for module_name in PROVIDER_MODULES:
        _load_module(module_name)
    return sorted(PROVIDER_FACTORIES)


def create_provider(config: ProviderConfig) -> Provider:
    """Build the provider for ``[providers.models.<type>.<alias>]``.

    Raises:
        ProviderError: the type is unknown, or the provider refuses its configuration
            (for example a missing API key).
    """
    for module_name in PROVIDER_MODULES:
        if config.type in PROVIDER_FACTORIES:
            break
        _load_module(module_name)
    factory = PROVIDER_FACTORIES.get(config.type)
    if factory is None:
        known = ", ".join(known_provider_types())
        raise ProviderError(f"unknown provider type `{config.type}` (known: {known})")
    return factory(config)
