"""``verify --live``: the real weights answer a tools request, and what reaches the client is judged.

Stages 1–5 prove the template and llama.cpp's parser with a call gguftpl writes itself. Here the model writes
it (temperature 0, bounded tokens and time, in the child of :mod:`gguftpl.engines.llamacpp_child`), and the
stage's ``outcome`` says what a client of llama-server would get:

- ``parsed_call``: llama.cpp returned ``tool_calls``. With a dispatcher (``--mcp``) the call is run, its result
  goes into a second turn, and the stage shows whether the final answer uses it.
- ``unparsed_call``: the model wrote a call that llama.cpp did not parse; the shape it wrote (a ```json fence,
  bare JSON, …: :mod:`gguftpl.verify.callshape`) and the shape this template's parser expects (the canary call
  as the template itself writes it, :mod:`gguftpl.verify.calltext`) are both shown.
- ``no_call``: the model answered without calling; the stage says whether the tools were in the prompt, and
  whether the answer claims no result (an honest "I can't") or it is unclear.
- ``invented_result``: no parsed call, and the answer claims a result no tool returned: a result block, a run
  narrated, a value nobody returned (:mod:`gguftpl.verify.invented`). Every final answer after a tool ran is
  judged the same way, against what the tool really returned.
- ``no_answer``: the generation overran its time limit or llama.cpp failed: nothing to judge.

The canary tool answers with a fresh random marker per run (:mod:`gguftpl.verify.canarytools`): without a
dispatcher of the user's (``--mcp``) gguftpl runs a parsed canary call itself, so the final-answer check names
the marker. Every judging decision is a pure function of the stage's ``data`` (the generations, what the tools
returned, the marker): :func:`rejudge` repeats them without the model.

When the answer holds no parsed call, the request is repeated with ``tool_choice=required`` (llama.cpp then
constrains the output with a grammar for the formats it can) and the stage reports what that changed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gguftpl.engines.llamacpp_session import LlamaCppSession, Message
from gguftpl.errors import GGUFTplError, LlamaCppError
from gguftpl.verify.callshape import FoundCall, find_call
from gguftpl.verify.invented import INVENTED, Claim, judge_claims, named_pieces
from gguftpl.verify.result import FAIL, PASS, Stage, excerpt

STAGE_LIVE = "live"
PARSED_CALL, UNPARSED_CALL, NO_CALL, NO_ANSWER = "parsed_call", "unparsed_call", "no_call", "no_answer"
INVENTED_RESULT = "invented_result"
OUTCOMES = (PARSED_CALL, UNPARSED_CALL, NO_CALL, NO_ANSWER, INVENTED_RESULT)
DEFAULT_MAX_TOKENS = 192
"""Enough for a call with a few arguments and a sentence around it."""
DEFAULT_TIMEOUT = 300.0
"""Seconds one generation may take (a 0.5B model writes a few tokens a second on two busy cores)."""

Progress = Callable[[str], None]


def canary_ask() -> str:
    """The user message of the canary request: it needs the canary tool."""
    from gguftpl.templates import probes

    return f"Look up the record with key {probes.CANARY_ARG_VALUE}."


@dataclass(frozen=True)
class LiveOptions:
    """How ``verify --live`` asks the model."""

    ask: str | None = None
    """The user's message with the user's own tools (``--ask``); None: the canary tool and :func:`canary_ask`."""
    max_tokens: int = DEFAULT_MAX_TOKENS
    timeout: float = DEFAULT_TIMEOUT
    """Seconds the whole live stage may take: the answer, the ``tool_choice=required`` retry and the second turn
    share them (each generation gets what is left); past it the child is ended with the session."""
    try_required: bool = True
    """Ask again with ``tool_choice=required`` when the answer holds no parsed call."""
    threads: int | None = None
    """CPU threads for llama.cpp (None: one per core). On a machine busy with other work, 1 can be several times
    faster: llama.cpp's threads wait for each other at every step."""
    marker: str | None = None
    """The canary tool's marker (None: a fresh random one per run; give one to compare two runs)."""
    probes: tuple[str, ...] = ()
    """Further live conversations, each its own stage (:data:`gguftpl.verify.liveprobes.PROBES`)."""


