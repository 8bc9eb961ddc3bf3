"""Session config options and usage (ACP v1): ``configOptions`` on the session/new, load
and resume results, ``session/set_config_option``, and the ``config_option_update`` and
``usage_update`` notifications; plus the prompt result's ``usage`` (ACP's unstable
``PromptResponse.usage``)."""

from __future__ import annotations

from typing import ClassVar, Literal

from acp_core.errors import InvalidParamsError
from acp_core.jsonrpc import JsonObject
from acp_core.schema.inbound import InboundParams, _session_id
from acp_core.schema.wire import WireStruct


class ConfigOptionValue(WireStruct, kw_only=True):
    """One choice of a select option (ACP ``SessionConfigSelectOption``)."""

    value: str
    name: str
    description: str | None = None


class ConfigOption(WireStruct, kw_only=True):
    """A select option and its current value (ACP ``SessionConfigOption``, ``type:
    "select"``). ``category`` is ACP's UX hint: ``"model"`` is the model picker,
    ``"mode"`` the session mode picker."""

    id: str
    name: str
    description: str | None = None
    category: str | None = None
    type: Literal["select"]  # no default: omit_defaults would drop it, and ACP requires it
    current_value: str
    options: list[ConfigOptionValue]


class ConfigOptionUpdate(
    WireStruct, tag_field="sessionUpdate", tag="config_option_update", kw_only=True
):
    """ACP ``config_option_update``: the full set of options with their current values."""

    config_options: list[ConfigOption]


class UsageUpdate(WireStruct, tag_field="sessionUpdate", tag="usage_update", kw_only=True):
    """ACP ``usage_update``: ``used`` tokens in the context after a model round, ``size``
    the context window in tokens (0 when the provider's window is not known)."""

    used: int
    size: int


class PromptUsage(WireStruct, kw_only=True):
    """The prompt result's ``usage``: the tokens the provider counted for the turn."""

    total_tokens: int
    input_tokens: int
    output_tokens: int
    thought_tokens: int | None = None


class RestoredSessionResult(WireStruct, kw_only=True):
    """``session/load`` and ``session/resume``: ``{}`` plus the session's config options."""

    config_options: list[ConfigOption] | None = None


class SetConfigOptionResult(WireStruct, kw_only=True):
    """``session/set_config_option``: the full set of options after the change."""

    config_options: list[ConfigOption]


class SetConfigOptionParams(InboundParams, kw_only=True):
    """``session/set_config_option``: the option's ``configId`` and the chosen value id.

    ACP also has ``type: "boolean"`` values; no option here is boolean, so a boolean value
    is refused like any value the option does not offer."""

    strict_fast_path: ClassVar[bool] = False

    session_id: str
    config_id: str
    value: str

    @classmethod
    def from_object(cls, params: JsonObject) -> SetConfigOptionParams:
        session_id = _session_id(params)
        config_id = params.get("configId")
        if not isinstance(config_id, str):
            raise InvalidParamsError("Missing required parameter: configId")
        value = params.get("value")
        if not isinstance(value, str):
            raise InvalidParamsError("Invalid parameter: value must be a value id (a string)")
        return cls(session_id=session_id, config_id=config_id, value=value)
