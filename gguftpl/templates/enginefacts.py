"""Every engine's view of one template as :class:`~gguftpl.templates.facts.EngineFacts`.

transformers' and llama.cpp's renders are gathered by :mod:`gguftpl.templates.gather` (they decide the probes
other facts need) and only read here; the other engines (``hfjs``, ``minijinja/<runtime>``) are asked by
:func:`ask_engines` the probes a runtime's tools request needs, each in its own bounded worker, in parallel with
the rest of the gathering. An engine that is not installed is recorded as such, with its install command: a
verdict that needs it is "unknown", never another engine's answer.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from gguftpl.templates import probes
from gguftpl.templates.facts import EngineDifference, EngineFacts, EngineRender
from gguftpl.templates.verdicts import engine_tools_verdict

if TYPE_CHECKING:
    from gguftpl.templates.facts import TemplateFacts

ASKED_PROBES = (probes.PLAIN, probes.TOOLS, probes.TOOLS_WITH_SYSTEM, probes.ROUND_TRIP)
"""What the other engines render: a chat without tools, the tools request (alone and with a system message) and
a tool round trip."""

_PROMPT_KEYS = {
    probes.PLAIN: "plain",
    probes.TOOLS: "tools",
    probes.TOOLS_WITH_SYSTEM: "tools with system",
    probes.SYSTEM: "system",
    probes.MULTI: "multi",
    probes.ROUND_TRIP: "round_trip",
}
"""Probe name -> the key of ``TemplateFacts.prompts`` that holds transformers' render of it."""


def ask_engines(
    text: str, engine_ids: Sequence[str], bos: str, eos: str, specials: Mapping[str, Any] | None = None
) -> dict[str, EngineFacts]:
    """Each engine's facts for ``text`` (engines asked in parallel threads; each engine's worker is bounded)."""
    if not engine_ids:
        return {}
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=len(engine_ids), thread_name_prefix="gguftpl-engine") as pool:
        futures = {eid: pool.submit(_ask_one, eid, text, bos, eos, dict(specials or {})) for eid in engine_ids}
        return {eid: f.result() for eid, f in futures.items()}


def _ask_one(engine_id: str, text: str, bos: str, eos: str, specials: dict[str, Any]) -> EngineFacts:
    from gguftpl.engines import registry

    engine = registry.get(engine_id)
    available = registry.availability(engine_id)
    if not available.installed:
        return EngineFacts(engine_id, installed=False, unknown=available.unknown_reason())
    curated = ""
    if engine_id == "ollama":
        # Ollama's Go engine renders not this Jinja text but the curated template ``ollama create`` puts in its
        # place (gguftpl.engines.ollama_registry: its registry and Levenshtein match); no match: nothing to render
        from gguftpl.engines import ollama_registry as ollama

        found = ollama.nearest(text)
        if found is None:
            return EngineFacts(engine_id, version=available.version)
        curated, text = found[0], ollama.curated(found[0]).text
    return _render_facts(engine_id, engine, available.version, text, bos, eos, specials, curated)


def _render_facts(
    engine_id: str, engine: Any, version: str, text: str, bos: str, eos: str, specials: dict[str, Any], template: str
) -> EngineFacts:
    """``engine``'s facts for ``text`` loaded and rendered on :data:`ASKED_PROBES` (``template``: what the facts
    say was rendered in the template's place, '' for the template itself)."""
    from gguftpl.engines.base import OVERRUN, RenderRequest

    curated = template
    err = engine.load(text)
    if err is not None:
        return EngineFacts(engine_id, version=version, load_error=err.message, load_line=err.line, template=curated)
    variables = {**specials, "bos_token": bos, "eos_token": eos}
    shapes = {name: (msgs, tools, agp) for name, msgs, tools, agp in probes.engine_probes()}
    requests = [RenderRequest(shapes[p][0], shapes[p][1], shapes[p][2], variables) for p in ASKED_PROBES]
    renders: dict[str, EngineRender] = {}
    for probe, r in zip(ASKED_PROBES, engine.render(text, requests), strict=True):
        e = r.error
        renders[probe] = EngineRender(
            r.text, e.message if e else None, bool(e and e.kind == OVERRUN), e.line if e else None
        )
    reads_tools = None
    if engine_id == "ollama":  # Ollama's tools capability: "tools" among the Go template's Vars()
        from gguftpl.engines.ollama import OllamaEngine

        names = engine.template_vars(text) if isinstance(engine, OllamaEngine) else None
        reads_tools = "tools" in names if names is not None else None
    return EngineFacts(
        engine_id,
        version=version,
        renders=renders,
        tools_in_prompt=engine_tools_verdict(renders.get(probes.TOOLS)),
        template=curated,
        reads_tools=reads_tools,
    )


GO_RENDERS = [0]
"""Go TEMPLATEs rendered by :func:`go_template_facts` in this process (the rest came from the cache)."""


