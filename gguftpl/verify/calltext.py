"""A tool call written the way the template itself writes one, cut out of llama.cpp's own render.

llama.cpp learns its tool-call parser from what the template writes after the generation prompt; a canned
call must be in exactly that dialect and spacing (RESEARCH §4: ``<tool_call>{…}</tool_call>`` is not parsed
where the template writes newlines). So the call is never synthesised from a dialect table: a conversation
with the call in history is rendered through llama.cpp and the call's text is cut out of it, marker by marker.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from gguftpl.engines.llamacpp_env import llamacpp_date_string
from gguftpl.engines.llamacpp_session import LlamaCppSession, Message
from gguftpl.errors import LlamaCppError

_REPLY_MARK = "qz7gguftplreplymark"


@dataclass
class CallText:
    """A tool call written the way the template writes it, cut out of llama.cpp's own render."""

    text: str
    """What the model would emit after the generation prompt ('' when the template writes no call)."""
    with_call: str = ""
    """llama.cpp's render of the conversation with the call turn (followed by a user turn)."""
    content_none: bool = False
    """The call rendered only with the assistant ``content`` set to None."""
    history_text: str = ""
    """When ``text`` is a variant (below) that llama.cpp parses: the call as the history render writes it."""
    variants: list[str] = field(default_factory=list)
    """Other readings of the same render a model may emit instead (tried in order when ``text`` does not
    parse): with the end-of-call marker the template writes before its end of turn kept, as the template
    writes the call when its turn is the last message, and without the empty reasoning block the template
    writes for a turn that had no reasoning."""
    call_id: str = ""
    """Set when the template writes the call's ``id`` where the function name belongs (Kimi K2 Thinking's
    ``<|tool_call_begin|>{{ tool_call.id }}``): the id the call was rendered with instead, one that carries
    the name. Empty when the call's own id was used."""


_NAMED_IDS = ("functions.{name}:0", "{name}")
"""Ids that carry the function name, tried when a template writes the id in place of the name:
``functions.NAME:INDEX`` is the form llama.cpp's parser reads a name out of and gives back as the id."""


def call_text_from_template(
    session: LlamaCppSession,
    messages: list[Message],
    tools: list[dict[str, Any]],
    call: dict[str, Any],
) -> CallText:
    """See :func:`_call_text`. A template may write the call's ``id`` and not its name (the name travels
    inside ids shaped like ``functions.NAME:0``); then the call is rendered again with such an id, and the
    one used is kept in ``call_id``."""
    ct = _call_text(session, messages, tools, call)
    name = str((call.get("function") or {}).get("name") or "")
    cid = str(call.get("id") or "")
    if name and cid and ct.text and name not in ct.text and cid in ct.text:
        for shape in _NAMED_IDS:
            named = shape.format(name=name)
            alt = _call_text(session, messages, tools, {**call, "id": named})
            if name in alt.text:
                alt.call_id = named
                return alt
    return ct


def _call_text(
    session: LlamaCppSession,
    messages: list[Message],
    tools: list[dict[str, Any]],
    call: dict[str, Any],
) -> CallText:
    """Render ``messages`` + an assistant turn carrying ``call`` + a user turn through llama.cpp, and the
    same with a plain reply instead; the call text is what follows the generation prompt in the first, up
    to where the conversation continues, less the end-of-turn text (which a model emits as an
    end-of-generation token, never as content). Compared marker by marker, so ``<|START_ACTION|>`` is never
    split against ``<|START_RESPONSE|>``. The exact spacing matters (RESEARCH §4:
    ``<tool_call>{…}</tool_call>`` is not parsed where the template writes newlines)."""
    fn = call.get("function", {})
    values = [str(v) for v in arg_values(fn.get("arguments"))] or [str(fn.get("name", ""))]
    p0 = session.apply_template(messages, tools)
    first: CallText | None = None
    # what follows the call turn: a user turn, or (templates that insist on alternation) the tool's result
    for after in ({"role": "user", "content": "Thanks."}, _tool_result_for(call)):
        try:
            reply = session.apply_template([*messages, {"role": "assistant", "content": _REPLY_MARK}, after], tools)
        except LlamaCppError:
            reply = ""
        for content in ("", None):
            turn = {"role": "assistant", "content": content, "tool_calls": [call]}
            try:
                p1 = session.apply_template([*messages, turn, after], tools)
            except LlamaCppError:
                continue
            text, kept = _cut_call(p0, p1, reply)
            ct = CallText(text, p1, content is None)
            if text and all(v in text for v in values):
                ct.variants = _call_variants(session, messages, tools, [*messages, turn, after], p0, reply, text, kept)
                return _prefer_parsed(session, messages, tools, call, ct)
            first = first or ct
    return first or CallText("")


