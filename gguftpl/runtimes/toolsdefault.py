"""A default template that carries the tools (``gguftpl patch --tools-in-default``), proven before it is written.

Runtimes that read only ``tokenizer.chat_template`` (Ollama, LM Studio, vLLM, other OpenAI-compatible servers)
never see a ``tool_use`` template. The new default is ``{% if tools %}`` + tool_use + ``{% else %}`` + the old
default + ``{% endif %}``: with tools it is tool_use, without them the old default, which is also what
llama.cpp chooses (``tool_use`` for a request with a non-empty ``tools`` array). Gluing two templates changes
what Jinja's whitespace rules see, so each branch is adjusted (:func:`combine`) and the result is proven by
rendering probe conversations, every one of them, before anything is written:

- transformers' semantics (``render_hf``, the bounded worker): the new default against the old default without
  tools and against tool_use with tools;
- llama.cpp (when xllamacpp is installed): the new default alone (a runtime reading only the default, rendered by
  llama.cpp's engine) and the patched file as llama.cpp loads it, both against the original file.

Any prompt that differs is shown and the patch refuses unless the user accepts the differences.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gguftpl.errors import PatchError

TRANSFORMERS = "transformers"
LLAMACPP_ALONE = "llama.cpp, the new default alone"
LLAMACPP_FILE = "llama.cpp, the patched file"
_BOUND = ("timeout", "too_large", "memory")


def _drop_trailing_newline(text: str) -> str:
    # Jinja drops one trailing newline of a template's source (keep_trailing_newline=False); inside the new
    # default the branch is no longer at the end, so that newline would be printed
    for nl in ("\r\n", "\n", "\r"):
        if text.endswith(nl):
            return text[: -len(nl)]
    return text


def _branch(text: str) -> str:
    text = _drop_trailing_newline(text)
    if text.startswith(("\n", "\r")):
        text = "\n" + text  # trim_blocks eats the first newline after our block tag: give it one of ours
    if re.search(r"(?:^|[\r\n])[ \t]+$", text):
        text += "{{ '' }}"  # lstrip_blocks would strip the indentation before our next tag: end the line with output
    return _end_apart(text)


def _end_apart(text: str) -> str:
    """``text`` ending so that the tag glued after it stays that tag. A template that parses ends in text, not
    inside a tag, and every delimiter (``{{``, ``{%``, ``{#``) starts with ``{``: a text ending in ``{`` (one at
    most: ``{{`` would open an expression) would run into our ``{% else %}`` as ``{{%``, another token. That
    brace is printed by an expression of its own instead; Jinja prints the same."""
    if not text.endswith("{"):
        return text
    return text[:-1] + "{{ '{' }}"


def combine(default: str, tool_use: str) -> str:
    """The default that renders ``tool_use`` when tools are passed and ``default`` otherwise."""
    return "{% if tools %}" + _branch(tool_use) + "{% else %}" + _branch(default) + "{% endif %}"


# ---------------------------------------------------------------------------------------------- the probes


@dataclass(frozen=True)
class Probe:
    name: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    add_generation_prompt: bool = True


def probes() -> list[Probe]:
    """The conversations rendered: without tools (must match the old default) and with tools (must match
    tool_use), including a tool round trip with the result in the history."""
    from gguftpl.templates import probes as p

    tools = p.canary_tools()
    return [
        Probe("plain", p.plain_conversation(), None),
        Probe("plain, no generation prompt", p.plain_conversation(), None, False),
        Probe("system message", p.plain_conversation(system=True), None),
        Probe("multi-turn", p.multi_turn_conversation(), None),
        Probe("tool round trip, no tools passed", p.tool_round_trip_conversation(), None),
        Probe("tools", p.tools_conversation(), tools),
        Probe("tools and a system message", p.plain_conversation(system=True), tools),
        Probe("tools, multi-turn", p.multi_turn_conversation(), tools),
        Probe("tool round trip", p.tool_round_trip_conversation(), tools),
    ]


# ---------------------------------------------------------------------------------------------- the proof


@dataclass(frozen=True)
class Rendered:
    """One engine's rendering of one probe: the prompt, or why it failed."""

    prompt: str | None
    error: str = ""

    def shown(self) -> str:
        return self.prompt if self.prompt is not None else f"(fails: {self.error})"

    def failure(self) -> str | None:
        """The failure without where it happened (None when it rendered): the same exception raised by the old
        template and by the new default, whose line and column move with its place in it, is one failure."""
        if self.prompt is not None:
            return None
        text = _POSITION.sub("", self.error)
        lines = [ln for ln in text.splitlines() if not _EXCERPT.match(ln)]
        return "\n".join(ln.rstrip() for ln in lines).strip()


_POSITION = re.compile(r"\s*(?:\(template line \d+\)|at line \d+, column \d+|\(in <string>:\d+\)|line \d+)")
_EXCERPT = re.compile(r"^\s*(?:\.\.\..*|\^+)\s*$")
"""llama.cpp's error shows the source around the failure (``...e['role'] == 'tool' %}…``) and a caret under it."""


@dataclass(frozen=True)
class Comparison:
    engine: str
    probe: str
    tools: bool
    expected_from: str
    """What the new default must render like: ``default`` or ``tool_use`` (transformers), ``the original file``."""
    expected: Rendered
    got: Rendered

    @property
    def same(self) -> bool:
        """The same prompt, or the same failure (the original raises there too, with the same error)."""
        if self.expected == self.got:
            return True
        failed = self.expected.failure()
        return failed is not None and failed == self.got.failure()

    @property
    def both_fail(self) -> bool:
        """The original fails on this conversation too (with another error)."""
        return self.expected.prompt is None and self.got.prompt is None

    def diff(self, max_lines: int = 40) -> list[str]:
        lines = list(
            difflib.unified_diff(
                self.expected.shown().splitlines(keepends=True),
                self.got.shown().splitlines(keepends=True),
                f"{self.expected_from}",
                "new default",
            )
        )
        lines = [line.rstrip("\n") + ("" if line.endswith("\n") else "  (no newline)") for line in lines]
        if len(lines) > max_lines:
            lines[max_lines:] = [f"... {len(lines) - max_lines} more diff lines"]
        return lines


@dataclass(frozen=True)
class ToolsDefaultProof:
    """Every probe rendering compared, per engine."""

    comparisons: tuple[Comparison, ...]
    skipped: tuple[str, ...] = ()
    """Engines not run, and why (``llama.cpp: xllamacpp is not installed``)."""

    @property
    def differences(self) -> list[Comparison]:
        return [c for c in self.comparisons if not c.same]

    @property
    def ok(self) -> bool:
        return not self.differences

    def summary(self) -> str:
        """``transformers: 9 of 9 prompts identical; llama.cpp, …: 9 of 9 identical`` (the provenance)."""
        parts = []
        for engine in dict.fromkeys(c.engine for c in self.comparisons):
            these = [c for c in self.comparisons if c.engine == engine]
            parts.append(f"{engine}: {sum(c.same for c in these)} of {len(these)} prompts identical")
        parts += [f"{s} (not run)" for s in self.skipped]
        return "; ".join(parts)

    def text(self) -> str:
        """Per engine the count of identical prompts and the probes that differ, then each difference as a diff."""
        lines = ["proof, before writing: the new default rendered on probe conversations"]
        for engine in dict.fromkeys(c.engine for c in self.comparisons):
            these = [c for c in self.comparisons if c.engine == engine]
            lines.append(f"  {engine}: {sum(c.same for c in these)} of {len(these)} prompts identical")
            lines += [
                f"    SAME FAILURE: {c.probe}: the original fails on it too, with the same error"
                for c in these
                if c.same and c.both_fail
            ]
            lines += [
                f"    DIFFERS: {c.probe} (vs {c.expected_from}" + ("; the original fails too)" if c.both_fail else ")")
                for c in these
                if not c.same
            ]
        lines += [f"  {s}: not run" for s in self.skipped]
        for c in self.differences:
            lines += [
                "",
                f"{c.engine}, {c.probe}: the new default's prompt differs from {c.expected_from}'s",
                *c.diff(),
            ]
        return "\n".join(lines) + "\n"


def _hf(text: str, probe: Probe, bos: str, eos: str) -> Rendered:
    from gguftpl.engines.transformers import TemplateRenderError, render_hf

    try:
        return Rendered(render_hf(text, probe.messages, probe.tools, probe.add_generation_prompt, bos, eos))
    except TemplateRenderError as exc:
        if exc.kind in _BOUND:
            raise PatchError(f"the render of probe '{probe.name}' had to be stopped: {exc}") from None
        # the line number moves with the template's place in the new default: compare the error itself
        return Rendered(None, re.sub(r" \(template line \d+\)$", "", str(exc)))


def prove_transformers(default: str, tool_use: str, new_default: str, bos: str, eos: str) -> list[Comparison]:
    """The new default against the old default (no tools) and tool_use (tools), under transformers' semantics."""
    out = []
    for probe in probes():
        name, old = ("tool_use", tool_use) if probe.tools else ("default", default)
        out.append(
            Comparison(
                TRANSFORMERS,
                probe.name,
                bool(probe.tools),
                name,
                _hf(old, probe, bos, eos),
                _hf(new_default, probe, bos, eos),
            )
        )
    return out


def _apply(session: Any, probe: Probe) -> Rendered:
    from gguftpl.errors import LlamaCppError

    try:
        return Rendered(
            session.apply_template(probe.messages, probe.tools, add_generation_prompt=probe.add_generation_prompt)
        )
    except LlamaCppError as exc:
        return Rendered(None, str(exc))


def prove_llamacpp(path: str, old: Mapping[str, str], new: Mapping[str, str]) -> tuple[list[Comparison], str]:
    """The original templates ``old`` against the new ones (as the patched file) and the new default alone, through
    llama.cpp's own engine on a stand-in of ``path``. Returns the comparisons, or ``[]`` and why it did not run."""
    from gguftpl.engines import llamacpp_env as llamaenv
    from gguftpl.engines.llamacpp_session import LlamaCppSession
    from gguftpl.errors import LlamaCppError

    if not llamaenv.llamacpp_available():
        return [], "llama.cpp: xllamacpp is not installed (pip install 'gguftpl[llamacpp]')"
    refused = _load_check(old, new)
    if refused:
        return [], refused
    alone = {"default": new["default"]}
    out: list[Comparison] = []
    try:
        with LlamaCppSession(path, templates=old) as s_old, LlamaCppSession(path, templates=new) as s_new:
            with LlamaCppSession(path, templates=alone) as s_alone:
                for probe in probes():
                    want = _apply(s_old, probe)
                    for engine, session in ((LLAMACPP_ALONE, s_alone), (LLAMACPP_FILE, s_new)):
                        got = _apply(session, probe)
                        out.append(Comparison(engine, probe.name, bool(probe.tools), "the original file", want, got))
    except LlamaCppError as exc:
        raise PatchError(f"llama.cpp could not render the candidate templates: {exc}") from None
    return sorted(out, key=lambda c: c.engine), ""


def _load_check(old: Mapping[str, str], new: Mapping[str, str]) -> str:
    """Load every template in the parse-check child first: one that hangs or crashes llama.cpp never reaches
    this process, and a new default llama.cpp refuses would stop llama-server at startup."""
    from gguftpl.engines.llamacpp import crashed_or_hung, parse_check
    from gguftpl.gguf.templateset import sha256_text

    texts = list(dict.fromkeys([*old.values(), *new.values()]))
    verdicts = parse_check(texts)
    for text in texts:
        error = verdicts.get(sha256_text(text))
        if error and crashed_or_hung(error):
            raise PatchError(f"llama.cpp crashes or hangs loading a template of this file: {error}")
    new_error = verdicts.get(sha256_text(new["default"]))
    if new_error:
        if verdicts.get(sha256_text(old.get("default", ""))):
            return "llama.cpp: it refuses the old default too, so nothing can be compared"
        raise PatchError(f"llama.cpp refuses to load the new default template (llama-server would exit): {new_error}")
    return ""


@dataclass(frozen=True)
class ToolsDefault:
    """The new default and its proof, for a file whose templates (after any upstream copy) are ``templates``."""

    default: str
    """The default it replaces (the file's, or upstream's with ``--from-hub``)."""
    tool_use: str
    new_default: str
    proof: ToolsDefaultProof
    notes: tuple[str, ...] = field(default_factory=tuple)


class NothingToCarryError(PatchError):
    """No default to carry the tools into, or no tool_use to carry (the caller knows where the templates came from
    and what the file's repair is, and says so)."""


class NoToolUseError(NothingToCarryError):
    """There is no tool_use template to carry into the default."""


def tools_in_default(
    path: str,
    templates: Mapping[str, str],
    bos: str = "",
    eos: str = "",
    *,
    llamacpp: bool = True,
) -> ToolsDefault:
    """Build the new default from ``templates`` (name -> text) and prove it (see the module's docstring).
    Raises ``PatchError`` when there is nothing to carry: no default, no tool_use, a tool_use that puts no tool
    schema in the prompt, or a default that already does."""
    default, tool_use = templates.get("default"), templates.get("tool_use")
    if default is None:
        raise NothingToCarryError(f"{path} has no default template to carry the tools into")
    if tool_use is None:
        raise NoToolUseError(f"{path} has no tool_use template to carry into the default")
    if not _renders_tools(tool_use, "tool_use", bos, eos):
        raise PatchError("the tool_use template does not put the tool schemas in the prompt: nothing to carry")
    if _renders_tools(default, "default", bos, eos):
        raise PatchError("the default template already puts the tool schemas in the prompt: nothing to do")
    new_default = combine(default, tool_use)
    comparisons = prove_transformers(default, tool_use, new_default, bos, eos)
    skipped: list[str] = []
    if llamacpp:
        found, why = prove_llamacpp(path, dict(templates), {**templates, "default": new_default})
        comparisons += found
        if why:
            skipped.append(why)
    else:
        skipped.append("llama.cpp: not asked")
    return ToolsDefault(default, tool_use, new_default, ToolsDefaultProof(tuple(comparisons), tuple(skipped)))


def _renders_tools(text: str, name: str, bos: str, eos: str) -> bool:
    """The template's facts say the tool schemas reach the prompt (the analysis decides it, not this module)."""
    from gguftpl.analysis import analyze_template_text
    from gguftpl.runtimes.view import reaches

    return bool(reaches(analyze_template_text(text, name=name, bos_token=bos, eos_token=eos)))


def refuse_unless_accepted(result: ToolsDefault, accept: bool) -> None:
    if result.proof.ok or accept:
        return
    differences = result.proof.differences
    n = len(differences)
    both = [c for c in differences if c.both_fail]
    also = ""
    if both:
        names = ", ".join(dict.fromkeys(f"'{c.probe}'" for c in both))
        also = (
            f"; on {len(both)} of them ({names}) the original fails too, with another error: "
            f"{both[0].expected.error.splitlines()[0][:160]!r} vs {both[0].got.error.splitlines()[0][:160]!r}"
        )
    raise PatchError(
        f"{n} probe prompt{'s' if n != 1 else ''} of the new default differ{'s' if n == 1 else ''} from the "
        f"originals (shown above){also}; nothing written. Accept them with --accept-differences"
    )


def no_tool_use_message(base: Any) -> str:
    """Why ``--tools-in-default`` after upstream's templates has nothing to carry: upstream has no tool_use, and
    its default (copied or not) puts no tool schema in the prompt."""
    from gguftpl.repair import NO_TOOL_TEMPLATE

    up = base.upstream
    who = f"upstream {up.label}" if up is not None else "upstream"
    names = ", ".join(sorted(up.templates)) if up is not None else ""
    return (
        f"--tools-in-default: {who} has no tool_use template (its templates: {names or 'none'}) and its default "
        f"puts no tool schema in the prompt, so there is nothing to carry into the default: {NO_TOOL_TEMPLATE}; "
        "nothing written"
    )
