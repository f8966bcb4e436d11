"""``gguftpl verify FILE``: does tool calling survive llama.cpp itself? A trace of stages, each PASS, FAIL
or SKIP with its evidence, from llama.cpp's own engine and parser (xllamacpp, in-process, 127.0.0.1).

Exit codes: 0 every stage passed; 1 a stage failed; 2 usage error, unreadable file, or llama.cpp missing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from gguftpl.cli.modelarg import LOCAL_MODEL
from gguftpl.cli.output import StderrProgress, colour_fixes, echo, echo_json, output_width, width_option
from gguftpl.cli.tool_options import (
    open_from_options,
    pop_tool_check_options,
    pop_tool_source_options,
    tool_check_options,
    tool_source_options,
    wants_tools,
)
from gguftpl.cli.verify_evidence import (
    check_options,
    evidence_options,
    pop_evidence_options,
    record_live,
    recording_live,
    run_counterfactual,
    run_replay,
)

DEFAULT_MAX_TOKENS = 192
"""Mirrors gguftpl.verify.live.DEFAULT_MAX_TOKENS (not imported: --help stays light)."""
DEFAULT_TIMEOUT = 300.0
_MARK = {"pass": "PASS", "fail": "FAIL", "skip": "SKIP", "warn": "WARN"}
_COLOR = {"pass": "green", "fail": "red", "skip": "yellow", "warn": "yellow"}


@click.command("verify")
@click.argument("file", type=LOCAL_MODEL, required=False)
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True, help="Output format."
)
@click.option(
    "--load-weights",
    is_flag=True,
    help="Load the real file into llama.cpp instead of a stand-in (the file's tokenizer on a zero-weight body).",
)
@click.option(
    "--live",
    is_flag=True,
    help="Let the real weights answer a tools request (implies --load-weights; the model runs in a child process) "
    "and report what reached the client: parsed_call, unparsed_call, no_call or invented_result.",
)
@click.option(
    "--ask",
    metavar="MESSAGE",
    help="--live with --tools/--mcp: the user message the model answers with your tools (default: the canary "
    "tool and a request that needs it).",
)
@click.option(
    "--max-tokens",
    type=click.IntRange(1, 8192),
    default=DEFAULT_MAX_TOKENS,
    show_default=True,
    help="--live: tokens the model may write per answer.",
)
@click.option(
    "--live-timeout",
    type=click.FloatRange(1.0),
    default=DEFAULT_TIMEOUT,
    show_default=True,
    help="--live: seconds for the whole live stage, stated up front: the answer, the tool_choice=required retry "
    "and the second turn share them (then the model's process is ended).",
)
@click.option(
    "--threads",
    type=click.IntRange(1, 1024),
    help="--live: CPU threads for llama.cpp (default: one per core; on a busy machine 1 can be faster).",
)
@click.option(
    "--no-required-retry",
    is_flag=True,
    help="--live: do not ask again with tool_choice=required when the answer holds no parsed call.",
)
@click.option(
    "--probe",
    "probe",
    multiple=True,
    metavar="NAME[,NAME]",
    help="--live: also run these live probes, each its own stage with its own --live-timeout: parallel (two "
    "independent tools in one message), no-tools (a request that needs a tool, none offered), tool-error (a tool "
    "that fails: does the answer say so); all: every one.",
)
@tool_source_options
@tool_check_options
@evidence_options
@click.option(
    "--with-data",
    is_flag=True,
    help="JSON: add each stage's data (per-tool token costs, missing schema items, prompts, parsed calls).",
)
@width_option
def command(file: str | None, fmt: str, load_weights: bool, with_data: bool = False, **kwargs: Any) -> None:
    """Verify tool calling through llama.cpp itself: which template it picks, whether a canary tool's schema
    reaches the prompt, whether a call written in the template's own dialect is parsed back, whether the tool
    result renders in the next turn, and whether llama.cpp and transformers render the same prompt.

    With --tools/--mcp/--mcp-url, the tools you really run are checked too (schema reach, context budget,
    one round trip). Needs xllamacpp: pip install 'gguftpl[llamacpp]'.

    With --live the model itself answers (temperature 0, --max-tokens, --live-timeout): a last stage says
    whether llama.cpp returned tool_calls (parsed_call), the model wrote a call llama.cpp did not parse
    (unparsed_call: which shape it wrote, which shape the template expects), it answered without one
    (no_call: were the tools in the prompt?) or it claimed a result no tool returned (invented_result). Only
    parsed_call passes. --probe adds more conversations (parallel, no-tools, tool-error), each a stage.

    --counterfactual (with --live and --from-hub, --from-catalog or --template) proves a repair: the same
    weights, seed and settings on the file and on its repaired copy (made as `patch` makes it, removed after),
    one table stage by stage. --record DIR keeps the evidence as files; --replay DIR judges it again.

    Exit status: 0 all stages passed, 1 a stage failed, 2 error.
    """
    from gguftpl.engines.llamacpp_session import require_xllamacpp
    from gguftpl.errors import UsageError
    from gguftpl.verify.stages import verify_file
    from gguftpl.verify.tools import parse_arguments_json

    live_keys = ("live", "ask", "max_tokens", "live_timeout", "threads", "no_required_retry", "probe")
    live_opts = {k: kwargs.pop(k) for k in live_keys}
    ev = pop_evidence_options(kwargs)
    check_options(ev, live_opts["live"], file)
    if ev["replay"] is not None:
        run_replay(ev["replay"], fmt, _text)
    assert file is not None
    source_opts = pop_tool_source_options(kwargs)
    check_opts = pop_tool_check_options(kwargs)
    if not wants_tools(source_opts) and (check_opts.get("call") or check_opts.get("call_args")):
        # without tools of the user's own, the canary tool is called: --call/--args would be ignored silently
        raise UsageError("--call and --args choose one of your tools: give them with --tools, --mcp or --mcp-url")
    if live_opts["ask"] is not None and not (live_opts["live"] and wants_tools(source_opts)):
        raise UsageError("--ask is the message for --live with your own tools (--tools, --mcp or --mcp-url)")
    live_opts["probe"] = _probes(live_opts)
    require_xllamacpp()
    args = parse_arguments_json(check_opts["call_args"]) if check_opts.get("call_args") else None
    if args is not None and not isinstance(args, dict):
        raise UsageError("--args must be a JSON object")
    sources = open_from_options(source_opts)
    try:
        tools = sources.tools if sources is not None else None
        dispatch = None
        if sources is not None and tools:
            from gguftpl.verify.roundtrip import pick_tool

            dispatch = sources.dispatcher_for(pick_tool(tools, check_opts.get("call")))
        # the live stage's steps (loading, the model answering, a retry) as a status line on a terminal's
        # stderr; nothing in a pipe: what happened is in the report
        with StderrProgress("verify") as progress:
            live = _live_run(live_opts, sources, progress.status) if live_opts["live"] else None
            if ev["counterfactual"]:
                run_counterfactual(file, live, tools, ev, fmt)
            if ev["record"]:
                live, calls, mark = recording_live(live, ev)
            result = verify_file(
                file,
                load_weights=load_weights,
                tools=tools,
                dispatch=dispatch,
                call=check_opts.get("call"),
                arguments=args,
                max_tool_share=check_opts.get("max_tool_share"),
                live=live,
            )
            if ev["record"]:
                ev["record"] = record_live(file, live, calls, mark, result, dict(ev, _tools=tools))
    finally:
        if sources is not None:
            sources.close()
    _report(file, result, fmt, with_data, ev["record"])


def _report(file: str, result: Any, fmt: str, with_data: bool, record: str | None) -> None:
    """The report of one verification, with the file's runtime view and repair; exits 0 all passed, else 1."""
    from gguftpl.cli.modelarg import store_model

    store = store_model(file)
    if store is not None:  # the reference the user gave, not the blob's hash
        import dataclasses

        result = dataclasses.replace(result, path=store.ref)
    audited = _file_audit(file)
    view = audited.runtimes if audited is not None else None
    repair = audited.repair if audited is not None else None
    own = audited.upstream_own if audited is not None else None
    if fmt == "json":
        data = result.to_dict(with_data=with_data)
        if view is not None:
            data["runtimes"] = view.to_list()
        if repair is not None:
            data["repair"] = repair.to_dict()
        if record:
            data["record"] = record
        echo_json(data)
    else:
        recorded = f"\nrecorded: {record}" if record else ""
        from gguftpl.safeio import terminal_text

        echo(colour_fixes(terminal_text(_text(result, view, repair, own) + recorded, keep_sgr=True)), color=None)
    raise SystemExit(0 if result.ok else 1)


