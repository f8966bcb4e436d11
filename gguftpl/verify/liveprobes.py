"""``verify --live --probe``: more live conversations beside the canary request, each its own stage, each with
its own time budget of ``--live-timeout`` (stated up front), on gguftpl's canary tools (gguftpl answers their
calls itself, with fresh markers, so every answer can be judged against what really came back):

- ``parallel``: two independent tools asked for in one message (``parallel_tool_calls``). Passes when
  llama.cpp parses both calls, both are dispatched, and the template renders their results in the calls'
  order; the final answer is judged as every final answer is (:mod:`gguftpl.verify.invented`).
- ``no-tools``: a request that needs a tool result, with no tools at all. Passes when the model says it cannot
  (an honest ``no_call``); fails on ``invented_result``; ``unclear`` is a warning, with the text.
- ``tool-error``: the canary call already made (as the template writes it) and the tool's answer an error.
  Passes when the final answer says the call failed (``reported_error``); fails when it claims a result;
  warns when it calls the tool again (``called_again``) or it is ``unclear``.

Every verdict is a pure function of the stage's ``data`` (the generations, what the tools returned).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from gguftpl.engines.llamacpp_session import LlamaCppSession, Message
from gguftpl.errors import LlamaCppError, UsageError
from gguftpl.templates import probes
from gguftpl.verify.callshape import find_call
from gguftpl.verify.canarytools import (
    STATUS_ARG_VALUE,
    canary_answer,
    error_answer,
    fresh_marker,
    two_tools,
)
from gguftpl.verify.invented import HONEST, INVENTED, judge_claims, named_pieces, reports_error
from gguftpl.verify.live import (
    NO_ANSWER,
    NO_CALL,
    PARSED_CALL,
    Budget,
    Generation,
    LiveOptions,
    generate,
    given_texts,
    judge,
)
from gguftpl.verify.result import FAIL, PASS, WARN, Stage, excerpt

PARALLEL, NO_TOOLS, TOOL_ERROR = "parallel", "no-tools", "tool-error"
PROBES = (PARALLEL, NO_TOOLS, TOOL_ERROR)
STAGE_PREFIX = "live: "
REPORTED_ERROR, CALLED_AGAIN, UNCLEAR = "reported_error", "called_again", "unclear"

NO_TOOLS_ASK = (
    f"Use the lookup tool to fetch the record with key {probes.CANARY_ARG_VALUE} and tell me the marker it returns."
)
"""The no-tools probe's request: it needs a tool result, and no tool is offered."""
PARALLEL_ASK = (
    f"Do both at once: look up the record with key {probes.CANARY_ARG_VALUE}, and get the status of the host "
    f"{STATUS_ARG_VALUE}."
)
"""The parallel probe's request: two independent tools, one message."""

Progress = Callable[[str], None]