@dataclass
class Generation:
    """One answer of the model, as llama.cpp returned it to the client."""

    message: Message
    finish_reason: str | None
    tokens: int | None
    seconds: float
    error: str | None = None
    timeout: float | None = None
    """The seconds this generation was given (what was left of the live stage's one budget); None: no limit."""

    @property
    def text(self) -> str:
        return str(self.message.get("content") or "")

    @property
    def calls(self) -> list[dict[str, Any]]:
        return list(self.message.get("tool_calls") or [])

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Generation:
        """A generation as :meth:`to_dict` recorded it (to judge it again without the model)."""
        return cls(
            dict(d.get("message") or {}),
            d.get("finish_reason"),
            d.get("tokens"),
            d.get("seconds", 0.0),
            d.get("error"),
            d.get("timeout_s"),
        )

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"message": self.message, "finish_reason": self.finish_reason, "tokens": self.tokens}
        d["seconds"] = round(self.seconds, 2)
        if self.timeout is not None:
            d["timeout_s"] = round(self.timeout, 2)
        if self.error:
            d["error"] = self.error
        return d


def generate(
    s: LlamaCppSession,
    messages: list[Message],
    tools: list[dict[str, Any]] | None,
    options: LiveOptions,
    tool_choice: str | None = None,
    timeout: float | None = None,
    extra: dict[str, Any] | None = None,
) -> Generation:
    """The model's answer at temperature 0, at most ``max_tokens`` long and ``timeout`` seconds late (default:
    ``options.timeout``); ``extra`` goes into the request body (``parallel_tool_calls``)."""
    body: dict[str, Any] = {"messages": messages, "temperature": 0, "max_tokens": options.max_tokens, "seed": 0}
    body.update(extra or {})
    if tools:
        body["tools"] = tools
    if tool_choice:
        body["tool_choice"] = tool_choice
    from gguftpl.engines.llamacpp_child import ChildSession

    # only a child can be left behind when the time is up: in this process the wait is llama.cpp's
    limit = options.timeout if timeout is None else timeout
    given = limit if isinstance(s, ChildSession) else None
    t0 = time.perf_counter()
    try:
        res = s.chat_completion(body, timeout=limit) if isinstance(s, ChildSession) else s.chat_completion(body)
    except LlamaCppError as exc:
        return Generation({}, None, None, time.perf_counter() - t0, error=str(exc), timeout=given)
    seconds = time.perf_counter() - t0
    try:
        choice = res["choices"][0]
        usage = res.get("usage") or {}
        tokens = usage.get("completion_tokens")
        return Generation(dict(choice["message"]), choice.get("finish_reason"), tokens, seconds, timeout=given)
    except (KeyError, IndexError, TypeError):
        no_message = f"llama.cpp returned no message: {json.dumps(res)[:300]}"
        return Generation({}, None, None, seconds, error=no_message, timeout=given)


@dataclass(frozen=True)
class Judged:
    outcome: str
    found: FoundCall | None = None
    claim: Claim | None = None
    """For an answer without a parsed call: what it claims about results (:mod:`gguftpl.verify.invented`)."""


def judge(
    gen: Generation, tool_names: Sequence[str], *, returned: Sequence[str] = (), given: Sequence[str] = ()
) -> Judged:
    """The outcome of one answer: from the generation, the tools' names, what the tools ``returned`` so far and
    what the model was ``given`` (the user's request first, then the tools' schemas): no model needed."""
    if gen.error is not None:
        return Judged(NO_ANSWER)
    if gen.calls:
        return Judged(PARSED_CALL)
    found = find_call(gen.text, tool_names) or find_call(str(gen.message.get("reasoning_content") or ""), tool_names)
    rest = gen.text.replace(found.excerpt, "\n") if found is not None else gen.text
    claim = judge_claims(rest, returned=returned, given=given, tool_names=tool_names, call_written=found is not None)
    if claim.verdict == INVENTED:
        return Judged(INVENTED_RESULT, found, claim)
    return Judged(UNPARSED_CALL if found is not None else NO_CALL, found, claim)


def given_texts(ask: str, tools: Sequence[dict[str, Any]] | None) -> list[str]:
    """What the model was given, for :func:`judge`: the request, then the tools' schemas."""
    return [ask, json.dumps(list(tools or []), ensure_ascii=False)]