def _file_audit(path: str) -> Any:
    """The file's audit (template facts cached on disk), for its runtime view (``gguftpl.runtimes.view``) and its
    one repair (``gguftpl.repair``); None when the file could not be audited (verify has said why). Every
    installed engine is asked: each row is its own runtime's engine's answer."""
    from gguftpl.audit import AuditOptions, audit_file
    from gguftpl.auditcache import AnalysisCache
    from gguftpl.cli.modelarg import store_model

    store = store_model(path)
    label = store.ref if store is not None else None
    fa = audit_file(path, AuditOptions(select=("GT7",)), label=label, cache=AnalysisCache.on_disk(), store=store)
    return fa if fa.runtimes is not None else None


def _probes(opts: dict[str, Any]) -> tuple[str, ...]:
    """``--probe`` as probe names (a usage error without ``--live`` or for a name no probe has)."""
    if not opts["probe"]:
        return ()
    from gguftpl.errors import UsageError
    from gguftpl.verify.liveprobes import parse_probes

    if not opts["live"]:
        raise UsageError("--probe runs with --live: the probes are the model's own answers")
    return parse_probes(opts["probe"])


def _live_run(opts: dict[str, Any], sources: Any, progress: Callable[[str], None]) -> Any:
    from gguftpl.verify.live import LiveOptions
    from gguftpl.verify.stages import LiveRun

    options = LiveOptions(
        ask=opts["ask"],
        max_tokens=opts["max_tokens"],
        timeout=opts["live_timeout"],
        try_required=not opts["no_required_retry"],
        threads=opts["threads"],
        probes=tuple(opts["probe"] or ()),
    )
    dispatch = None
    if sources is not None and sources.has_servers and opts["ask"] is not None:

        def dispatch(name: str, arguments: dict[str, Any]) -> Any:
            from gguftpl.errors import ToolSourceError

            tool = next((t for t in sources.tools if t.name == name), None)
            if tool is None:
                raise ToolSourceError(f"the model called {name!r}, which is none of the tools offered")
            return sources.dispatch(tool, arguments)

    return LiveRun(options, dispatch, progress=progress)


