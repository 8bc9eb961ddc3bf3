"""What the runtime does with an approval: the operator's verdict and the denial texts.

The question is asked by the presentation side (acp_server/protocol/presentation/permissions.py builds the
``session/request_permission`` and reads the answer back as a ``Verdict``); the turn
acts on the verdict alone: run the call, run it and stop asking, refuse it, or refuse it
with the operator's replacement text as the tool's result.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

DENIED_BY_USER: Final = "Denied by user."


def runtime_denial(tool_name: str) -> str:
    """Model-facing text when nobody decided (timeout, dismissal, error): ZeroClaw's wording."""
    return (
        f"Tool call not executed: '{tool_name}' requires approval and no operator decision "
        "was available, so the runtime denied it by policy. This was not a user's decision."
    )


class VerdictKind(enum.Enum):
    ALLOW_ONCE = "allow_once"
    ALLOW_ALWAYS = "allow_always"
    REJECT = "reject"  # the operator said no
    REJECT_WITH_EDIT = "reject_with_edit"  # no, and use this text as the tool result
    NO_DECISION = "no_decision"  # dismissed, timed out, unknown answer: runtime denies


@dataclass(frozen=True, slots=True)
class Verdict:
    kind: VerdictKind
    replacement: str = ""

    @property
    def allowed(self) -> bool:
        return self.kind in (VerdictKind.ALLOW_ONCE, VerdictKind.ALLOW_ALWAYS)


NO_DECISION: Final = Verdict(VerdictKind.NO_DECISION)