def go_template_facts(
    text: str, bos: str = "", eos: str = "", specials: Mapping[str, Any] | None = None
) -> EngineFacts:
    """Ollama's Go engine's facts for a Go ``TEMPLATE`` taken as it is (a manifest's template layer, a Modelfile's
    ``TEMPLATE``), rendered on :data:`ASKED_PROBES`, with ``.Tools`` among its ``Vars()`` (Ollama's tools
    capability) in ``reads_tools``. Kept in the facts cache folder under the text, the tokens and the code's
    identity, so a warm run renders nothing."""
    import hashlib
    from dataclasses import asdict

    from gguftpl.engines import registry
    from gguftpl.templates.cachedisk import CacheFolder
    from gguftpl.templates.facts import _decode
    from gguftpl.templates.factstore import DISK_USE, cache_folder, code_identity

    available = registry.availability("ollama")
    if not available.installed:
        return EngineFacts("ollama", installed=False, unknown=available.unknown_reason())
    extra = tuple(sorted((specials or {}).items()))
    key = repr((code_identity(), available.version, hashlib.sha256(text.encode()).hexdigest(), bos, eos, extra))
    use = DISK_USE.get()
    folder = cache_folder() if use != "off" else None
    disk = CacheFolder(folder) if folder is not None else None
    found = disk.read("gotemplates", key) if disk is not None and use == "on" else None
    if found is not None:
        try:
            return _decode(EngineFacts, found)  # type: ignore[no-any-return]
        except (TypeError, ValueError, KeyError):
            disk.remove("gotemplates", key)  # type: ignore[union-attr]
    facts = _render_facts("ollama", registry.get("ollama"), available.version, text, bos, eos, dict(extra), "")
    GO_RENDERS[0] += 1
    if disk is not None and facts.installed and not facts.unknown:
        disk.write("gotemplates", key, asdict(facts))
    return facts


def engine_facts(t: TemplateFacts, engine_id: str) -> EngineFacts | None:
    """What ``engine_id`` did with ``t``: transformers' own renders (never the lenient sandbox's), llama.cpp's,
    or another engine's; None when that engine was not asked."""
    if engine_id == "transformers":
        return transformers_engine_facts(t)
    if engine_id == "llamacpp":
        return llamacpp_engine_facts(t)
    return t.engines.get(engine_id)


def transformers_engine_facts(t: TemplateFacts) -> EngineFacts:
    """transformers' own renders of ``t`` (what vLLM and SGLang render): a probe the lenient sandbox rendered after
    transformers refused it is transformers' error here."""
    if t.parse_error is not None:
        return EngineFacts("transformers", load_error=t.parse_error.message, load_line=t.parse_error.line)
    renders: dict[str, EngineRender] = {}
    for probe, key in _PROMPT_KEYS.items():
        failure = next((e for e in t.render_errors if e.probe == probe), None)
        if failure is not None:
            renders[probe] = EngineRender(None, failure.message, failure.overran, failure.line)
        elif probe in t.strict and key in t.prompts:
            renders[probe] = EngineRender(t.prompts[key])
    if t.overrun is not None:
        renders.setdefault(t.overrun.probe, EngineRender(None, t.overrun.message, True, t.overrun.line))
    return EngineFacts("transformers", renders=renders, tools_in_prompt=engine_tools_verdict(renders.get(probes.TOOLS)))


def llamacpp_engine_facts(t: TemplateFacts) -> EngineFacts | None:
    """llama.cpp's renders of ``t`` loaded as a file's default template; None when llama.cpp was not asked. A
    template the bounded renderer had to stop is never run there (:mod:`gguftpl.templates.gather`): every probe
    is then an overrun that says so, as ``verify`` says it (GT404 is the finding)."""
    llama = t.llamacpp
    if llama is None:
        return None if t.overrun is None else _not_run(t.overrun.message)
    if llama.unchecked:
        return EngineFacts("llamacpp", unknown=f"unknown: llama.cpp could not be asked ({llama.unchecked})")
    return EngineFacts(
        "llamacpp",
        load_error=llama.load_error,
        renders=dict(llama.renders),
        tools_in_prompt=engine_tools_verdict(llama.renders.get(probes.TOOLS)),
    )


def _not_run(overrun: str) -> EngineFacts:
    """llama.cpp's view of a render bomb: every probe an overrun, none run."""
    why = (
        f"not run through llama.cpp: transformers' bounded renderer had to stop this template ({overrun}); "
        "llama.cpp renders without limits, so it would hang or crash"
    )
    renders = {name: EngineRender(None, why, True) for name, *_ in probes.engine_probes()}
    return EngineFacts("llamacpp", renders=renders)


def other_differences(
    others: Mapping[str, EngineFacts], prompts: Mapping[str, str], strict: Collection[str]
) -> tuple[EngineDifference, ...]:
    """Where another engine's prompt differs from transformers' for the same conversation (both rendered, with the
    same variables): what that runtime sends is not what the model was trained on."""
    from gguftpl.templates.enginediff import locate_difference

    out = []
    for engine_id, e in others.items():
        if e.template:  # it rendered another template in this one's place (Ollama's curated one): GT701 says so
            continue
        for probe in (probes.PLAIN, probes.TOOLS):
            theirs, ours = e.text(probe), prompts.get(_PROMPT_KEYS[probe]) if probe in strict else None
            if theirs is None or ours is None:
                continue
            d = locate_difference(theirs, ours)
            if d is not None:
                out.append(EngineDifference(probe, d.at, d.line, d.engine, d.transformers, (), engine_id))
                break  # one difference per engine is enough to say they differ
    return tuple(out)