def _text(result: Any, view: Any = None, repair: Any = None, upstream_own: Any = None) -> str:
    from gguftpl.safeio import printable
    from gguftpl.verify.result import CORE_STAGES, INCOMPLETE, SKIP

    if result.load_weights:
        how = "real weights"
    elif result.standin is not None:
        how = f"stand-in: the file's tokenizer ({result.standin['vocab']}, {result.standin['n_vocab']} tokens)"
    else:
        how = "stand-in"
    t = result.timings.get("total_s")
    if t is not None:
        how += f", {t:.1f} s"
    from gguftpl.templates.probes import CANARY_LEGEND, quotes_canary

    lines = [f"{printable(result.path)}: llama.cpp (xllamacpp, {how})"]
    told = False
    for i, st in enumerate(result.stages, 1):
        mark = click.style(_MARK.get(st.status, st.status.upper()), fg=_COLOR.get(st.status), bold=True)
        num = f"{i}." if st.name in CORE_STAGES else "  "
        lines.append(f"  {mark} {num} {st.name}")
        for ev_line in st.evidence.splitlines() or [""]:
            lines.append(f"          {printable(ev_line)}")
        if not told and quotes_canary(st.evidence):  # said once, under the first stage that quotes them
            lines.append(f"          note: {CANARY_LEGEND}")
            told = True
    if view is not None:
        lines += _runtime_lines(view)
    if view is not None:
        from gguftpl.repair import verdict_line

        lines.append(f"verdict: {verdict_line(view, upstream_own)}")
    failed = [s.name for s in result.stages if not s.ok]
    if failed:
        lines.append(f"failed: {', '.join(failed)}")
    elif all(s.status == SKIP for s in result.stages):
        lines.append("nothing verified: every stage was skipped")
    else:
        lines.append("ok: every stage passed")
    if failed and result.template == INCOMPLETE:
        lines.append("repair: download the file again and compare its size (and sha256) with the one the repo lists")
    elif failed or (repair is not None and repair.needed):
        lines.append(_repair_hint(result, repair))
    return "\n".join(lines)