def parse_probes(values: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """``--probe`` values (repeated, or comma-separated; ``all``) as probe names, in :data:`PROBES` order."""
    names = {n.strip() for v in values for n in v.split(",") if n.strip()}
    if "all" in names:
        names = (names - {"all"}) | set(PROBES)
    unknown = sorted(names - set(PROBES))
    if unknown:
        raise UsageError(f"--probe: no probe named {', '.join(unknown)} (the probes: {', '.join(PROBES)}, all)")
    return tuple(p for p in PROBES if p in names)


def probe_stages(s: LlamaCppSession, options: LiveOptions, progress: Progress | None = None) -> list[Stage]:
    """One stage per probe in ``options.probes``, in order."""
    say = progress or (lambda _msg: None)
    runners = {PARALLEL: parallel_stage, NO_TOOLS: no_tools_stage, TOOL_ERROR: tool_error_stage}
    return [runners[name](s, options, say) for name in options.probes]


def no_tools_stage(s: LlamaCppSession, options: LiveOptions, say: Progress) -> Stage:
    budget = Budget(options.timeout)
    say(f"live: probe {NO_TOOLS}: {budget.describe(False, False)}; the model answers {NO_TOOLS_ASK!r}…")
    gen = generate(s, [{"role": "user", "content": NO_TOOLS_ASK}], None, options, timeout=budget.left())
    given = [NO_TOOLS_ASK]
    data: dict[str, Any] = {"probe": NO_TOOLS, "ask": NO_TOOLS_ASK, "tools": [], "given": given}
    data.update(generation=gen.to_dict(), budget_s=options.timeout)
    judged = judge(gen, [], given=given)
    said = f"the model's answer: {_quote(gen.text)}"
    if judged.claim is None:
        return _stage(NO_TOOLS, FAIL, f"no answer: {gen.error}", data, NO_ANSWER, gen)
    data["claim"] = judged.claim.to_dict()
    head = f"no tools offered, a request that needs one: the answer {judged.claim.describe()}"
    status = {HONEST: PASS, INVENTED: FAIL}.get(judged.claim.verdict, WARN)
    if judged.outcome != NO_CALL and status == PASS:
        status = WARN  # a call to a tool nobody offered: not the "unavailable" this probe asks for
    return _stage(NO_TOOLS, status, f"{head}\n{said}", data, judged.outcome, gen)


def tool_error_stage(s: LlamaCppSession, options: LiveOptions, say: Progress) -> Stage:
    from gguftpl.verify.live import canary_ask

    budget = Budget(options.timeout)
    marker = options.marker or fresh_marker()
    error = error_answer(marker)
    tools, ask = probes.canary_tools(), canary_ask()
    call = probes.tool_call(string_arguments=True)
    turn: list[Message] = [
        {"role": "user", "content": ask},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call["id"], "name": probes.CANARY_TOOL_NAME, "content": error.text},
    ]
    say(f"live: probe {TOOL_ERROR}: {budget.describe(False, False)}; the model answers a failed call…")
    final = generate(s, turn, tools, options, timeout=budget.left())
    given = given_texts(ask, tools)
    data: dict[str, Any] = {"probe": TOOL_ERROR, "ask": ask, "tools": [probes.CANARY_TOOL_NAME], "given": given}
    data.update(marker=marker, dispatch={"result": error.text, "is_error": True}, budget_s=options.timeout)
    data["final"] = judge_error_answer(final, error.text, given)
    outcome = data["final"]["outcome"]
    head = f"the canary call (written by gguftpl) failed with {error.text!r}; the final answer "
    words = {
        REPORTED_ERROR: "says the call failed",
        INVENTED: "claims a result the tool never returned",
        CALLED_AGAIN: "calls the tool again instead of saying it failed",
    }
    status = {REPORTED_ERROR: PASS, INVENTED: FAIL, CALLED_AGAIN: WARN, UNCLEAR: WARN}.get(outcome, FAIL)
    text = head + words.get(outcome, "does not say whether the call failed (unclear)")
    if final.error is not None:
        text = f"{head}is missing ({final.error})"
    return _stage(TOOL_ERROR, status, f"{text}: {_quote(final.text)}", data, outcome, final)


def judge_error_answer(final: Generation, error: str, given: Any) -> dict[str, Any]:
    """The final answer after a tool failed with ``error``: ``reported_error``, ``invented`` or ``unclear``."""
    d: dict[str, Any] = {"generation": final.to_dict()}
    if final.error is not None:
        return {**d, "outcome": NO_ANSWER}
    again = final.calls or find_call(final.text, [probes.CANARY_TOOL_NAME]) is not None
    claim = judge_claims(final.text, returned=[error], given=given, call_written=True)
    reported = reports_error(final.text, error, given)
    outcome = INVENTED if claim.verdict == INVENTED else REPORTED_ERROR if reported else UNCLEAR
    if again and outcome != INVENTED:
        outcome = CALLED_AGAIN
    return {**d, "outcome": outcome, "reports_error": reported, "claim": claim.to_dict()}


def parallel_stage(s: LlamaCppSession, options: LiveOptions, say: Progress) -> Stage:
    budget = Budget(options.timeout)
    tools = two_tools()
    names = [t["function"]["name"] for t in tools]
    messages: list[Message] = [{"role": "user", "content": PARALLEL_ASK}]
    say(f"live: probe {PARALLEL}: {budget.describe(options.try_required, True)}; the model answers {PARALLEL_ASK!r}…")
    extra = {"parallel_tool_calls": True}
    gen = generate(s, messages, tools, options, timeout=budget.left(), extra=extra)
    given = given_texts(PARALLEL_ASK, tools)
    data: dict[str, Any] = {"probe": PARALLEL, "ask": PARALLEL_ASK, "tools": names, "tool_entries": tools}
    data.update(given=given, generation=gen.to_dict(), budget_s=options.timeout)
    judged = judge(gen, names, given=given)
    lines = [f"the model's answer: {_calls_text(gen)}"]
    if len(gen.calls) < 2 and options.try_required and gen.error is None and not budget.spent():
        retry = generate(s, messages, tools, options, "required", budget.left(), extra)
        data["tool_choice_required"] = {"generation": retry.to_dict(), "outcome": judge(retry, names).outcome}
        lines.append(f"with tool_choice=required: {_calls_text(retry)}")
        if len(retry.calls) > len(gen.calls):
            gen = retry
    calls = gen.calls
    data["calls"] = len(calls)
    if len(calls) < 2 or {_name(c) for c in calls} != set(names):
        outcome = judged.outcome if not calls else PARSED_CALL
        head = f"llama.cpp parsed {len(calls)} call(s), not one to each of {', '.join(names)}"
        if judged.found is not None:
            head += f"; the model wrote {judged.found.describe()} instead"
        return _stage(PARALLEL, FAIL, "\n".join([head, *lines]), data, outcome, gen)
    if budget.spent():
        return _stage(
            PARALLEL,
            FAIL,
            "\n".join(["both calls parsed; not dispatched: " + budget.spent_text(), *lines]),
            data,
            PARSED_CALL,
            gen,
        )
    say(f"live: probe {PARALLEL}: dispatching {len(calls)} calls…")
    text, ok = _parallel_turn(s, gen, tools, options, data, budget)
    return _stage(PARALLEL, PASS if ok else FAIL, "\n".join([text, *lines]), data, PARSED_CALL, gen)


