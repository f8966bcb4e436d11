"""Analyse every chat template of a GGUF: do tools reach the prompt, how are calls written, does it parse
and render under Hugging Face semantics, are the special tokens right, is it safe.

Each question is answered from rendering (probe conversations with a canary tool, through
``hfrender.render_hf``) and, where it can be, from the Jinja AST (``static``), and both answers are kept.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gguftpl import rules
from gguftpl.findings import Finding, Location, Rule, Severity, make_finding
from gguftpl.templates import probes
from gguftpl.templates.hfrender import TemplateRenderError, render_hf

if TYPE_CHECKING:
    from gguftpl.templates.templateset import TemplateSet

_EVIDENCE_MAX = 400
LLAMACPP_EOG_BY_TEXT = frozenset(
    {
        "<|eot_id|>",
        "<|im_end|>",
        "<|end|>",
        "<|return|>",
        "<|call|>",
        "<end_of_turn>",
        "<|endoftext|>",
        "<|eom_id|>",
        "<EOT>",
        "_<EOT>",
        "<|end_of_text|>",
        "<end_of_utterance>",
    }
)
"""Tokens llama.cpp adds to its end-of-generation set by their text (llama-vocab.cpp, late 2025)."""


@dataclass
class TemplateReport:
    name: str
    key: str
    sha256: str
    tools_in_prompt: bool | None
    """Behavioural: the canary tool's name AND parameter description reached the rendered prompt.
    None if rendering failed even in the lenient fallback."""
    tools_static: bool | None
    """AST data flow: something derived from ``tools`` reaches the output. None if parsing failed."""
    dialect: str
    """One of ``dialect.DIALECTS``."""
    renders_tool_calls: bool | None
    renders_tool_results: bool | None
    handles_generation_prompt: bool | None
    details: dict[str, Any] = field(default_factory=dict)
    """Evidence and extras: ``findings`` (pending finding dicts), ``call_text``, ``dialect_source``,
    ``static_sinks``, ``hf_error``, ``lenient``, ``prompts`` (trimmed), ``end_of_turn``, ``markers``,
    ``timings_ms``."""


@dataclass
class SetAnalysis:
    templates: list[TemplateReport]
    findings: list[Finding]


# ------------------------------------------------------------------------------------------ one template


def _trim(text: str, limit: int = _EVIDENCE_MAX) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _around(text: str, needle: str, radius: int = 160) -> str:
    at = text.find(needle)
    if at < 0:
        return _trim(text)
    return _trim(text[max(0, at - radius) : at + len(needle) + radius])


class _Session:
    """Renders one template with its bos/eos, stopping at the first resource overrun."""

    def __init__(self, text: str, bos: str, eos: str) -> None:
        self.text = text
        self.bos = bos
        self.eos = eos
        self.overrun: TemplateRenderError | None = None
        self.lenient_used = False
        self.hf_errors: list[tuple[str, TemplateRenderError]] = []

    def render(
        self,
        label: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        agp: bool = True,
        fallback: bool = True,
    ) -> str | None:
        if self.overrun is not None:
            return None
        try:
            return render_hf(self.text, messages, tools, agp, self.bos, self.eos)
        except TemplateRenderError as e:
            if e.kind in ("timeout", "too_large", "memory"):
                self.overrun = e
                return None
            self.hf_errors.append((label, e))
            if not fallback or e.kind == "syntax":
                return None
        try:
            out = render_hf(self.text, messages, tools, agp, self.bos, self.eos, lenient=True)
            self.lenient_used = True
            return out
        except TemplateRenderError as e:
            if e.kind in ("timeout", "too_large", "memory"):
                self.overrun = e
            return None


def _pending(
    rule: Rule,
    message: str,
    *,
    line: int | None = None,
    column: int | None = None,
    evidence: str = "",
    severity: Severity | None = None,
    **extra: Any,
) -> dict[str, Any]:
    d: dict[str, Any] = {"code": rule.code, "message": message, "line": line, "column": column, "evidence": evidence}
    if severity is not None:
        d["severity"] = severity.value
    if extra:
        d["extra"] = extra
    return d


MAX_TEMPLATE_BYTES = 4 * 1024 * 1024
"""Larger templates are reported (GT404) and not analysed further."""


def analyze_template_text(
    text: str,
    *,
    name: str = "default",
    bos_token: str = "",
    eos_token: str = "",
    key: str | None = None,
) -> TemplateReport:
    """Analyse one template at string level. Findings that need no vocabulary are in
    ``details["findings"]`` (dicts with code, message, line, column, evidence)."""
    from gguftpl.templates import dialect as dialects
    from gguftpl.templates import safety, static, tokens
    from gguftpl.templates.templateset import sha256_text, template_key

    t0 = time.perf_counter()
    timings: dict[str, float] = {}
    pending: list[dict[str, Any]] = []
    details: dict[str, Any] = {"findings": pending, "timings_ms": timings}
    report = TemplateReport(
        name=name,
        key=key or template_key(name),
        sha256=sha256_text(text),
        tools_in_prompt=None,
        tools_static=None,
        dialect="none",
        renders_tool_calls=None,
        renders_tool_results=None,
        handles_generation_prompt=None,
        details=details,
    )

    size = len(text.encode("utf-8"))
    if size > MAX_TEMPLATE_BYTES:
        # parsing and rendering cost time and memory in proportion: a 50 MB "template" took 20 s and 400 MB
        pending.append(
            _pending(
                rules.RENDER_RESOURCE_LIMIT,
                f"the template is {size:,} bytes, over the {MAX_TEMPLATE_BYTES:,}-byte bound (real chat templates "
                "are under 100 KB): not parsed or rendered",
                evidence=_trim(text[:400]),
            )
        )
        report.dialect = "unknown"
        timings["total"] = round((time.perf_counter() - t0) * 1000, 2)
        return report

    # -- static: parse, data flow, safety
    ast = None
    try:
        ast = static.parse_template(text)
    except Exception as e:  # TemplateSyntaxError, or RecursionError on absurd nesting
        line = getattr(e, "lineno", None)
        msg = getattr(e, "message", None) or str(e) or type(e).__name__
        details["parse_error"] = {"message": msg, "line": line}
        lines = text.splitlines()
        evidence = lines[line - 1].strip() if isinstance(line, int) and 0 < line <= len(lines) else ""
        pending.append(
            _pending(rules.TEMPLATE_PARSE_ERROR, f"template does not parse: {msg}", line=line, evidence=evidence)
        )
    literal = ""
    if ast is not None:
        try:
            flow = static.data_flow(ast, text, "tools")
            report.tools_static = flow.rendered
            details["static_reads_tools"] = flow.reads
            details["static_sinks"] = [{"line": s.line, "text": s.expr} for s in flow.sinks[:8]]
            details["static_tests_only"] = flow.tests_only[:8]
            literal = "\0".join(static.literal_text(ast))
            for issue in safety.sandbox_issues(ast, text):
                if issue.kind == "range":
                    pending.append(
                        _pending(
                            rules.HUGE_RANGE, f"huge range: {issue.detail}", line=issue.line, evidence=issue.evidence
                        )
                    )
                else:
                    pending.append(
                        _pending(
                            rules.SANDBOX_ESCAPE,
                            f"sandbox-escape construct: {issue.detail}",
                            line=issue.line,
                            evidence=issue.evidence,
                        )
                    )
            for issue in safety.hidden_triggers(ast, text):
                pending.append(
                    _pending(
                        rules.HIDDEN_TRIGGER,
                        f"hidden trigger: {issue.detail}",
                        line=issue.line,
                        evidence=issue.evidence,
                    )
                )
        except RecursionError:
            # Parsed, but nested deeper than Python's stack lets us walk: say so, keep going.
            details["static_error"] = "template nested too deeply for static analysis"
            report.tools_static = None
    for issue in safety.invisible_characters(text):
        pending.append(
            _pending(
                rules.INVISIBLE_UNICODE,
                f"invisible character {issue.detail}",
                line=issue.line,
                column=issue.column,
                evidence=issue.evidence,
                severity=Severity.ERROR if issue.kind in ("bidi", "nul") else None,
            )
        )
    timings["static"] = round((time.perf_counter() - t0) * 1000, 2)
    if ast is None:
        # nothing renders, but the format the template's text teaches is still worth naming
        dialect, source = dialects.classify("", text) if text.strip() else ("none", "")
        report.dialect = dialect if source or not text.strip() else "unknown"
        details["dialect_source"] = source
        timings["total"] = round((time.perf_counter() - t0) * 1000, 2)
        return report

    # -- behaviour
    t1 = time.perf_counter()
    s = _Session(text, bos_token, eos_token)
    prompts: dict[str, str] = {}
    user = probes.plain_conversation()
    plain = s.render("plain", user, agp=True)
    with_tools = s.render("tools", probes.tools_conversation(), tools=probes.canary_tools())
    if with_tools is not None and probes.CANARY_TOOL_NAME not in with_tools:
        # Some templates write the tool block only inside a system turn: try with one (folded if refused).
        errors_before = len(s.hf_errors)
        system_conv = probes.plain_conversation(system=True)
        alt = s.render("tools with system", system_conv, tools=probes.canary_tools(), fallback=False)
        if alt is None and s.overrun is None:
            alt = s.render("tools with system", probes.fold_system(system_conv), tools=probes.canary_tools())
        del s.hf_errors[errors_before:]
        if alt is not None and probes.CANARY_TOOL_NAME in alt:
            details["tools_need_system"] = True
            with_tools = alt
    base_tools: list[dict[str, Any]] | None = None
    if plain is None and with_tools is not None:
        # Some tool templates (Hermes tool_use) iterate `tools` unconditionally: probe them with tools.
        base_tools = probes.canary_tools()
        details["requires_tools"] = True
        plain = with_tools
    plain_no_gen = s.render("plain without generation prompt", user, tools=base_tools, agp=False)
    if plain is not None and plain_no_gen is not None:
        report.handles_generation_prompt = plain != plain_no_gen
        prompts["plain"] = plain
        details["generation_prompt_text"] = _trim(dialects.inserted_text(plain, plain_no_gen), 200)

    system_conv = probes.plain_conversation(system=True)
    with_system = s.render("system message", system_conv, tools=base_tools, fallback=False)
    if with_system is None and s.overrun is None and s.hf_errors and s.hf_errors[-1][0] == "system message":
        err = s.hf_errors[-1][1]
        folded = s.render("system folded", probes.fold_system(system_conv), tools=base_tools)
        if folded is not None and "system" in str(err).lower():
            s.hf_errors.pop()
            details["system_folded"] = True
            pending.append(
                _pending(
                    rules.SYSTEM_ROLE_UNSUPPORTED,
                    f"the template rejects the system role ({err}); system text was folded into the first user turn",
                    line=err.line,
                )
            )

    if with_tools is not None:
        prompts["tools"] = with_tools
        name_in = probes.CANARY_TOOL_NAME in with_tools
        param_in = probes.CANARY_PARAM_TOKEN in with_tools
        report.tools_in_prompt = name_in and param_in
        details["tool_name_in_prompt"] = name_in
        details["tool_param_in_prompt"] = param_in

    # The call, the way the template writes it
    call_text = ""
    call = probes.tool_call()
    call_content: str | None = ""
    if s.overrun is None:
        try:
            rendering = dialects.render_call(text, bos_token=bos_token, eos_token=eos_token)
            call_text = rendering.text
            report.renders_tool_calls = rendering.rendered_call
            details["call_text"] = _trim(call_text)
            details["call_arguments_as_string"] = rendering.string_arguments
            details["call_content_none"] = rendering.content_none
            call = probes.tool_call(string_arguments=rendering.string_arguments)
            call_content = None if rendering.content_none else ""
            if rendering.rendered_call:
                _call_id_findings(text, rendering, bos_token, eos_token, details, pending)
        except TemplateRenderError as e:
            if e.kind in ("timeout", "too_large", "memory"):
                s.overrun = e
            else:
                s.hf_errors.append(("assistant tool call", e))
                try:
                    rendering = dialects.render_call(text, bos_token=bos_token, eos_token=eos_token, lenient=True)
                    call_text = rendering.text
                    report.renders_tool_calls = rendering.rendered_call
                    details["call_text"] = _trim(call_text)
                    s.lenient_used = True
                except TemplateRenderError:
                    pass

    round_trip = s.render(
        "tool round trip",
        probes.tool_round_trip_conversation(call, call_content),
        tools=probes.canary_tools(),
        agp=True,
    )
    if round_trip is not None:
        prompts["round_trip"] = round_trip
        report.renders_tool_results = probes.CANARY_RESULT in round_trip

    multi = s.render("multi-turn", probes.multi_turn_conversation(), tools=base_tools, agp=True)
    if multi is not None:
        eot = tokens.end_of_turn_marker(multi, probes.CANARY_ASSISTANT, eos_token)
        details["end_of_turn"] = eot
    _dropped_message_findings(with_system, multi, details, pending)
    _behavioural_triggers(s, ast, plain, base_tools, pending)
    rendered_all = [p for p in (plain, with_tools, round_trip, multi, call_text) if p]
    details["markers"] = tokens.control_markers(rendered_all)
    details["starts_with_bos"] = bool(bos_token) and plain is not None and plain.startswith(bos_token)

    report.dialect, details["dialect_source"] = dialects.classify(call_text, literal)
    if report.renders_tool_calls is False and details["dialect_source"] == "":
        report.dialect = "none"
    details["prompts"] = {k: _trim(v, 65536) for k, v in prompts.items()}
    details["lenient"] = s.lenient_used
    timings["render"] = round((time.perf_counter() - t1) * 1000, 2)

    # -- findings that need no vocabulary
    if s.overrun is not None:
        pending.append(
            _pending(
                rules.RENDER_RESOURCE_LIMIT,
                f"rendering was stopped: {s.overrun}",
                line=s.overrun.line,
                kind=s.overrun.kind,
            )
        )
    seen_errors: set[str] = set()
    tool_probes = ("tools", "assistant tool call", "tool round trip")
    for label, err in s.hf_errors:
        severity: Severity | None = None
        if label in tool_probes and report.tools_static is False:
            continue  # a template without tool support failing on tool messages says nothing new (GT201)
        if err.kind == "security" and "__" in str(err):
            rule = rules.SANDBOX_ESCAPE
            msg = f"the sandbox refused an operation while rendering the {label} probe: {err}"
        elif err.kind == "syntax":
            rule = rules.TEMPLATE_PARSE_ERROR
            msg = f"transformers cannot compile the template: {err}"
        else:
            rule = rules.TEMPLATE_RENDER_ERROR
            msg = f"rendering the {label} probe raised {err.exc_type or 'an error'}: {err}"
            if label not in tool_probes and (details.get("requires_tools") or name != "default"):
                # llama.cpp picks a named template only for tool (or document) requests.
                msg = f"the template fails on a conversation without tools ({label} probe): {err}"
                severity = Severity.WARNING if name == "default" else Severity.INFO
        if str(err) in seen_errors:
            continue
        seen_errors.add(str(err))
        lines = text.splitlines()
        evidence = lines[err.line - 1].strip()[:200] if err.line and 0 < err.line <= len(lines) else ""
        if rule is rules.TEMPLATE_RENDER_ERROR and s.lenient_used:
            msg += " (a lenient engine like llama.cpp's renders it)"
        pending.append(_pending(rule, msg, line=err.line, evidence=evidence, severity=severity, probe=label))
    details["hf_error"] = str(s.hf_errors[0][1]) if s.hf_errors else None

    if report.handles_generation_prompt is False and plain is not None and plain.rstrip().endswith(probes.CANARY_USER):
        # Nothing follows the user's text: the model would continue it. (Mistral's `[/INST]` or a template
        # that always opens the assistant turn is fine.)
        pending.append(
            _pending(
                rules.NO_GENERATION_PROMPT,
                "add_generation_prompt=True renders the same prompt as False: the assistant turn is never opened",
                evidence=_trim(plain or ""),
            )
        )
    tools_missing = report.tools_in_prompt is False or (report.tools_in_prompt is None and report.tools_static is False)
    if tools_missing:
        if details.get("tool_name_in_prompt"):
            pending.append(
                _pending(
                    rules.TOOLS_PARTIALLY_RENDERED,
                    "the tool name reaches the prompt but its parameter descriptions do not",
                    evidence=_around(with_tools or "", probes.CANARY_TOOL_NAME),
                )
            )
        else:
            pending.append(_tools_not_rendered(report, with_tools))
    elif report.tools_in_prompt:
        if report.renders_tool_calls is False:
            pending.append(
                _pending(
                    rules.TOOL_CALLS_NOT_RENDERED,
                    "tools are rendered, but an assistant message's tool_calls leave no trace in the prompt",
                    evidence=_trim(details.get("call_text") or ""),
                )
            )
        if report.renders_tool_results is False:
            pending.append(
                _pending(
                    rules.TOOL_RESULTS_NOT_RENDERED,
                    "tools are rendered, but a tool-role result does not appear in the prompt",
                    evidence=_trim((round_trip or "")[-_EVIDENCE_MAX:]),
                )
            )
        elif report.renders_tool_results is None and s.overrun is None:
            pending.append(
                _pending(
                    rules.TOOL_RESULTS_NOT_RENDERED,
                    "tools are rendered, but rendering a tool round trip raises",
                )
            )
    _python_repr_findings(with_tools, call_text, details, pending)
    if report.dialect != "none":
        shown = details.get("call_text") or ""
        pending.append(
            _pending(
                rules.TOOL_CALL_DIALECT,
                f"tool-call dialect: {report.dialect} (from the {details['dialect_source'] or 'template'} text)",
                evidence=_trim(shown),
                dialect=report.dialect,
            )
        )
    timings["total"] = round((time.perf_counter() - t0) * 1000, 2)
    return report


def _dropped_message_findings(
    with_system: str | None, multi: str | None, details: dict[str, Any], pending: list[dict[str, Any]]
) -> None:
    """A probe that rendered without error but lost a message's text: the system probe's system text, or
    the multi-turn probe's assistant reply (both strings no template contains). Only when the user's text
    did reach the prompt: a template that renders no message at all is a different failure."""
    checks = (
        (with_system, probes.CANARY_SYSTEM, "system message", "a system message"),
        (multi, probes.CANARY_ASSISTANT, "assistant reply", "an assistant reply in history"),
    )
    for prompt, canary, what, subject in checks:
        if prompt is None or canary in prompt or probes.CANARY_USER not in prompt:
            continue
        details.setdefault("dropped", []).append(what)
        pending.append(
            _pending(
                rules.MESSAGE_DROPPED,
                f"{subject} never reaches the prompt: the template renders without it ({canary!r} is missing)",
                evidence=_trim(prompt, 200),
                role=what.split()[0],
            )
        )


def _call_id_findings(
    text: str,
    rendering: Any,
    bos_token: str,
    eos_token: str,
    details: dict[str, Any],
    pending: list[dict[str, Any]],
) -> None:
    """The rendered call carries its id but not its function name: render it again with an id that carries
    the name (``functions.NAME:0``, Kimi K2's form); the name appearing then proves the template writes the
    id where the name belongs."""
    from gguftpl.templates import dialect as dialects

    name = probes.CANARY_TOOL_NAME
    if name in rendering.text or probes.CANARY_CALL_ID not in rendering.text:
        return
    named_id = f"functions.{name}:0"
    call = {**probes.tool_call(string_arguments=rendering.string_arguments), "id": named_id}
    try:
        again = dialects.render_call(text, call, bos_token=bos_token, eos_token=eos_token)
    except TemplateRenderError:
        return
    if name not in again.text:
        return
    details["call_id_in_place_of_name"] = True
    pending.append(
        _pending(
            rules.CALL_ID_IN_PLACE_OF_NAME,
            f"a tool call is written with its id ({probes.CANARY_CALL_ID!r}) where the function's name belongs: "
            f"the name reaches the prompt only when the id carries it ({named_id!r}, as llama.cpp returns ids); "
            "ids a client mints itself lose it",
            evidence=_around(rendering.text, probes.CANARY_CALL_ID, 120),
        )
    )


def _python_repr_findings(
    with_tools: str | None, call_text: str, details: dict[str, Any], pending: list[dict[str, Any]]
) -> None:
    """A mapping printed without ``tojson`` shows up as Python's repr: the canary's parameter description
    (or the call's argument) between single quotes right after its quoted key. Neither string occurs in
    any template, so finding that exact repr proves the template printed the canary's own data that way."""
    # A schema in repr may be what the model was trained on (Apriel's upstream template prints tools with
    # `| string`): information. Call arguments in repr also break llama.cpp, which refuses the template.
    checks = (
        (with_tools or "", "description", probes.CANARY_PARAM_DESCRIPTION, "the tool schema reaches", Severity.INFO),
        (call_text, probes.CANARY_PARAM_NAME, probes.CANARY_ARG_VALUE, "a tool call's arguments reach", None),
    )
    for text, key, value, what, severity in checks:
        needle = f"'{key}': '{value}'"
        if needle in text:
            details.setdefault("python_repr", []).append(what.rsplit(" ", 1)[0])
            pending.append(
                _pending(
                    rules.TOOL_DATA_AS_PYTHON_REPR,
                    f"{what} the prompt as a Python dict ({needle}…), not JSON",
                    evidence=_around(text, needle, 120),
                    severity=severity,
                )
            )


def _behavioural_triggers(
    s: _Session,
    ast: Any,
    baseline: str | None,
    tools: list[dict[str, Any]] | None,
    pending: list[dict[str, Any]],
) -> None:
    """Send the strings the template compares message data against, and see whether prose appears that
    the message did not contain: a hidden trigger, however indirect the gating."""
    from gguftpl.templates import safety
    from gguftpl.templates.dialect import inserted_text

    if baseline is None or s.overrun is not None:
        return
    if any(p["code"] == rules.HIDDEN_TRIGGER.code for p in pending):
        return  # already proven from the AST
    contains, equals = safety.compared_literals(ast)
    trials = []
    if contains:
        trials.append(contains)
    trials.extend([lit] for lit in equals[:8])
    for lits in trials:
        content = " ".join(lits) if len(lits) == 1 and lits[0] in equals else f"{probes.CANARY_USER} {' '.join(lits)}"
        errors_before = len(s.hf_errors)
        out = s.render("trigger", [{"role": "user", "content": content}], tools=tools, fallback=False)
        del s.hf_errors[errors_before:]  # odd content making a template raise is not a finding here
        if out is None:
            continue
        extra = inserted_text(out, baseline)
        words = safety.trigger_words(extra, [*lits, probes.CANARY_USER])
        if len(words) >= 3:
            pending.append(
                _pending(
                    rules.HIDDEN_TRIGGER,
                    f"a user message containing {', '.join(repr(x) for x in lits[:4])} makes the template add text "
                    "the message did not contain",
                    evidence=_trim(extra),
                )
            )
            return


def _tools_not_rendered(report: TemplateReport, with_tools: str | None) -> dict[str, Any]:
    how = []
    how.append(
        "rendered with a canary tool, neither its name nor its parameter description appears in the prompt"
        if report.tools_in_prompt is False
        else "the template could not be rendered"
    )
    if report.tools_static is False:
        reads = report.details.get("static_reads_tools")
        how.append("the template reads `tools` only to test it" if reads else "the template never reads `tools`")
    elif report.tools_static:
        how.append("the AST has a path from `tools` to the output that the probe did not take")
    return _pending(
        rules.TOOLS_NOT_RENDERED,
        "tool schemas never reach the prompt: " + "; ".join(how),
        evidence=_trim(with_tools or ""),
        tools_in_prompt=report.tools_in_prompt,
        tools_static=report.tools_static,
    )


# ------------------------------------------------------------------------------------------ a template set


MAX_ANALYSED_TEXTS = 64
"""Distinct template texts one file's analysis renders; real files carry one to four."""


def analyze_templateset(tset: TemplateSet, *, location_file: str, upstream_repo: str | None = None) -> SetAnalysis:
    """Analyse every template of ``tset`` and return the reports and sorted findings (template-level and
    file-level)."""
    from gguftpl.templates import tokens
    from gguftpl.templates.templateset import template_key

    findings: list[Finding] = []
    reports: list[TemplateReport] = []
    bos = _special_text(tset, "bos")
    eos = _special_text(tset, "eos")
    if not tset.templates:
        # a template key that holds no string is no template either (GT003 names its type)
        what = "no usable" if tset.non_string_templates else "no"
        findings.append(
            make_finding(
                rules.NO_CHAT_TEMPLATE,
                f"the file has {what} tokenizer.chat_template: runtimes fall back to a built-in format "
                "(usually ChatML) and drop tools",
                Location(location_file, "tokenizer.chat_template"),
                fix=_hub_fix(location_file, upstream_repo, "default"),
            )
        )
        return SetAnalysis([], findings)

    # Each distinct text is analysed once (only `default` is judged differently by name), and at most
    # MAX_ANALYSED_TEXTS of them: a file with 10,000 named templates took minutes per file.
    done: dict[tuple[str, bool], TemplateReport] = {}
    skipped: list[str] = []
    for name, tpl in tset.templates.items():
        memo_key = (tpl.text, name == "default")
        if memo_key in done:
            reports.append(dataclasses.replace(done[memo_key], name=name, key=tpl.key))
            continue
        if len(done) >= MAX_ANALYSED_TEXTS and name not in ("default", "tool_use"):
            skipped.append(name)
            continue
        done[memo_key] = analyze_template_text(tpl.text, name=name, bos_token=bos, eos_token=eos, key=tpl.key)
        reports.append(done[memo_key])
    if skipped:
        findings.append(
            make_finding(
                rules.RENDER_RESOURCE_LIMIT,
                f"{len(skipped):,} more named templates were not analysed: the analysis stops after "
                f"{MAX_ANALYSED_TEXTS} distinct template texts (first skipped: {skipped[0][:80]!r})",
                Location(location_file, template_key(skipped[0])),
                severity=Severity.WARNING,
            )
        )

    tool_capable = [r.name for r in reports if r.name != "default" and r.tools_in_prompt]
    for r in reports:
        loc_key = r.key
        for p in r.details["findings"]:
            rule = _rule(p["code"])
            severity = Severity(p["severity"]) if "severity" in p else None
            fix = None
            message = p["message"]
            if rule is rules.TOOLS_NOT_RENDERED:
                if r.name == "default" and tool_capable:
                    rule = rules.DEFAULT_IGNORES_TOOLS
                    message = (
                        f"the default template ignores tools while '{tool_capable[0]}' renders them: fine for "
                        "llama.cpp (it switches templates when tools are passed), but Ollama import, LM Studio "
                        "and llama-cpp-python's formatter read only the default and drop the tools"
                    )
                    fix = f"gguftpl patch {location_file} --template default=PATH -o FIXED.gguf"
                elif r.name != "default" and "tool" not in r.name:
                    severity = Severity.INFO
                    message = f"named template '{r.name}' does not render tools (a problem only if used for tool calls)"
                else:
                    fix = _hub_fix(location_file, upstream_repo, "tool_use")
            elif rule in (rules.SANDBOX_ESCAPE, rules.HIDDEN_TRIGGER, rules.RENDER_RESOURCE_LIMIT):
                fix = _hub_fix(location_file, upstream_repo, r.name)
            findings.append(
                make_finding(
                    rule,
                    message,
                    Location(location_file, loc_key, p.get("line"), p.get("column")),
                    template=r.name,
                    evidence=p.get("evidence", ""),
                    fix=fix,
                    severity=severity,
                    **p.get("extra", {}),
                )
            )
        findings.extend(_token_findings(tset, r, location_file, tokens))

    findings.sort(
        key=lambda f: (
            f.template is not None,
            [x.name for x in reports].index(f.template) if f.template in [x.name for x in reports] else -1,
            -f.severity.rank,
            f.code,
            f.location.line or 0,
            f.message,
        )
    )
    return SetAnalysis(reports, findings)


def _rule(code: str) -> Rule:
    from gguftpl.findings import get_rule

    return get_rule(code)


def _special_text(tset: TemplateSet, role: str) -> str:
    tok = tset.special_tokens.get(role)
    return (tok.text or "") if tok is not None else ""


def _hub_fix(file: str, upstream_repo: str | None, name: str) -> str:
    if upstream_repo:
        return f"gguftpl patch {file} --from-hub {upstream_repo} -o FIXED.gguf"
    return f"gguftpl patch {file} --template {name}=PATH -o FIXED.gguf"


def _token_findings(tset: TemplateSet, r: TemplateReport, file: str, tokens: Any) -> list[Finding]:
    out: list[Finding] = []
    loc = Location(file, r.key)
    if tset.has_vocab:
        for marker in r.details.get("markers", []):
            tid = tset.token_id(marker)
            if tid is None:
                out.append(
                    make_finding(
                        rules.MARKER_NOT_IN_VOCAB,
                        f"the template emits {marker!r}, which is not a token of the vocabulary",
                        loc,
                        template=r.name,
                        evidence=marker,
                        marker=marker,
                    )
                )
                continue
            ttype = tset.token_type(tid)
            if ttype is not None and ttype not in (tokens.CONTROL, tokens.USER_DEFINED):
                out.append(
                    make_finding(
                        rules.MARKER_NOT_CONTROL,
                        f"{marker!r} is token {tid} of type {ttype} (expected CONTROL 3 or USER_DEFINED 4)",
                        loc,
                        template=r.name,
                        evidence=marker,
                        marker=marker,
                        token_id=tid,
                        token_type=ttype,
                    )
                )
    eot = r.details.get("end_of_turn")
    stops = {role: t for role, t in tset.special_tokens.items() if role in ("eos", "eot", "eom")}
    if eot and stops:
        stop_texts = {t.text for t in stops.values() if t.text}
        stop_ids = {t.id for t in stops.values()}
        eot_id = tset.token_id(eot) if tset.has_vocab else None
        is_stop = eot in stop_texts or (eot_id is not None and eot_id in stop_ids)
        if not is_stop:
            names = ", ".join(f"{role}={t.text!r}" for role, t in stops.items())
            known = eot in LLAMACPP_EOG_BY_TEXT
            why = (
                "llama.cpp stops on it by name, other runtimes that stop on EOS/EOT do not"
                if known
                else "generation may not stop"
            )
            out.append(
                make_finding(
                    rules.END_OF_TURN_NOT_EOG,
                    f"assistant turns end with {eot!r}, which is not a stop token ({names}): {why}",
                    loc,
                    template=r.name,
                    severity=Severity.INFO if known else None,
                    evidence=eot,
                    marker=eot,
                )
            )
    if tset.add_bos and r.details.get("starts_with_bos"):
        bos = _special_text(tset, "bos")
        out.append(
            make_finding(
                rules.DOUBLE_BOS,
                f"the template writes BOS {bos!r} and add_bos_token is true: runtimes that add BOS while "
                "tokenizing get two (llama.cpp strips one leading BOS; Hugging Face does not)",
                loc,
                template=r.name,
                evidence=_trim(r.details.get("prompts", {}).get("plain", ""), 120),
            )
        )
    return out