def _runtime_lines(view: Any) -> list[str]:
    """Every runtime, from the audit of the file's templates (each judged by its own engine), laid out as the
    audit's text report lays them out: a row's reason goes on under its column, and when too few columns are left
    for it, each runtime on a line of its own with its reason below it."""
    from gguftpl.report.text import WHY_COLUMN_MIN
    from gguftpl.runtimes.rows import outcome_text
    from gguftpl.safeio import printable
    from gguftpl.textfit import fit_line

    rows = [(r.name, printable(r.template), outcome_text(r), printable(r.reason)) for r in view.rows]
    w1, w2, w3 = (max(len(r[i]) for r in rows) for i in range(3))
    why_at = 2 + w1 + 2 + w2 + 2 + w3 + 2
    width = output_width()
    out = ["runtimes, for a request with tools (from the audit of the file's templates, each by its own engine):"]
    if width - why_at < WHY_COLUMN_MIN:
        for name, template, tools, reason in rows:
            out += fit_line(f"  {name}, template {template}: tools {tools}", width, hang=6)
            out += fit_line(f"      {reason}", width, hang=6)
        return out
    for name, template, tools, reason in rows:
        out += fit_line(f"  {name:<{w1}}  {template:<{w2}}  {tools:<{w3}}  {reason}", width, hang=why_at)
    return out


def _live_hint(stage: Any) -> str | None:
    """When only the model failed, what to say instead of a template repair (None: the tools never reached
    the prompt, so the template repair below applies)."""
    outcome = stage.summary.get("outcome")
    if outcome == "unparsed_call":
        return (
            "the template and llama.cpp's parser pass; the model writes its calls in another shape than the "
            "template teaches, so no template repair changes what reaches the client (a client must parse that "
            "shape itself, or use a model trained on this format)"
        )
    if outcome == "no_call" and stage.data.get("tools_in_prompt"):
        return (
            "the tools reach the prompt and llama.cpp parses the template's calls; the model chose to answer "
            "without one (ask for the tool more directly with --ask, or use a model trained for tool calls)"
        )
    if outcome == "invented_result" and stage.data.get("tools_in_prompt"):
        return (
            "the tools reach the prompt and llama.cpp parses the template's calls; the model made up a result "
            "instead of calling (see its answer above): no template repair changes that"
        )
    if outcome == "no_answer":
        return "the model did not answer in time: raise --live-timeout or lower --max-tokens (or try --threads 1)"
    return None


def _repair_hint(result: Any, repair: Any = None) -> str:
    """The file's one repair (``gguftpl.repair``, what ``audit`` and ``diff`` print too); for a model that writes
    calls in its own shape, say that a template cannot help."""
    from gguftpl.verify.result import FAIL

    failed = [s for s in result.stages if s.status == FAIL]
    if failed and all(s.name.startswith("live: ") for s in failed):
        return "the live probes judge the model's own answers (see above): no template repair changes them"
    failed = [s for s in failed if not s.name.startswith("live: ")]
    if [s.name for s in failed] == ["live"]:
        model_only = _live_hint(failed[0])
        if model_only is not None:
            return model_only
    if repair is None or not repair.needed:
        return (
            "repair: every runtime gets the tools; the failed stages are about the template's own call format "
            "(see above), which no template repair gguftpl knows changes"
        )
    upstream = ""
    if repair.source == "catalog":
        upstream = (
            f"upstream: {repair.how or repair.upstream} (its templates are in the bundled catalog: no network needed)\n"
        )
    elif repair.upstream and repair.command:
        upstream = f"upstream: {repair.upstream}\n"
    return f"{upstream}repair: {repair.text()}"
