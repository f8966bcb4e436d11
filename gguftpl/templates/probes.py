"""Probe conversations and a canary tool, shared by analysis, ``render`` and ``verify``.

The canary's name, parameter description and argument values are strings no template contains, so
finding them in a rendered prompt proves the template put that piece of data there.
"""

from __future__ import annotations

import copy
from typing import Any

CANARY_TOOL_NAME = "gguftpl_canary_lookup"
CANARY_TOOL_DESCRIPTION = "Look up a record by key (gguftpl canary tool)."
CANARY_PARAM_NAME = "record_key"
CANARY_PARAM_DESCRIPTION = "The key of the record, e.g. qz7canaryparam."
CANARY_PARAM_TOKEN = "qz7canaryparam"
"""Unique token inside the parameter description: present in a prompt only if the schema was rendered."""
CANARY_ARG_VALUE = "qz7canaryargvalue"
"""Argument value of the canary call in history: present only if the template rendered the call."""
CANARY_RESULT = "qz7canaryresult"
"""Content of the tool result in history: present only if the template rendered the tool message."""
CANARY_CALL_ID = "qz7call01"
"""Nine alphanumerics: Mistral templates reject any other tool-call id shape."""
CANARY_USER = "qz7canaryuser"
CANARY_ASSISTANT = "qz7canaryassistant"
CANARY_SYSTEM = "qz7canarysystem"

CANARY_PREFIXES = ("qz7", "gguftpl_canary")
"""What every canary string starts with: the probe data a report may quote."""
CANARY_LEGEND = (
    "qz7canary…, qz7call01 and gguftpl_canary_lookup are gguftpl's probe data (a made-up tool, call and messages "
    "no template contains): one seen in a prompt proves the template rendered that part"
)
"""The line that explains the canary strings, said once in a report that quotes them."""


def quotes_canary(text: str) -> bool:
    """Whether ``text`` quotes a canary string (so a reader needs :data:`CANARY_LEGEND`)."""
    return any(prefix in text for prefix in CANARY_PREFIXES)


CANARY_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": CANARY_TOOL_NAME,
        "description": CANARY_TOOL_DESCRIPTION,
        "parameters": {
            "type": "object",
            "properties": {
                CANARY_PARAM_NAME: {"type": "string", "description": CANARY_PARAM_DESCRIPTION},
            },
            "required": [CANARY_PARAM_NAME],
        },
    },
}
"""The canary tool in OpenAI ``tools`` format."""


def canary_tools() -> list[dict[str, Any]]:
    return [copy.deepcopy(CANARY_TOOL)]


def tool_call(
    name: str = CANARY_TOOL_NAME,
    arguments: dict[str, Any] | None = None,
    *,
    call_id: str = CANARY_CALL_ID,
    string_arguments: bool = False,
) -> dict[str, Any]:
    """An OpenAI-style ``tool_calls`` entry. HF templates mostly expect ``arguments`` as a dict;
    ``string_arguments=True`` gives the JSON string OpenAI's API uses."""
    import json

    args: Any = arguments if arguments is not None else {CANARY_PARAM_NAME: CANARY_ARG_VALUE}
    if string_arguments:
        args = json.dumps(args)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def plain_conversation(system: bool = False) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = []
    if system:
        msgs.append({"role": "system", "content": CANARY_SYSTEM})
    msgs.append({"role": "user", "content": CANARY_USER})
    return msgs


def multi_turn_conversation() -> list[dict[str, Any]]:
    """user, assistant, user: shows the end-of-turn marker after an assistant message."""
    return [
        {"role": "user", "content": CANARY_USER},
        {"role": "assistant", "content": CANARY_ASSISTANT},
        {"role": "user", "content": CANARY_USER + "2"},
    ]


def tools_conversation() -> list[dict[str, Any]]:
    """A single user turn; render it with ``tools=canary_tools()``."""
    return plain_conversation()


def assistant_call_message(call: dict[str, Any] | None = None, content: str | None = "") -> dict[str, Any]:
    return {"role": "assistant", "content": content, "tool_calls": [call or tool_call()]}


def tool_result_message(content: str = CANARY_RESULT, name: str = CANARY_TOOL_NAME) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": CANARY_CALL_ID, "name": name, "content": content}


def tool_call_conversation(call: dict[str, Any] | None = None, content: str | None = "") -> list[dict[str, Any]]:
    """user, assistant with one tool call (the last message)."""
    return [{"role": "user", "content": CANARY_USER}, assistant_call_message(call, content)]


