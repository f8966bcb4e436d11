"""The facts of one chat template: what its AST says and what each probe conversation rendered.

Gathered once per distinct template text (:func:`gguftpl.templates.gather.gather_facts`) and never changed
afterwards. Every verdict a report shows (``tools_in_prompt``, ``dialect``, ``handles_generation_prompt`` …)
is a field here, decided in one place; every finding is a rule in ``gguftpl/rules/`` that reads these
fields. Everything is plain data (strings, numbers, tuples), so facts can be compared, cached and shown.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

EVIDENCE_MAX = 400
"""Longest excerpt a finding quotes as evidence."""


def trim(text: str, limit: int = EVIDENCE_MAX) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def around(text: str, needle: str, radius: int = 160) -> str:
    """An excerpt of ``text`` centred on ``needle`` (the start of ``text`` when it is absent)."""
    at = text.find(needle)
    if at < 0:
        return trim(text)
    return trim(text[max(0, at - radius) : at + len(needle) + radius])


@dataclass(frozen=True)
class RenderFailure:
    """One probe that did not render."""

    probe: str
    """The probe conversation: ``plain``, ``tools``, ``system message``, ``tool round trip`` …"""
    kind: str
    """``syntax``, ``render``, ``security``, ``worker`` or an overrun (``hfrender.OVERRUN_KINDS``)."""
    message: str
    line: int | None = None
    """1-based template line, when the engine says."""
    exc_type: str | None = None
    source_line: str = ""
    """The template line ``line`` points at, stripped."""

    @property
    def overran(self) -> bool:
        """The render was stopped by a bound (time, output size, memory, recursion depth), not by the template's
        own error."""
        from gguftpl.engines.transformers import OVERRUN_KINDS

        return self.kind in OVERRUN_KINDS

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class SourceIssue:
    """Something the AST or the raw text shows: a sandbox escape, a trigger, an invisible character."""

    kind: str
    """``dunder``, ``gadget``, ``range``, ``trigger``, ``invisible``, ``bidi``, ``nul`` …"""
    line: int | None
    column: int | None
    evidence: str
    detail: str = ""


@dataclass(frozen=True)
class StaticFacts:
    """What the Jinja AST says, without rendering."""

    reads_tools: bool
    """``tools`` is referenced at all."""
    tools_rendered: bool | None
    """Data derived from ``tools`` reaches the output on some path; None when the AST is too deep to walk."""
    sinks: tuple[tuple[int, str], ...] = ()
    """(line, source line) of output expressions fed by ``tools`` (first 8)."""
    tests_only: tuple[int, ...] = ()
    """Lines where ``tools`` is read only to test it (first 8)."""
    literal_text: str = ""
    """The template's literal text pieces, NUL-separated (the dialect a template teaches in prose)."""
    sandbox: tuple[SourceIssue, ...] = ()
    """Sandbox-escape shapes and huge ranges."""
    triggers: tuple[SourceIssue, ...] = ()
    """Text gated on a literal compared with message content."""
    error: str | None = None
    """Why the AST could not be walked (nested too deeply), when it could not."""


@dataclass(frozen=True)
class CallFacts:
    """How the template writes an assistant tool call (the canary call)."""

    text: str
    """What the call added to the prompt ('' when nothing)."""
    rendered: bool
    """The call's argument value (or name) reached the prompt."""
    string_arguments: bool = False
    """It rendered only with ``arguments`` as a JSON string."""
    content_none: bool = False
    """It rendered only with the assistant ``content`` set to None."""
    id_in_place_of_name: bool = False
    """The call carries its id but not its name, and the name appears once the id carries it."""
    named_id: str = ""
    """The id that carried the name (``functions.NAME:0``) when ``id_in_place_of_name``."""


@dataclass(frozen=True)
class ReprLeak:
    """Tool data printed as a Python dict instead of JSON."""

    what: str
    """``the tool schema`` or ``a tool call's arguments``."""
    needle: str
    """The Python-repr excerpt found (``'key': 'value'``)."""
    evidence: str