_REASON_MARK = "qz7gguftplreasonmark"


def _call_variants(
    session: LlamaCppSession,
    messages: list[Message],
    tools: list[dict[str, Any]],
    history: list[Message],
    p0: str,
    reply: str,
    text: str,
    kept: str,
) -> list[str]:
    """Other texts for the same call. llama.cpp's parser is learnt from what the template writes after the
    generation prompt, which history need not share: a template may strip a closing marker the model does
    emit (``<|END_ACTION|>``, ``<|call|>``) only because an end-of-turn follows, or write an empty
    reasoning block (``<|START_THINKING|><|END_THINKING|>``) the model never writes before a call."""
    out: list[str] = []
    bodies = [text] + ([kept] if kept != text else [])
    bodies += [b for b in _last_turn_call(session, messages, tools, history[len(messages)]) if b not in bodies]
    objects = _object_arguments(history[len(messages)])
    if objects is not None:
        bodies += [b for b in _last_turn_call(session, messages, tools, objects) if b not in bodies]
    # the reasoning block: render the same turn with reasoning; if it is the text with a marker inserted,
    # what surrounds the marker up to the next control piece is an empty block the model does not write
    turn = dict(history[len(messages)])
    turn["reasoning_content"] = _REASON_MARK
    try:
        p1r = session.apply_template([*messages, turn, *history[len(messages) + 1 :]], tools)
    except LlamaCppError:
        p1r = ""
    with_reason, _ = _cut_call(p0, p1r, reply) if p1r else ("", "")
    at = with_reason.find(_REASON_MARK)
    if at >= 0 and text.startswith(with_reason[:at]):
        pieces = _PIECE.findall(with_reason[at + len(_REASON_MARK) :])
        close = next((i for i, pc in enumerate(pieces) if pc.strip()), None)
        if close is not None:
            empty = with_reason[:at] + "".join(pieces[: close + 1])
            bodies += [b[len(empty) :].lstrip() for b in list(bodies) if b.startswith(empty)]
    for b in bodies[1:]:
        if b.strip() and b not in out and b != text:
            out.append(b)
    return out


def _prefer_parsed(
    session: LlamaCppSession, messages: list[Message], tools: list[dict[str, Any]], call: dict[str, Any], ct: CallText
) -> CallText:
    """With a session that parses (not a bare prompt engine): the first of the text and its variants that
    llama.cpp's parser turns back into ``call`` (as is, or without the whitespace around it) becomes
    ``text``; the history rendering is kept in ``history_text``."""
    if not ct.variants or not callable(getattr(session, "parse_completion", None)):
        return ct
    fn = call.get("function") or {}
    args = fn.get("arguments")
    try:
        want = {"name": fn.get("name"), "arguments": json.loads(args) if isinstance(args, str) else args}
    except ValueError:
        return ct
    for cand in [ct.text, *ct.variants]:
        if any(
            call_matches(parse_call(session, messages, tools, t), want) for t in dict.fromkeys((cand, cand.strip()))
        ):
            if cand != ct.text:
                rest = [v for v in ct.variants if v != cand]
                return CallText(cand, ct.with_call, ct.content_none, ct.text, rest)
            return ct
    return ct


def _object_arguments(turn: Message) -> Message | None:
    """The turn with JSON-string call arguments decoded, as llama.cpp hands them to a template (None: no
    string arguments)."""
    calls = []
    changed = False
    for c in turn.get("tool_calls") or []:
        fn = dict(c.get("function") or {})
        if isinstance(fn.get("arguments"), str):
            try:
                fn["arguments"] = json.loads(fn["arguments"])
                changed = True
            except ValueError:
                pass
        calls.append({**c, "function": fn})
    return {**turn, "tool_calls": calls} if changed else None