def live_stage(
    s: LlamaCppSession,
    tools: list[dict[str, Any]] | None = None,
    *,
    options: LiveOptions | None = None,
    dispatch: Callable[[str, dict[str, Any]], Any] | None = None,
    progress: Progress | None = None,
) -> Stage:
    """The live stage on a running session with the real weights. ``tools`` (OpenAI entries) come with
    ``options.ask``; without them the canary tool is asked for. ``dispatch(name, arguments)`` runs a parsed call
    (an MCP ``tools/call``) and returns its result (``.text``, ``.is_error``); with the canary tool and no
    dispatcher, gguftpl answers the canary call itself with the run's marker."""
    from gguftpl.templates import probes
    from gguftpl.verify.canarytools import canary_dispatcher, fresh_marker

    options = options or LiveOptions()
    say = progress or (lambda _msg: None)
    marker = None
    if not tools or options.ask is None:
        tools, ask = probes.canary_tools(), canary_ask()
        marker = options.marker or fresh_marker()
        dispatch = dispatch or canary_dispatcher(marker)
    else:
        ask = options.ask
    names = [str((t.get("function") or {}).get("name") or "") for t in tools]
    messages: list[Message] = [{"role": "user", "content": ask}]
    budget = Budget(options.timeout)
    say(f"live: {budget.describe(options.try_required, dispatch is not None)}")
    say(f"live: the model answers {ask!r} (at most {options.max_tokens} tokens)…")
    gen = generate(s, messages, tools, options, timeout=budget.left())
    given = given_texts(ask, tools)
    judged = judge(gen, names, given=given)
    say(f"live: {_done(gen)}: {judged.outcome}")
    data: dict[str, Any] = {"ask": ask, "tools": names, "generation": gen.to_dict(), "budget_s": options.timeout}
    data.update(given=given, marker=marker, tool_entries=tools)
    data["tools_in_prompt"] = _tools_in_prompt(s, messages, tools, names)
    if judged.claim is not None:
        data["claim"] = judged.claim.to_dict()
    evidence = _evidence(s, gen, judged, data, dispatch, messages, tools, options, say, budget)
    if judged.outcome not in (PARSED_CALL, NO_ANSWER) and options.try_required:
        if budget.spent():
            data["tool_choice_required"] = {"skipped": budget.spent_text()}
            evidence += f"\nnot asked again with tool_choice=required: {budget.spent_text()}"
        else:
            say(f"live: asking again with tool_choice=required ({budget.left():.0f} s of the budget left)…")
            evidence += "\n" + _required(s, messages, tools, names, options, judged, data, budget)
    summary = {"outcome": judged.outcome, "model_output": gen.text}
    if judged.found is not None:
        summary["call_shape"] = judged.found.shape
    data.update(summary)
    return Stage(STAGE_LIVE, PASS if judged.outcome == PARSED_CALL else FAIL, evidence, data, summary=summary)


MIN_LEFT = 1.0
"""Seconds of the budget below which no further generation is started."""


