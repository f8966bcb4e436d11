"""The canary tools as ``verify --live`` runs them: gguftpl itself answers a canary call, with a fresh random
marker per run, so the final answer can be checked against the one value that would be right (and a value the
model made up told apart from it, :mod:`gguftpl.verify.invented`)."""

from __future__ import annotations

import copy
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gguftpl.templates import probes

MARKER_PREFIX = "qz7mk-"
"""A fresh marker is this and eight hex digits: canary-shaped (a report explains it with the canary legend)."""
STATUS_TOOL_NAME = "gguftpl_canary_status"
STATUS_PARAM_NAME = "host"
STATUS_ARG_VALUE = "qz7canaryhost"

STATUS_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": STATUS_TOOL_NAME,
        "description": "Get the status of a host by name (gguftpl canary tool).",
        "parameters": {
            "type": "object",
            "properties": {
                STATUS_PARAM_NAME: {"type": "string", "description": "The host's name, e.g. qz7canaryhost."}
            },
            "required": [STATUS_PARAM_NAME],
        },
    },
}
"""A second canary tool, independent of the first (the parallel probe asks for both)."""


@dataclass(frozen=True)
class ToolAnswer:
    """What a tool returned (the shape of an MCP ``tools/call`` result that the live stage reads)."""

    text: str
    is_error: bool = False


def fresh_marker() -> str:
    return MARKER_PREFIX + secrets.token_hex(4)


def two_tools() -> list[dict[str, Any]]:
    return [*probes.canary_tools(), copy.deepcopy(STATUS_TOOL)]


def canary_answer(name: str, arguments: dict[str, Any], marker: str) -> ToolAnswer:
    """gguftpl's answer to a canary call: the record (or host) named and ``marker``."""
    if name == STATUS_TOOL_NAME:
        return ToolAnswer(f"host {arguments.get(STATUS_PARAM_NAME)}: status up, marker {marker}")
    return ToolAnswer(f"record {arguments.get(probes.CANARY_PARAM_NAME)}: marker {marker}")


def error_answer(marker: str) -> ToolAnswer:
    """A canary call that failed: the tool's error, with ``marker`` as its error id."""
    return ToolAnswer(f"error {marker}: no record has the key {probes.CANARY_ARG_VALUE}", is_error=True)


def canary_dispatcher(marker: str) -> Callable[[str, dict[str, Any]], ToolAnswer]:
    """A dispatcher (as ``live_stage`` takes one) that answers every canary call with ``marker``."""
    return lambda name, arguments: canary_answer(name, arguments, marker)
