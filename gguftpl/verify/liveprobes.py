"""``verify --live --probe``: more live conversations beside the canary request, each its own stage.

(the probes themselves come below)
"""

from __future__ import annotations

from gguftpl.templates import probes

NO_TOOLS_ASK = (
    f"Use the lookup tool to fetch the record with key {probes.CANARY_ARG_VALUE} and tell me the marker it returns."
)
"""The no-tools probe's request: it needs a tool result, and no tool is offered."""