@dataclass(frozen=True)
class TriggerTrial:
    """A user message holding literals the template compares against made it add unrequested text."""

    literals: tuple[str, ...]
    added: str


@dataclass(frozen=True)
class EngineRender:
    """One probe conversation rendered by one engine."""

    text: str | None = None
    """The prompt, when it rendered."""
    error: str | None = None
    """Why it did not."""
    overran: bool = False
    """Stopped by a bound (time), not by the template's own error."""
    line: int | None = None
    """1-based template line of the error, when the engine says."""


@dataclass(frozen=True)
class EngineFacts:
    """What one engine (``transformers``, ``llamacpp``, ``hfjs``, ``minijinja/tgi``, ...) did with the template:
    loaded or refused, and the probe conversations it rendered (:func:`gguftpl.templates.enginefacts.ask_engines`).
    transformers' and llama.cpp's are read from :class:`TemplateFacts`' own fields (:meth:`TemplateFacts.engine`)."""

    engine: str
    installed: bool = True
    version: str = ""
    unknown: str = ""
    """Why the engine was not asked (``unknown: hfjs is not installed …: install with …``); '' when it was."""
    load_error: str | None = None
    """The engine refuses the template (its own words)."""
    load_line: int | None = None
    renders: dict[str, EngineRender] = field(default_factory=dict)
    """Probe name -> what this engine rendered for it."""
    tools_in_prompt: bool | None = None
    """The canary tool's name and parameter reach this engine's prompt for the tools request
    (``templates.verdicts.engine_tools_verdict``); None when it did not render it."""
    template: str = ""
    """What it rendered when that is not the template itself: Ollama's curated Go template (``chatml``) that
    ``ollama create`` puts in place of this default."""
    reads_tools: bool | None = None
    """Ollama: the Go template reads ``.Tools`` (``Template.Vars()``), which is Ollama's tools capability test."""

    def text(self, probe: str) -> str | None:
        r = self.renders.get(probe)
        return r.text if r is not None else None

    def error(self, probe: str) -> EngineRender | None:
        """The probe's failure (the load error counts for every probe); None when it rendered."""
        if self.load_error is not None:
            return EngineRender(None, self.load_error, False, self.load_line)
        r = self.renders.get(probe)
        return r if r is not None and r.text is None else None


@dataclass(frozen=True)
class LlamaCppFacts:
    """What llama.cpp did with the template, loaded as a file's default template (in a bounded child)."""

    load_error: str | None = None
    """llama.cpp refuses to load it (its own words): llama-server would exit at startup."""
    unchecked: str | None = None
    """llama.cpp could not be asked (not a verdict about the template)."""
    caps: dict[str, bool] = field(default_factory=dict)
    """llama.cpp's capability probe of the template (``supports_tools``, ``supports_system_role`` …)."""
    renders: dict[str, EngineRender] = field(default_factory=dict)
    """Probe name (``probes.ENGINE_PROBES``) -> what llama.cpp rendered for it."""
    dropped: tuple[str, ...] = ()
    """``system message`` / ``assistant reply`` missing from llama.cpp's prompt."""
    specials: tuple[str, str] = ("", "")
    """The ``bos_token`` and ``eos_token`` llama.cpp passed to the template."""

    def text(self, probe: str) -> str | None:
        r = self.renders.get(probe)
        return r.text if r is not None else None


@dataclass(frozen=True)
class EngineDifference:
    """llama.cpp and transformers render different prompts for the same conversation."""

    probe: str
    at: int
    """First differing character (of llama.cpp's prompt)."""
    line: int
    llama: str
    """llama.cpp's text around the difference (``templates.enginediff.difference_window``: the difference in the
    middle)."""
    transformers: str
    normalised: tuple[str, ...] = ()
    """What was made equal before comparing (BOS, date, thinking flag, clock text)."""
    engine: str = "llamacpp"
    """The engine compared with transformers (``llama`` holds its text): ``llamacpp``, ``hfjs``, ``minijinja/tgi``…"""