class Budget:
    """One time budget for the whole live stage, stated up front: every generation gets what is left of it."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._start = time.perf_counter()

    def left(self) -> float:
        return max(0.0, self.seconds - (time.perf_counter() - self._start))

    def spent(self) -> bool:
        return self.left() < MIN_LEFT

    def spent_text(self) -> str:
        used = time.perf_counter() - self._start
        return f"the live stage's {self.seconds:g} s budget is used up ({used:.1f} s so far)"

    def describe(self, retry: bool, second_turn: bool) -> str:
        parts = ["the answer", *(["a tool_choice=required retry"] if retry else [])]
        parts += ["the second turn"] if second_turn else []
        return f"one time budget of {self.seconds:g} s for the whole live stage ({', '.join(parts)} share it)"


def _done(gen: Generation) -> str:
    if gen.error is not None:
        return f"no answer after {gen.seconds:.1f} s"
    return f"{gen.tokens if gen.tokens is not None else '?'} tokens in {gen.seconds:.1f} s"


def _tools_in_prompt(s: LlamaCppSession, msgs: list[Message], tools: list[dict[str, Any]], names: list[str]) -> bool:
    try:
        prompt = s.apply_template(msgs, tools)
    except LlamaCppError:
        return False
    return all(n in prompt for n in names)


def _evidence(
    s: LlamaCppSession,
    gen: Generation,
    judged: Judged,
    data: dict[str, Any],
    dispatch: Callable[[str, dict[str, Any]], Any] | None,
    messages: list[Message],
    tools: list[dict[str, Any]],
    options: LiveOptions,
    say: Progress,
    budget: Budget | None = None,
) -> str:
    said = f"the model's answer ({_done(gen)}): {_quote(gen.text)}"
    if judged.outcome == NO_ANSWER:
        return (
            f"no answer from the model (the live stage's budget {options.timeout:g} s, {options.max_tokens} tokens): "
            f"{gen.error}"
        )
    if judged.outcome == PARSED_CALL:
        call = gen.calls[0].get("function") or {}
        text = f"the model called {call.get('name')}({call.get('arguments')}) and llama.cpp parsed it into tool_calls"
        if dispatch is not None and budget is not None and budget.spent():
            text += f"\nnot dispatched: {budget.spent_text()}"
        elif dispatch is not None:
            left = budget.left() if budget is not None else None
            text += "\n" + _second_turn(s, gen, dispatch, messages, tools, options, data, say, left)
        return text
    cut = " (cut at max tokens)" if gen.finish_reason == "length" else ""
    claimed = f"\nthe answer {judged.claim.describe()}" if judged.claim is not None else ""
    where = (
        "the tools were in the prompt"
        if data["tools_in_prompt"]
        else "the tools were not in the prompt (llama.cpp dropped them: the template never renders them)"
    )
    if judged.found is not None:
        found = judged.found
        expected = _expected_shape(s)
        data["expected"] = expected
        return (
            f"the model wrote a call to {found.name}({json.dumps(found.arguments, ensure_ascii=False)}) as "
            f"{found.describe()}, which llama.cpp did not parse: no tool_calls reach the client. "
            f"{expected['evidence']}{claimed}\n{said}{cut}"
        )
    if judged.outcome == INVENTED_RESULT:
        return f"the model called no tool, and no tool ran; {where}.{claimed}\n{said}{cut}"
    return f"the model answered without calling a tool; {where}.{claimed}\n{said}{cut}"


def _expected_shape(s: LlamaCppSession) -> dict[str, Any]:
    """The call format this template's parser takes: the canary call as the template itself writes it."""
    from gguftpl.templates import probes
    from gguftpl.templates.dialect import classify
    from gguftpl.verify.calltext import call_text_from_template

    try:
        ct = call_text_from_template(s, probes.tools_conversation(), probes.canary_tools(), probes.tool_call())
    except LlamaCppError as exc:
        return {"dialect": None, "call_text": "", "evidence": f"(the template's own call format is unknown: {exc})"}
    if not ct.text.strip():
        return {"dialect": "none", "call_text": "", "evidence": "This template writes no tool call at all."}
    dialect, _ = classify(ct.text)
    return {
        "dialect": dialect,
        "call_text": ct.text,
        "evidence": f"This template's parser expects the {dialect} format, as the template writes a call: {ct.text!r}",
    }


def _required(
    s: LlamaCppSession,
    messages: list[Message],
    tools: list[dict[str, Any]],
    names: list[str],
    options: LiveOptions,
    before: Judged,
    data: dict[str, Any],
    budget: Budget | None = None,
) -> str:
    left = budget.left() if budget is not None else None
    gen = generate(s, messages, tools, options, tool_choice="required", timeout=left)
    judged = judge(gen, names, given=data.get("given") or ())
    data["tool_choice_required"] = {"outcome": judged.outcome, "model_output": gen.text, "generation": gen.to_dict()}
    if judged.claim is not None:
        data["tool_choice_required"]["claim"] = judged.claim.to_dict()
    if judged.outcome == PARSED_CALL:
        call = gen.calls[0].get("function") or {}
        return (
            f"with tool_choice=required llama.cpp parsed {call.get('name')}({call.get('arguments')}): its grammar "
            "held the model to the template's format, so clients that send tool_choice=required get the call"
        )
    if judged.outcome == NO_ANSWER:
        return f"with tool_choice=required: no answer ({gen.error})"
    same = "the same answer" if gen.text == str(data["generation"]["message"].get("content") or "") else "an answer"
    shape = f" ({judged.found.describe()})" if judged.found is not None else ""
    return (
        f"with tool_choice=required: {same}{shape} and still no tool_calls ({judged.outcome}): llama.cpp did not "
        f"constrain this model's output to the template's format: {_quote(gen.text)}"
    )


