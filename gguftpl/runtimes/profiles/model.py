"""The shape of a runtime profile: facts in words, each with where it was read."""

from __future__ import annotations

from dataclasses import dataclass, fields

from gguftpl.engines import registry

ENGINE_IDS = registry.ENGINE_IDS
"""The engine adapters a profile may name (the one list: :mod:`gguftpl.engines.registry`)."""

TEMPLATE_CHOICES = ("tool_use_with_tools", "default_only", "named_list", "ollama")
"""``tool_use_with_tools``: ``tokenizer.chat_template.tool_use`` when the request has tools, else the default
(llama.cpp). ``default_only``: ``tokenizer.chat_template`` and nothing else. ``named_list``: a list of named
templates, ``tool_use`` by name when tools. ``ollama``: a Modelfile renderer, a Go TEMPLATE, or the GGUF's Jinja
through its bundled llama-server."""

CAPABILITY_KINDS = ("always", "caps_probe", "substring", "go_vars", "flag", "template_detect", "format_list")
IGNORED_TOOLS = ("drop", "inject", "refuse")
"""What a tools request becomes when the template does not render them: silently dropped, the runtime's own tool
prompt injected, or refused before rendering."""


@dataclass(frozen=True)
class Sourced:
    """One fact in words, with where it was read."""

    text: str
    sources: tuple[str, ...]


@dataclass(frozen=True)
class RuntimeProfile:
    """One runtime, as its own code renders a tools request."""

    id: str
    """Stable id (``llama.cpp``, ``lmstudio``, ...)."""
    name: str
    version: str
    """The version or commit the facts were read at."""
    based_on: str | None
    """The profile this runtime is built on (Jan on ``llama.cpp``), when it is."""
    hosts: tuple[str, ...]
    """Products that run this runtime underneath and so share its behaviour."""
    template_choice: str
    """One of :data:`TEMPLATE_CHOICES`."""
    template_source: Sourced
    engine: str
    """The engine adapter id (:data:`ENGINE_IDS`) that renders its Jinja."""
    engine_settings: Sourced
    variables: tuple[str, ...]
    """What the template sees beside ``messages`` (and ``tools``)."""
    variables_source: Sourced
    tools_capability: str
    """One of :data:`CAPABILITY_KINDS`: how it decides the model "supports tools"."""
    tools_capability_source: Sourced
    ignored_tools: str
    """One of :data:`IGNORED_TOOLS`."""
    ignored_tools_source: Sourced
    parser_source: Sourced
    message_handling: Sourced
    capability_substrings: tuple[str, ...] = ()
    """For ``substring``: the texts whose presence in the template counts as "supports tools"."""
    refusal_message: str = ""
    """The exact error text it answers (HTTP 400) when it refuses a tools request."""
    parser_follows_template: bool = False
    """The tool-call parser is derived from the template itself (llama.cpp's autoparser)."""
    parser_dialects: tuple[str, ...] = ()
    """Call dialects its parser takes (names from :mod:`gguftpl.templates.dialect`), beyond the template's own."""
    parser_names: tuple[tuple[str, str | None], ...] = ()
    """Selectable parsers (``--tool-call-parser NAME``...) and the dialect each takes (None: none of ours)."""
    also_engines: tuple[str, ...] = ()
    """Other engines it renders with on another path (Ollama's native mode: llama-server)."""

    @property
    def facts(self) -> tuple[Sourced, ...]:
        return tuple(getattr(self, f.name) for f in fields(self) if isinstance(getattr(self, f.name), Sourced))

    @property
    def sources(self) -> tuple[str, ...]:
        """Every source its facts cite, in order, once each."""
        return tuple(dict.fromkeys(s for fact in self.facts for s in fact.sources))

    @property
    def injects_tool_prompt(self) -> bool:
        return self.ignored_tools == "inject"
