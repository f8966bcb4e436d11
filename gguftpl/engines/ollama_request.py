"""A :class:`~gguftpl.engines.base.RenderRequest` as Ollama's OpenAI-compatible endpoint hands it to its template.

``openai.FromChatRequest`` (``openai/openai.go`` @fb30760996871fa9460115c753afd2c60d4ab0f7) turns each OpenAI
message into one ``api.Message`` (a content list into one message per part, the tool calls on the last), names a
tool message from ``name`` or else the call its ``tool_call_id`` answers, and takes the thinking setting from
``reasoning_effort`` (``thinkFromReasoningEffort``); ``server/prompt.go``'s ``imageTaggedMessages`` then puts
``[img-N]`` tags in the content. What is done here is that part, in Python; the Go worker does the rest as Ollama
does (parsing each call's ``arguments`` string, re-binding the request, ``template.Execute``). A request Ollama
would refuse answers the same error text instead of a request.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from typing import Any

from gguftpl.engines.base import RenderRequest

_IMAGE_PREFIXES = tuple(f"data:image/{t};base64," for t in ("jpeg", "jpg", "png", "webp"))
_EFFORTS: dict[str, Any] = {
    "none": False,
    "minimal": "low",
    "low": "low",
    "medium": "medium",
    "high": "high",
    "max": "max",
    "xhigh": "max",
    "ultra": "max",
}


class Refused(Exception):
    """Ollama answers the request with this error (HTTP 400) before any template sees it."""


def wire_request(req: RenderRequest) -> dict[str, Any]:
    """What the Go worker renders (messages with OpenAI's tool calls, tools, think); :class:`Refused` with Ollama's
    message when its OpenAI layer would not accept ``req``."""
    messages: list[dict[str, Any]] = []
    for msg in req.messages:
        messages += _messages(msg, req.messages)
    _tag_images(messages)
    return {
        "messages": messages,
        "tools": [dict(t) for t in req.tools] if req.tools is not None else None,
        "think": _think(req.variables.get("reasoning_effort")),
    }


def _messages(msg: Mapping[str, Any], history: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``FromChatRequest``'s loop body: the ``api.Message``s one OpenAI message becomes."""
    role = _str(msg.get("role"))
    tool_name = ""
    call_id = _str(msg.get("tool_call_id"))
    if role.lower() == "tool":
        tool_name = _str(msg.get("name")) or (_name_from_call_id(history, call_id) if call_id else "")
    reasoning = _str(msg.get("reasoning"))
    calls = msg.get("tool_calls")
    content = msg.get("content")
    if isinstance(content, str):
        one = {"role": role, "content": content, "thinking": reasoning, "tool_name": tool_name}
        return [{**one, "tool_calls": _calls(calls), "tool_call_id": call_id}]
    if isinstance(content, list):
        out = [_part(role, part) for part in content]
        if out and calls:
            out[-1].update(tool_calls=_calls(calls), tool_name=tool_name, tool_call_id=call_id, thinking=reasoning)
        return out
    if calls is None:  # content is only optional when tool calls are present
        raise Refused(f"invalid message content type: {_go_type(content)}")
    return [{"role": role, "thinking": reasoning, "tool_calls": _calls(calls), "tool_call_id": call_id}]


def _part(role: str, part: Any) -> dict[str, Any]:
    if not isinstance(part, Mapping):
        raise Refused("invalid message format")
    kind = part.get("type")
    if kind == "text":
        if not isinstance(part.get("text"), str):
            raise Refused("invalid message format")
        return {"role": role, "content": part["text"]}
    if kind == "image_url":
        url = part.get("image_url")
        url = url.get("url") if isinstance(url, Mapping) else url
        if not isinstance(url, str):
            raise Refused("invalid message format")
        return {"role": role, "images": [_image(url)]}
    if kind == "input_audio":
        audio = part.get("input_audio")
        if not isinstance(audio, Mapping):
            raise Refused("invalid input_audio format")
        if not isinstance(audio.get("data"), str):
            raise Refused("invalid input_audio format: missing data")
        try:
            raw = base64.b64decode(audio["data"], validate=True)
        except (binascii.Error, ValueError) as exc:
            raise Refused(f"invalid input_audio base64 data: {exc}") from None
        return {"role": role, "images": [base64.b64encode(raw).decode("ascii")]}
    raise Refused("invalid message format")


def _image(url: str) -> str:
    """``decodeImageURL``: a base64 data URL's bytes, base64 again (``api.ImageData`` in JSON)."""
    if url.startswith(("http://", "https://")):
        raise Refused("image URLs are not currently supported, please use base64 encoded data instead")
    if url.startswith("data:;base64,"):
        data = url[len("data:;base64,") :]
    else:
        prefix = next((p for p in _IMAGE_PREFIXES if url.startswith(p)), None)
        if prefix is None:
            raise Refused("invalid image input")
        data = url[len(prefix) :]
    try:
        return base64.b64encode(base64.b64decode(data, validate=True)).decode("ascii")
    except (binascii.Error, ValueError):
        raise Refused("invalid image input") from None


def _tag_images(messages: list[dict[str, Any]]) -> None:
    """``imageTaggedMessages`` (no renderer): each image numbered across the conversation, its tag replacing the
    next ``[img]`` in the content or, when there is none, put before it."""
    count = 0
    for msg in messages:
        images = msg.get("images") or []
        if not images:
            continue
        prefix, prompt = "", str(msg.get("content") or "")
        for _ in images:
            tag = f"[img-{count}]"
            count += 1
            if "[img]" not in prompt:
                prefix += tag
            else:
                prompt = prompt.replace("[img]", tag, 1)
        msg["content"] = prefix + prompt


def _calls(calls: Any) -> list[dict[str, Any]]:
    """OpenAI tool calls with ``function.arguments`` as the JSON string OpenAI's API sends (a dict is what a
    client would serialise); ``FromCompletionToolCall`` parses it in the worker."""
    out = []
    for call in calls if isinstance(calls, list) else []:
        fn = call.get("function") if isinstance(call, Mapping) else None
        fn = fn if isinstance(fn, Mapping) else {}
        args = fn.get("arguments")
        if args is None:
            text = ""
        elif isinstance(args, str):
            text = args
        else:
            text = json.dumps(args, ensure_ascii=False)
        out.append({"id": _str(call.get("id")), "name": _str(fn.get("name")), "arguments": text})
    return out


def _name_from_call_id(history: Sequence[Mapping[str, Any]], call_id: str) -> str:
    """``nameFromToolCallID``: the last call with that id wins."""
    for msg in reversed(history):
        for call in msg.get("tool_calls") or []:
            if isinstance(call, Mapping) and call.get("id") == call_id:
                fn = call.get("function")
                return _str(fn.get("name")) if isinstance(fn, Mapping) else ""
    return ""


def _think(effort: Any) -> Any:
    if effort is None or effort == "":
        return None
    if isinstance(effort, str) and effort in _EFFORTS:
        return _EFFORTS[effort]
    raise Refused(
        f'invalid reasoning value: "{effort}" (must be "minimal", "low", "medium", "high", "xhigh", "ultra", '
        '"max", or "none")'
    )


def _str(v: Any) -> str:
    return v if isinstance(v, str) else ""


def _go_type(v: Any) -> str:
    """How Go's ``%T`` names what ``encoding/json`` made of ``v``."""
    if v is None:
        return "<nil>"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "float64"
    if isinstance(v, Mapping):
        return "map[string]interface {}"
    return type(v).__name__