def _last_turn_call(
    session: LlamaCppSession, messages: list[Message], tools: list[dict[str, Any]], turn: Message
) -> list[str]:
    """The call as the template writes it when the call turn is the LAST message, which is how llama.cpp's
    differential parser renders it (a template may write history calls differently, e.g. with the call id
    only when another turn follows). llama.cpp's /apply-template refuses a final assistant turn with tool
    calls, so jinja2 with Hugging Face semantics and llama.cpp's variables renders the three prompts."""
    from gguftpl.engines.transformers import TemplateRenderError, render_hf

    template = session.template_for(tools).text
    kw: dict[str, Any] = {
        "tools": tools,
        "bos_token": session.bos_token,
        "eos_token": session.eos_token,
        "date_string": llamacpp_date_string(),
        "enable_thinking": True,
    }
    try:
        gen = render_hf(template, messages, add_generation_prompt=True, **kw)
        last = render_hf(template, [*messages, turn], add_generation_prompt=False, **kw)
        reply = render_hf(
            template, [*messages, {"role": "assistant", "content": _REPLY_MARK}], add_generation_prompt=False, **kw
        )
    except (TemplateRenderError, LlamaCppError):
        return []
    return [b for b in dict.fromkeys(_cut_call(gen, last, reply)) if b.strip()]


def _tool_result_for(call: dict[str, Any]) -> Message:
    from gguftpl.templates import probes

    name = str((call.get("function") or {}).get("name", ""))
    return {"role": "tool", "tool_call_id": call.get("id", probes.CANARY_CALL_ID), "name": name, "content": "ok"}


_PIECE = re.compile(
    r"<\|[^<>\s]{0,40}?\|>|<｜[^<>]{0,40}?｜>|<\|\w+>|<\w+\|>|</?[A-Za-z_][\w:.\-]*(?:=[^<>\s]*)?>"
    r"|\[/?[A-Z_]+\]|\w+|\s|.",
    re.DOTALL,
)
_CONTROL_END = re.compile(r"(?:<\|[^<>|\s]{1,48}\|>|<｜[^<>｜]{1,48}｜>|<\|\w{1,48}>|<\w{1,48}\|>|</s>)\s*$")


def _common_pieces(a: list[str], b: list[str]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _cut_call(gen_prompt: str, with_call: str, with_reply: str) -> tuple[str, str]:
    """The call text, and the same before a trailing control marker was taken for the end of turn."""
    pg, pc, pr = _PIECE.findall(gen_prompt), _PIECE.findall(with_call), _PIECE.findall(with_reply)
    start = _common_pieces(pg, pc)
    # the generation prompt may differ earlier (a system note only it carries) yet end with the same header
    # the history turn starts with: drop that overlap, the model does not write its own header
    rest = pg[start:]
    for k in range(min(len(rest), len(pc) - start), 0, -1):
        if rest[-k:] == pc[start : start + k] and "".join(rest[-k:]).strip():
            start += k
            break
    # the conversation after the turn is the same in both renders: trim the common tail
    tail = _common_pieces(pc[::-1], pr[::-1])
    body = "".join(pc[start : max(start, len(pc) - tail)])
    reply = "".join(pr[: len(pr) - tail])
    at = reply.find(_REPLY_MARK)
    eot = reply[at + len(_REPLY_MARK) :] if at >= 0 else ""
    if eot and body.endswith(eot):
        return body[: -len(eot)], body[: -len(eot)]
    # an end-of-turn the plain reply does not share (e.g. <|eom_id|> after a call): a control marker
    return _CONTROL_END.sub("", body), body


def arg_values(args: Any) -> list[Any]:
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return [args]
    if isinstance(args, dict):
        return [v for v in args.values() if isinstance(v, (str, int, float)) and str(v)]
    return []


ParseAttempt = tuple[Any, Any, Any]
"""(parsed message or None, its first call's arguments, error or None)."""


def parse_call(s: LlamaCppSession, msgs: list[Message], tools: list[dict[str, Any]], text: str) -> ParseAttempt:
    try:
        parsed = s.parse_completion(msgs, tools, text)
    except LlamaCppError as exc:
        return None, None, exc
    calls = parsed.get("tool_calls") or []
    args: Any = None
    if calls:
        raw = (calls[0].get("function") or {}).get("arguments")
        try:
            args = json.loads(raw) if isinstance(raw, str) else raw
        except ValueError:
            args = raw
    return parsed, args, None


def call_matches(attempt: ParseAttempt, fn: dict[str, Any]) -> bool:
    parsed, args, error = attempt
    if error is not None or parsed is None:
        return False
    calls = parsed.get("tool_calls") or []
    return len(calls) == 1 and (calls[0].get("function") or {}).get("name") == fn["name"] and args == fn["arguments"]
