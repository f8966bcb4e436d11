"""The verdicts a report shows, each decided once from what the engines rendered.

llama.cpp's prompt decides when llama.cpp rendered the conversation (it is the runtime most GGUF users run,
and it renders templates transformers refuses: an undefined value prints empty, a system turn is folded into
the first user turn); else transformers' prompt (or, when transformers refused it, the lenient sandbox's);
else the AST, which proves a template that never reads ``tools`` never prints them. A verdict no engine can
decide stays None, with the reason.
"""

from __future__ import annotations

from typing import Any

from gguftpl.templates import probes
from gguftpl.templates.facts import EngineRender, LlamaCppFacts, StaticFacts


def tools_verdict(
    llama: LlamaCppFacts | None,
    prompts: dict[str, str],
    strict: tuple[str, ...],
    static: StaticFacts | None,
    transformers_error: str | None,
) -> dict[str, Any]:
    """``tools_in_prompt`` and how it was decided: a user-only conversation sent with the canary tool."""
    for engine, prompt in _tools_prompts(llama, prompts, strict):
        name_in = probes.CANARY_TOOL_NAME in prompt
        param_in = probes.CANARY_PARAM_TOKEN in prompt
        return {
            "tools_in_prompt": name_in and param_in,
            "tools_engine": engine,
            "tool_name_in_prompt": name_in,
            "tool_param_in_prompt": param_in,
        }
    if static is not None and static.tools_rendered is False:
        return {"tools_in_prompt": False, "tools_engine": "ast"}
    return {"tools_in_prompt": None, "tools_undecided": _why_undecided(llama, static, transformers_error)}


def _tools_prompts(
    llama: LlamaCppFacts | None, prompts: dict[str, str], strict: tuple[str, ...]
) -> list[tuple[str, str]]:
    out = []
    if llama is not None and llama.text(probes.TOOLS) is not None:
        out.append(("llama.cpp", str(llama.text(probes.TOOLS))))
    if "tools" in prompts:
        out.append(("transformers" if probes.TOOLS in strict else "lenient", prompts["tools"]))
    return out


def _why_undecided(llama: LlamaCppFacts | None, static: StaticFacts | None, transformers_error: str | None) -> str:
    if llama is None:
        engine = "llama.cpp was not asked (xllamacpp is not installed, or the template is not one it reads)"
    elif llama.load_error or llama.unchecked:
        engine = f"llama.cpp cannot load it ({llama.load_error or llama.unchecked})"
    else:
        r = llama.renders.get(probes.TOOLS)
        engine = f"llama.cpp refused the conversation ({r.error if r is not None else 'not rendered'})"
    ast = (
        "the template does not parse"
        if static is None
        else "the AST has a path from `tools` to the output"
        if static.tools_rendered
        else "the AST is too deep to walk"
    )
    return f"transformers refused the conversation ({transformers_error or 'not rendered'}); {engine}; {ast}"


def tools_with_system(llama: LlamaCppFacts | None, prompts: dict[str, str]) -> bool | None:
    """Do the tools reach the prompt once a system message is sent too? (llama.cpp's prompt first.)"""
    prompt = llama.text(probes.TOOLS_WITH_SYSTEM) if llama is not None else None
    if prompt is None:
        prompt = prompts.get("tools with system")
    if prompt is None:
        return None
    return probes.CANARY_TOOL_NAME in prompt and probes.CANARY_PARAM_TOKEN in prompt


def tool_results_verdict(
    llama: LlamaCppFacts | None, prompts: dict[str, str], strict: tuple[str, ...]
) -> dict[str, Any]:
    """``renders_tool_results`` and whose prompt decided it: does the tool result of the round trip (user, assistant
    tool call, tool result) reach the prompt? llama.cpp's round trip (or its null-content twin, the OpenAI shape)
    when it rendered one, else transformers' (the lenient sandbox's when transformers refused it)."""
    if llama is not None:
        for probe in (probes.ROUND_TRIP, probes.NULL_CONTENT):
            prompt = llama.text(probe)
            if prompt is not None:
                return {"renders_tool_results": probes.CANARY_RESULT in prompt, "results_engine": "llama.cpp"}
    prompt = prompts.get("round_trip")
    if prompt is None:
        return {}
    engine = "transformers" if probes.ROUND_TRIP in strict else "lenient"
    return {"renders_tool_results": probes.CANARY_RESULT in prompt, "results_engine": engine}


def tool_calls_verdict(llama: LlamaCppFacts | None, transformers: bool | None, lenient: bool) -> dict[str, Any]:
    """``renders_tool_calls`` and whose prompt decided it: does an assistant tool call leave its arguments in the
    history? llama.cpp's round trips (an argument value no template contains) when it rendered one, else what
    transformers' call probe found (``lenient`` when only the lenient sandbox rendered it)."""
    if llama is not None:
        prompts = [llama.text(p) for p in (probes.ROUND_TRIP, probes.NULL_CONTENT)]
        rendered = [p for p in prompts if p is not None]
        if rendered:
            return {
                "renders_tool_calls": any(probes.CANARY_ARG_VALUE in p for p in rendered),
                "calls_engine": "llama.cpp",
            }
    if transformers is None:
        return {}
    return {"renders_tool_calls": transformers, "calls_engine": "lenient" if lenient else "transformers"}


def dropped_messages(system_prompt: str | None, multi_prompt: str | None) -> tuple[str, ...]:
    """Messages a prompt rendered without error but lost: the system probe's system text, or the multi-turn
    probe's assistant reply (strings no template contains). Only when the user's text did reach the prompt:
    a template that renders no message at all is a different failure."""
    checks = (
        (system_prompt, probes.CANARY_SYSTEM, "system message"),
        (multi_prompt, probes.CANARY_ASSISTANT, "assistant reply"),
    )
    return tuple(
        what
        for prompt, canary, what in checks
        if prompt is not None and canary not in prompt and probes.CANARY_USER in prompt
    )


def engine_tools_verdict(rendered: EngineRender | None) -> bool | None:
    """Does one engine's prompt for the tools request carry the canary tool's name and parameter? None when that
    engine did not render the request (its error is the verdict then)."""
    if rendered is None or rendered.text is None:
        return None
    return probes.CANARY_TOOL_NAME in rendered.text and probes.CANARY_PARAM_TOKEN in rendered.text