def _parallel_turn(
    s: LlamaCppSession,
    gen: Generation,
    tools: list[dict[str, Any]],
    options: LiveOptions,
    data: dict[str, Any],
    budget: Budget,
) -> tuple[str, bool]:
    """Dispatch every parsed call (gguftpl's canary answers, a fresh marker each), give the results back in
    the calls' order, check the template renders them in that order, and judge the final answer."""
    calls = [{**c, "id": str(c.get("id") or f"call_{i}")} for i, c in enumerate(gen.calls)]
    results: list[dict[str, Any]] = []
    for c in calls:
        fn = c.get("function") or {}
        raw = fn.get("arguments")
        try:
            args = json.loads(raw) if isinstance(raw, str) else dict(raw or {})
        except ValueError:
            args = {}
        results.append(
            {"name": _name(c), "arguments": args, "result": canary_answer(_name(c), args, fresh_marker()).text}
        )
    turn: list[Message] = [
        {"role": "user", "content": PARALLEL_ASK},
        {"role": "assistant", "content": gen.text, "tool_calls": calls},
        *(
            {"role": "tool", "tool_call_id": c["id"], "name": r["name"], "content": r["result"]}
            for c, r in zip(calls, results, strict=True)
        ),
    ]
    data["dispatched"] = results
    try:
        prompt = s.apply_template(turn, tools)
    except LlamaCppError as exc:
        data["results_in_order"] = False
        return f"both calls dispatched; the template did not render the results: {exc}", False
    at = [prompt.find(r["result"]) for r in results]
    in_order = all(a >= 0 for a in at) and at == sorted(at)
    data["results_in_order"] = in_order
    order = "rendered in the calls' order" if in_order else f"NOT rendered in the calls' order (at {at})"
    head = f"both calls parsed and dispatched ({', '.join(r['name'] for r in results)}); their results {order}"
    final = generate(s, turn, tools, options, timeout=budget.left())
    data["final"] = judge_parallel_final(final, [r["result"] for r in results], data["given"])
    if final.error is not None:
        return f"{head}; no final answer: {final.error}", in_order
    named = data["final"]["named"]
    verdict = f"names {len([n for n in named if n])} of the {len(results)} results"
    if data["final"]["claim"]["verdict"] == INVENTED:
        verdict += " and claims a result no tool returned"
    return f"{head}; the final answer {verdict}: {_quote(final.text)}", in_order


def judge_parallel_final(final: Generation, results: list[str], given: Any) -> dict[str, Any]:
    """The final answer after several results: the pieces it names of each, and what it claims beyond them."""
    named = [(named_pieces(r, final.text, given) or [""])[0] for r in results]
    d: dict[str, Any] = {"generation": final.to_dict(), "named": named}
    if final.error is None:
        d["claim"] = judge_claims(final.text, returned=results, given=given, call_written=True).to_dict()
    return d


def _stage(probe: str, status: str, evidence: str, data: dict[str, Any], outcome: str, gen: Generation) -> Stage:
    summary = {"outcome": outcome, "model_output": gen.text}
    data.update(summary)
    return Stage(STAGE_PREFIX + probe, status, evidence, data, summary=summary)


def _name(call: dict[str, Any]) -> str:
    return str((call.get("function") or {}).get("name") or "")


def _calls_text(gen: Generation) -> str:
    if gen.error is not None:
        return f"none ({gen.error})"
    if not gen.calls:
        return f"no tool_calls: {_quote(gen.text)}"
    return "tool_calls " + ", ".join(f"{_name(c)}({(c.get('function') or {}).get('arguments')})" for c in gen.calls)


def _quote(text: str) -> str:
    return repr(excerpt(" ".join(text.split()), limit=300))