@dataclass(frozen=True)
class TemplateFacts:
    """Everything gguftpl observed about one template. Gathered once; rules only read it."""

    name: str
    key: str
    sha256: str
    size: int
    """UTF-8 bytes."""
    head: str = ""
    """The first 400 characters (evidence for a template too large to analyse)."""
    too_large: bool = False
    """Over ``limits.MAX_TEMPLATE_BYTES``: neither parsed nor rendered."""
    parse_error: RenderFailure | None = None
    """jinja2 could not parse it (``probe`` is ``parse``; ``message`` is the parser's)."""
    static: StaticFacts | None = None
    invisible: tuple[SourceIssue, ...] = ()
    """Invisible, bidi and NUL characters in the raw text."""
    special_tokens: dict[str, str] = field(default_factory=dict)
    """The special tokens besides bos/eos the probes passed to transformers' renderer (``sep_token`` …, from
    the file's ``tokenizer.ggml.*_token_id`` keys), as transformers passes them; llama.cpp passes none."""

    # -- verdicts, each decided once from the engines (llama.cpp when it rendered, else transformers)
    tools_in_prompt: bool | None = None
    """The canary tool's name AND parameter description reach the prompt of a user-only conversation sent with
    tools, in the prompt of ``tools_engine``; None when no engine rendered it and the AST cannot tell."""
    tools_engine: str = ""
    """Whose verdict ``tools_in_prompt`` is: ``llama.cpp``, ``transformers``, ``lenient`` (transformers refused;
    llama.cpp's leniencies rendered) or ``ast`` (nothing rendered; the AST shows no path from ``tools``)."""
    tools_undecided: str = ""
    """Why ``tools_in_prompt`` is None."""
    tool_name_in_prompt: bool | None = None
    tool_param_in_prompt: bool | None = None
    tools_with_system: bool | None = None
    """The tools reach the prompt once a system message is sent too (some templates write them only there)."""

    # -- behaviour under transformers' semantics (the canary probes)
    requires_tools: bool = False
    """The template renders only when tools are passed (it iterates ``tools`` unconditionally)."""
    handles_generation_prompt: bool | None = None
    """``add_generation_prompt`` changes the prompt; None when either render failed."""
    generation_prompt_text: str = ""
    system_folded: bool = False
    """The template rejects the system role; the probe folded the system text into the first user turn."""
    system_rejection: RenderFailure | None = None
    call: CallFacts | None = None
    renders_tool_calls: bool | None = None
    """An assistant tool call's arguments reach the history in the prompt of ``calls_engine`` (``call`` is how
    transformers writes it)."""
    calls_engine: str = ""
    """Whose prompt ``renders_tool_calls`` was read from: ``llama.cpp``, ``transformers`` or ``lenient``."""
    renders_tool_results: bool | None = None
    """The tool result's content reached the round-trip prompt of ``results_engine``; None when no engine rendered
    that probe."""
    results_engine: str = ""
    """Whose prompt ``renders_tool_results`` was read from: ``llama.cpp``, ``transformers`` or ``lenient``."""
    end_of_turn: str | None = None
    """The marker written right after an assistant message's content."""
    markers: tuple[str, ...] = ()
    """Control-shaped markers (``<|…|>``) the rendered prompts contain."""
    starts_with_bos: bool = False
    dropped: tuple[str, ...] = ()
    """``system message`` / ``assistant reply``: rendered without error yet missing from the prompt."""
    python_repr: tuple[ReprLeak, ...] = ()
    trigger: TriggerTrial | None = None
    render_errors: tuple[RenderFailure, ...] = ()
    """Probes transformers' renderer refused (excluding bound overruns)."""
    strict: tuple[str, ...] = ()
    """Probes transformers' renderer rendered itself (the rest of ``prompts`` came from the lenient sandbox)."""
    lenient: bool = False
    """Some probe rendered only in the lenient sandbox (llama.cpp's leniencies)."""
    content_as_parts: bool = False
    """The probes sent each string content as one text part, as llama.cpp does for this template (its capability
    probe: the template reads content only as a list of parts)."""
    overrun: RenderFailure | None = None
    """The probe that hit a bound (time, output size, memory); rendering stopped there."""
    dialect: str = "none"
    """One of ``dialect.DIALECTS``."""
    dialect_source: str = ""
    """Where the dialect was read: the rendered ``call``, the ``literal`` text, or ''."""
    prompts: dict[str, str] = field(default_factory=dict)
    """Rendered probe prompts (``plain``, ``tools``, ``system``, ``round_trip``, ``multi``), each trimmed."""

    # -- llama.cpp (None: not asked — not a template llama.cpp reads, a render bomb, or no xllamacpp)
    llamacpp: LlamaCppFacts | None = None
    engine_differences: tuple[EngineDifference, ...] = ()
    """Conversations llama.cpp and transformers both render, into different prompts."""
    engines: dict[str, EngineFacts] = field(default_factory=dict)
    """The other engines asked (``hfjs``, ``minijinja/tgi``, ...), by id; see :meth:`engine`."""

    timings_ms: dict[str, float] = field(default_factory=dict, compare=False)

    @property
    def tools_static(self) -> bool | None:
        """AST data flow: something derived from ``tools`` reaches the output; None when not parsed."""
        return self.static.tools_rendered if self.static is not None else None

    @property
    def call_text(self) -> str:
        return self.call.text if self.call is not None else ""

    def tools_prompt(self) -> str:
        """The prompt ``tools_in_prompt`` was read from ('' when none was)."""
        if self.tools_engine == "llama.cpp" and self.llamacpp is not None:
            return self.llamacpp.text("tools") or ""
        return self.prompts.get("tools", "") if self.tools_engine in ("transformers", "lenient") else ""

    def round_trip_prompt(self) -> str:
        """The round-trip prompt ``renders_tool_results`` was read from ('' when none was)."""
        if self.results_engine == "llama.cpp" and self.llamacpp is not None:
            from gguftpl.templates import probes

            for probe in (probes.ROUND_TRIP, probes.NULL_CONTENT):
                text = self.llamacpp.text(probe)
                if text is not None:
                    return text
        return self.prompts.get("round_trip", "") if self.results_engine in ("transformers", "lenient") else ""

    def tools_with_system_prompt(self) -> str:
        """The prompt of the conversation with a system message and tools (llama.cpp's first)."""
        llama = self.llamacpp.text("tools with system") if self.llamacpp is not None else None
        return llama if llama is not None else self.prompts.get("tools with system", "")

    @property
    def tools_need_system(self) -> bool:
        """Tools reach the prompt only once a system message is sent too."""
        return bool(self.tools_with_system) and not self.tools_in_prompt

    @property
    def renders_tools(self) -> bool:
        """The template can put the tool schemas in the prompt (with or without a system message)."""
        return bool(self.tools_in_prompt or self.tools_with_system)

    @property
    def llamacpp_load_error(self) -> str | None:
        return self.llamacpp.load_error if self.llamacpp is not None else None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data (``from_dict`` reads it back); ``tools_static`` is included for readers."""
        from dataclasses import asdict

        d = asdict(self)
        d["tools_static"] = self.tools_static
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TemplateFacts:
        return _decode(cls, data)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class VocabFacts:
    """The vocabulary entries the rules ask about: the markers the templates emit and their end-of-turn
    markers, looked up once per file (a second quant with the same metadata reuses them unread)."""

    has_vocab: bool
    ids: dict[str, int | None] = field(default_factory=dict)
    """Looked-up text -> the first token id with exactly that text (None: not a token)."""
    types: dict[int, int | None] = field(default_factory=dict)
    """Token id -> its ``tokenizer.ggml.token_type`` (None when the file has no types)."""
    invalid_utf8: int | None = None
    """File offset of the first byte that leaves a token invalid UTF-8 (GT001), None when all are valid."""

    def token_id(self, text: str) -> int | None:
        return self.ids.get(text)

    def token_type(self, token_id: int) -> int | None:
        return self.types.get(token_id)


_UNKNOWN: Any = object()


def vocab_facts(tset: Any, templates: tuple[TemplateFacts, ...], *, invalid_utf8: Any = _UNKNOWN) -> VocabFacts:
    """Look up every marker and end-of-turn text of ``templates`` in ``tset``'s vocabulary. ``invalid_utf8``:
    the vocabulary's first invalid UTF-8 byte when already known (the audit's cache keeps it per file)."""
    if not tset.has_vocab:
        return VocabFacts(False)
    texts = {m for t in templates for m in t.markers} | {t.end_of_turn for t in templates if t.end_of_turn}
    ids = {text: tset.token_id(text) for text in sorted(texts)}
    types = {tid: tset.token_type(tid) for tid in ids.values() if tid is not None}
    invalid = tset.invalid_token_utf8() if invalid_utf8 is _UNKNOWN else invalid_utf8
    return VocabFacts(True, ids, types, invalid)


def _decode(tp: Any, value: Any) -> Any:
    """``value`` (JSON data from ``asdict``) as an instance of the annotated type ``tp``: dataclasses by their
    field hints, ``X | None``, ``tuple[X, ...]``, ``tuple[A, B]``, ``dict[str, X]`` and plain scalars. Data of
    another shape (a cache entry that is not facts: ``"sha256": 7``, a list for a record) raises TypeError,
    never gives facts of the wrong types to the rules."""
    import dataclasses
    import types
    import typing

    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        hints = _hints(tp)
        known = {f.name for f in dataclasses.fields(tp) if f.init}
        value = _mapping(value)
        missing = known - value.keys()
        if missing:
            # asdict writes every field: one missing is a damaged record, never the field's default (a
            # dropped "llamacpp" would read as "llama.cpp not asked" and hide GT606)
            raise TypeError(f"{tp.__name__} without {', '.join(sorted(missing))}")
        return tp(**{k: _decode(hints[k], v) for k, v in value.items() if k in known})
    if origin in (typing.Union, types.UnionType):
        if value is None:
            return None
        arms = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(arms) != 1:
            raise TypeError(f"cannot check a value against {tp}")
        return _decode(arms[0], value)
    if origin is tuple:
        args = typing.get_args(tp)
        if not isinstance(value, list | tuple):
            raise TypeError(f"expected a list, got {type(value).__name__}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_decode(args[0], v) for v in value)
        if len(args) != len(value):
            raise TypeError(f"expected {len(args)} items, got {len(value)}")
        return tuple(_decode(a, v) for a, v in zip(args, value, strict=True))
    if origin is dict:
        _, vt = typing.get_args(tp)
        return {k: _decode(vt, v) for k, v in _mapping(value).items()}
    return _scalar(tp, value)


def _mapping(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise TypeError(f"expected an object, got {type(value).__name__}")
    return value


def _scalar(tp: Any, value: Any) -> Any:
    ok = {
        str: lambda v: isinstance(v, str),
        bool: lambda v: isinstance(v, bool),
        int: lambda v: isinstance(v, int) and not isinstance(v, bool),
        float: lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    }.get(tp)
    if ok is None:
        raise TypeError(f"cannot check a value against {tp}")
    if not ok(value):
        raise TypeError(f"expected {tp.__name__}, got {type(value).__name__}")
    return float(value) if tp is float else value


@functools.cache
def _hints(tp: type) -> dict[str, Any]:
    import typing

    return typing.get_type_hints(tp)
