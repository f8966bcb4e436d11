"""The Ollama fix: a Modelfile whose TEMPLATE renders the tools, proven by Ollama's Go engine first.

``ollama create NAME -f Modelfile`` writes a new manifest (ollama/ollama ``server/create.go`` @fb307609: ``FROM``
the GGUF, whose blob it reuses by digest; ``TEMPLATE`` becomes the template layer; ``PARAMETER`` lines the
params layer; ``SYSTEM`` the system layer): no blob is modified, and the GGUF named by ``FROM`` is only read.

The TEMPLATE is gguftpl's Go template for the tool-call dialect of the model's own tool template
(``ollama_tools/<dialect>.gotmpl``, see its SOURCES.md), kept only when Ollama's Go engine, on the probe
conversations, (1) finds ``.Tools`` among its variables (Ollama's tools capability), (2) puts the canary tool's
schema in the prompt, (3) renders the tool call and its result in a round trip, and (4) renders a chat without tools
exactly as the model's current TEMPLATE does (nothing changes for a request without tools). The stop parameters
are the model's own plus the end-of-turn marker of its template when they lack it. Anything else is refused with
the reason (:class:`~gguftpl.errors.PatchError`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gguftpl.errors import PatchError
from gguftpl.templates import probes

if TYPE_CHECKING:
    from gguftpl.stores.model import StoreModel
    from gguftpl.templates.facts import EngineFacts, TemplateFacts

__all__ = ["Modelfile", "ollama_modelfile"]


@dataclass(frozen=True)
class Modelfile:
    text: str
    """The Modelfile."""
    name: str
    """The model it recreates (``hermes-test:latest``)."""
    template: str
    stops: tuple[str, ...]
    proof: tuple[str, ...] = field(default_factory=tuple)
    """What the Go engine showed, one line each."""

    def command(self, path: str) -> str:
        import shlex

        return f"ollama create {shlex.quote(self.name)} -f {shlex.quote(path)}"


def _dialect_template(dialect: str) -> str | None:
    from importlib.resources import files

    res = files("gguftpl.runtimes") / "ollama_tools" / f"{dialect}.gotmpl"
    return res.read_text(encoding="utf-8") if res.is_file() else None


def _tool_template(templates: list[TemplateFacts]) -> TemplateFacts | None:
    by = {t.name: t for t in templates}
    for name in ("tool_use", "default"):
        t = by.get(name)
        if t is not None and t.renders_tools and t.dialect not in ("none", "unknown"):
            return t
    return None


def _prove(go: EngineFacts, before: str | None) -> list[str]:
    """The proof lines; PatchError at the first check that fails."""
    if go.load_error is not None or not go.installed or go.unknown:
        raise PatchError(f"Ollama's Go engine cannot render the TEMPLATE: {go.load_error or go.unknown}")
    if not go.reads_tools:
        raise PatchError("the TEMPLATE does not read .Tools: Ollama would still refuse a tools request")
    if not go.tools_in_prompt:
        raise PatchError("the TEMPLATE puts no tool schema in the prompt (Go engine, tools probe)")
    trip = go.text(probes.ROUND_TRIP) or ""
    if probes.CANARY_TOOL_NAME not in trip or probes.CANARY_RESULT not in trip:
        raise PatchError("the TEMPLATE loses the tool call or its result in a round trip (Go engine)")
    lines = [
        "Go engine: .Tools among the TEMPLATE's variables (Ollama advertises tools)",
        f"Go engine: the canary tool's name and parameter ({probes.CANARY_TOOL_NAME}) are in the tools prompt",
        "Go engine: a tool round trip renders the call and its result",
    ]
    if before is not None:
        if go.text(probes.PLAIN) != before:
            raise PatchError(
                "the TEMPLATE renders a chat without tools differently from the model's current TEMPLATE: the model "
                "is not in this dialect's turn format"
            )
        lines.append("Go engine: a chat without tools renders byte for byte as with the current TEMPLATE")
    return lines


def _kept(model: StoreModel, text: str, from_default: str | None) -> None:
    """PatchError unless Ollama, given the new TEMPLATE, renders it (``ollamamanifest.mode`` on the manifest ``ollama
    create`` writes): ``OLLAMA_GO_TEMPLATE`` set false, or a GGUF Jinja that shows more capabilities
    (PreferChatTemplate), would drop it for the GGUF's own template and the proof above would be of nothing."""
    from dataclasses import replace

    from gguftpl.runtimes.ollamamanifest import mode

    assert model.ollama is not None
    how, why = mode(replace(model.ollama, template=text), from_default)
    if how != "template":
        raise PatchError(f"{model.ref}: Ollama would not render the new TEMPLATE, so it cannot fix the tools: {why}")