def _second_turn(
    s: LlamaCppSession,
    gen: Generation,
    dispatch: Callable[[str, dict[str, Any]], Any],
    messages: list[Message],
    tools: list[dict[str, Any]],
    options: LiveOptions,
    data: dict[str, Any],
    say: Progress,
    left: float | None = None,
) -> str:
    """Run the parsed call, hand its result back, and see whether the final answer uses it (in the ``left``
    seconds of the live stage's budget)."""
    call = gen.calls[0]
    fn = call.get("function") or {}
    name = str(fn.get("name") or "")
    raw = fn.get("arguments")
    try:
        args = json.loads(raw) if isinstance(raw, str) else dict(raw or {})
    except ValueError:
        return f"not dispatched: the arguments are not JSON ({raw!r})"
    say(f"live: dispatching {name}…")
    try:
        result = dispatch(name, args)
    except GGUFTplError as exc:
        return f"not dispatched: {exc}"
    text = str(getattr(result, "text", result))
    call_id = str(call.get("id") or "call_0")
    turn = [
        *messages,
        {"role": "assistant", "content": gen.text, "tool_calls": [{**call, "id": call_id}]},
        {"role": "tool", "tool_call_id": call_id, "name": name, "content": text},
    ]
    say("live: the model answers with the tool result…")
    final = generate(s, turn, tools, options, timeout=left)
    data["dispatch"] = {"name": name, "arguments": args, "result": text}
    data["dispatch"]["is_error"] = bool(getattr(result, "is_error", False))
    data["final"] = judge_final(final, text, data.get("given") or (), [name])
    if final.error is not None:
        return f"dispatched {name}: {_quote(text)}; no final answer: {final.error}"
    return f"dispatched {name}: {_quote(text)}; the final answer {final_verdict(data['final'])}: {_quote(final.text)}"


def judge_final(final: Generation, result: str, given: Sequence[str], names: Sequence[str]) -> dict[str, Any]:
    """The final answer after a tool returned ``result``: which pieces of it the answer names, and what it
    claims beyond them (:mod:`gguftpl.verify.invented`)."""
    named = named_pieces(result, final.text, given)
    d: dict[str, Any] = {"generation": final.to_dict(), "uses_result": bool(named), "named": named}
    if final.error is None:
        claim = judge_claims(final.text, returned=[result], given=given, tool_names=names, call_written=True)
        d["claim"] = claim.to_dict()
    return d


def final_verdict(final: dict[str, Any]) -> str:
    """``uses the result (names …)`` or ``does not visibly use the result``, and an invented claim beside it."""
    named = final.get("named") or []
    text = f"uses the result (names {', '.join(named[:3])})" if named else "does not visibly use the result"
    claim = final.get("claim") or {}
    if claim.get("verdict") == INVENTED:
        text += " but claims a result no tool returned (" + "; ".join(claim.get("reasons") or []) + ")"
    return text


def _quote(text: str) -> str:
    return repr(excerpt(" ".join(text.split()), limit=300))


def rejudge(data: dict[str, Any]) -> dict[str, Any]:
    """The live stage's verdicts again, from its recorded ``data`` alone (no model): the outcome, the
    ``tool_choice=required`` retry's, and the final answer's (what it names, what it claims)."""
    names = [str(n) for n in data.get("tools") or []]
    given = data.get("given") or given_texts(str(data.get("ask") or ""), data.get("tool_entries"))
    first = judge(Generation.from_dict(data["generation"]), names, given=given)
    out: dict[str, Any] = {"outcome": first.outcome}
    if first.found is not None:
        out["call_shape"] = first.found.shape
    retry = data.get("tool_choice_required") or {}
    if "generation" in retry:
        out["tool_choice_required"] = judge(Generation.from_dict(retry["generation"]), names, given=given).outcome
    final, dispatched = data.get("final"), data.get("dispatch")
    if final and dispatched:
        gen = Generation.from_dict(final["generation"])
        out["final"] = judge_final(gen, str(dispatched["result"]), given, [str(dispatched.get("name") or "")])
    return out