def tool_round_trip_conversation(call: dict[str, Any] | None = None, content: str | None = "") -> list[dict[str, Any]]:
    """user, assistant tool call, tool result: render with ``add_generation_prompt=True``."""
    return [*tool_call_conversation(call, content), tool_result_message()]


def fold_system(messages: list[dict[str, Any]], sep: str = "\n\n") -> list[dict[str, Any]]:
    """Merge system messages into the first user message (joined by ``sep``; llama.cpp uses one newline), as
    llama.cpp does for templates that reject the system role."""
    system = [m.get("content") or "" for m in messages if m.get("role") == "system"]
    rest = [dict(m) for m in messages if m.get("role") != "system"]
    if not system:
        return rest
    prefix = "\n\n".join(str(s) for s in system)
    for m in rest:
        if m.get("role") == "user":
            m["content"] = f"{prefix}{sep}{m.get('content') or ''}"
            return rest
    return [{"role": "user", "content": prefix}, *rest]


def content_as_parts(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with every string ``content`` turned into one text part, as llama.cpp sends them to a template
    that reads content only as parts (``typed_content_only``)."""
    return [
        {**m, "content": [{"type": "text", "text": m["content"]}]} if isinstance(m.get("content"), str) else m
        for m in messages
    ]


def typed_content_only(caps: dict[str, bool]) -> bool:
    """llama.cpp's capability probe found the template reads content as a list of parts and not as a string:
    llama.cpp then sends every string content as one text part."""
    return caps.get("supports_string_content") is False and caps.get("supports_typed_content") is True


def llamacpp_messages(messages: list[dict[str, Any]], caps: dict[str, bool]) -> list[dict[str, Any]]:
    """``messages`` as llama.cpp hands them to the template its capability probe found ``caps`` for: system
    messages folded into the first user turn (no system role), string content as text parts (parts only) or
    text parts joined into a string (strings only). Comparing engines on this conversation compares their Jinja
    engines, not llama.cpp's message normalisation (which other rules report)."""
    out = [dict(m) for m in messages]
    if caps.get("supports_system_role") is False:
        out = fold_system(out, sep="\n")
    if typed_content_only(caps):
        return content_as_parts(out)
    if caps.get("supports_string_content") is True and caps.get("supports_typed_content") is False:
        for m in out:
            if isinstance(m.get("content"), list):
                m["content"] = _joined_text(m["content"])
    return out


def _joined_text(parts: list[Any]) -> str:
    """llama.cpp's ``concat_content_parts`` for text parts: each after the first non-empty text on a new line."""
    text = ""
    for part in parts:
        if isinstance(part, dict) and part.get("type") == "text":
            text += ("\n" if text else "") + str(part.get("text", ""))
    return text


# Probes both engines render (transformers in the render worker, llama.cpp in the parse-check worker), by name.
PLAIN = "plain"
TOOLS = "tools"
TOOLS_WITH_SYSTEM = "tools with system"
SYSTEM = "system message"
MULTI = "multi-turn"
ROUND_TRIP = "tool round trip"
NULL_CONTENT = "tool call with null content"
"""The OpenAI shape of an assistant turn that calls a tool: ``content`` is null."""
TEXT_PARTS = "content as text parts"
"""The OpenAI shape of content as a list of parts: ``[{"type": "text", "text": …}]``."""


def text_parts_conversation() -> list[dict[str, Any]]:
    return [{"role": "user", "content": [{"type": "text", "text": CANARY_USER}]}]


def engine_probes() -> list[tuple[str, list[dict[str, Any]], list[dict[str, Any]] | None, bool]]:
    """(name, messages, tools, add_generation_prompt) of every conversation llama.cpp renders for the facts."""
    tools = canary_tools()
    return [
        (PLAIN, plain_conversation(), None, True),
        (TOOLS, tools_conversation(), tools, True),
        (TOOLS_WITH_SYSTEM, plain_conversation(system=True), tools, True),
        (SYSTEM, plain_conversation(system=True), None, True),
        (MULTI, multi_turn_conversation(), None, True),
        (ROUND_TRIP, tool_round_trip_conversation(tool_call(), ""), tools, True),
        (NULL_CONTENT, tool_round_trip_conversation(tool_call(), None), tools, True),
        (TEXT_PARTS, text_parts_conversation(), None, True),
    ]


SHAPE_PROBES = {NULL_CONTENT: ROUND_TRIP, TEXT_PARTS: PLAIN}
"""Probes of message shapes OpenAI-compatible clients send -> the same conversation in the plain shape. A shape
probe says something only where its plain twin renders: then the shape alone makes the template raise."""