def _quoted(value: str, what: str) -> str:
    if '"""' in value:
        raise PatchError(f'the {what} holds """, which a Modelfile cannot quote')
    return f'"""{value}"""'


def _params(params: dict[str, Any], stops: tuple[str, ...]) -> list[str]:
    out = []
    for s in stops:
        if '"' in s or "\n" in s:
            raise PatchError(f"stop {s!r} cannot be written as a Modelfile PARAMETER")
        out.append(f'PARAMETER stop "{s}"')
    for k, v in sorted(params.items()):
        if k == "stop":
            continue
        for item in v if isinstance(v, list) else [v]:
            if isinstance(item, (str, int, float, bool)) and "\n" not in str(item):
                out.append(f"PARAMETER {k} {str(item).lower() if isinstance(item, bool) else item}")
    return out


def ollama_modelfile(
    model: StoreModel,
    templates: list[TemplateFacts],
    specials: tuple[str, str] = ("", ""),
    source: str | None = None,
    from_default: str | None = None,
) -> Modelfile:
    """The Modelfile that gives Ollama model ``model`` a TEMPLATE rendering its tools (``templates``: the facts of
    its GGUF's templates; ``source``: the GGUF ``FROM`` names, default the model's own blob; ``from_default``: that
    GGUF's ``tokenizer.chat_template``, which Ollama may prefer to the TEMPLATE)."""
    from gguftpl.templates.enginefacts import go_template_facts

    layers = model.ollama
    if layers is None:
        raise PatchError(f"{model.ref} is not an Ollama model: a Modelfile is Ollama's")
    if layers.renderer or layers.parser:
        raise PatchError(f"{model.ref}: Ollama renders it with its own Go code (renderer/parser), never a TEMPLATE")
    own = _tool_template(templates)
    if own is None:
        raise PatchError(f"{model.ref}: no template of the GGUF renders tools: no dialect to write a TEMPLATE in")
    text = _dialect_template(own.dialect)
    if text is None:
        raise PatchError(f"{model.ref}: gguftpl has no Go TEMPLATE for the {own.dialect} tool-call dialect")
    before = None
    if layers.template is not None:
        old = go_template_facts(layers.template, *specials)
        before = old.text(probes.PLAIN)
    proof = _prove(go_template_facts(text, *specials), before)
    _kept(model, text, from_default)
    default = next((t for t in templates if t.name == "default"), None)
    stops = tuple(layers.stops)
    eot = own.end_of_turn or (default.end_of_turn if default is not None else None)
    if eot and eot not in stops and eot != specials[1]:
        stops += (eot,)
    name = model.ref.removeprefix("ollama://")
    lines = [
        f"# written by gguftpl for {model.ref}: its TEMPLATE rendered by Ollama's Go engine before this was written",
        f"FROM {source or model.path}",
        f"TEMPLATE {_quoted(text, 'TEMPLATE')}",
    ]
    if layers.system is not None:
        lines.append(f"SYSTEM {_quoted(layers.system, 'SYSTEM')}")
    lines += _params(layers.params, stops)
    return Modelfile("\n".join(lines) + "\n", name, text, stops, tuple(proof))
