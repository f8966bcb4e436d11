"""Runtime profiles: every fact sourced, ids and enums consistent, and the tool prompts the injecting runtimes
write rebuilt the way their code builds them (checked against the runtimes' own published examples)."""

from __future__ import annotations

import ast
import json
import re

import pytest

import gguftpl.engines
from gguftpl.errors import GGUFTplError
from gguftpl.runtimes import toolprompts
from gguftpl.runtimes.profiles import (
    CAPABILITY_KINDS,
    ENGINE_IDS,
    IGNORED_TOOLS,
    PROFILES,
    TEMPLATE_CHOICES,
    RuntimeProfile,
    UnknownRuntimeError,
    for_engine,
    injected_tool_prompt,
    profile,
    profiles_table,
)
from gguftpl.templates import probes
from gguftpl.templates.dialect import DIALECTS
from tests.conftest import ROOT

DATA = ROOT / "tests" / "data" / "toolprompts"

# Tools as the runtimes' own docs and tests write them, plus gguftpl's canary (nested schema, no description).
DELIVERY = {
    "type": "function",
    "function": {
        "name": "get_delivery_date",
        "description": "Get the delivery date for a customer's order",
        "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
    },
}
WEATHER = json.loads(
    '{"type": "function","function": {"name": "get_current_weather","description": "Get the current weather",'
    '"parameters": {"type": "object","properties": {"location": {"type": "string","description": "The city and '
    'state, e.g. San Francisco, CA"},"format": {"type": "string","enum": ["celsius", "fahrenheit"],"description": '
    '"The temperature unit to use. Infer this from the users location."}},"required": ["location", "format"]}}}'
)
NESTED = {
    "type": "function",
    "function": {
        "name": "café_lookup",
        "parameters": {
            "type": "object",
            "properties": {"filter": {"type": "object", "properties": {"city": {"type": "string"}}}},
        },
    },
}
TOOLS = [*probes.canary_tools(), DELIVERY, WEATHER, NESTED]

# A source names a repo file at a commit, or is one of these other kinds (an issue or PR, a PyPI version, "inferred").
_REPO_AT_COMMIT = re.compile(r"^[\w.-]+/[\w.-]+ \S+@[0-9a-f]{7,40}\b")
_OTHER_SOURCE = re.compile(r"issue|PR #|#\d+|\(PyPI\)|^inferred$")


def _param_names(tool: dict) -> set[str]:
    names: set[str] = set()

    def walk(schema: object) -> None:
        if isinstance(schema, dict):
            for name, sub in (schema.get("properties") or {}).items():
                names.add(name)
                walk(sub)

    walk(tool["function"].get("parameters"))
    return names


def test_ids_are_the_stable_set_and_unique():
    ids = [p.id for p in PROFILES]
    assert len(ids) == len(set(ids))
    expected = {"llama.cpp", "goose", "jan", "lmstudio", "vllm", "sglang", "tgi", "mistral.rs", "dynamo", "ollama"}
    assert set(ids) == expected
    assert all(profile(i) is p for i, p in zip(ids, PROFILES, strict=True))


def test_unknown_runtime_is_a_typed_key_error():
    with pytest.raises(UnknownRuntimeError) as e:
        profile("koboldcpp")
    assert isinstance(e.value, KeyError) and isinstance(e.value, GGUFTplError)
    assert "koboldcpp" in str(e.value) and "llama.cpp" in str(e.value)


@pytest.mark.parametrize("p", PROFILES, ids=lambda p: p.id)
def test_every_fact_has_sources(p: RuntimeProfile):
    assert len(p.facts) >= 7
    for fact in p.facts:
        assert fact.text.strip() and fact.sources, fact
        for source in fact.sources:
            assert _REPO_AT_COMMIT.match(source) or _OTHER_SOURCE.search(source), source
    assert p.sources and p.version


@pytest.mark.parametrize("p", PROFILES, ids=lambda p: p.id)
def test_enums_engines_and_dialects_are_known(p: RuntimeProfile):
    assert p.template_choice in TEMPLATE_CHOICES
    assert p.tools_capability in CAPABILITY_KINDS
    assert p.ignored_tools in IGNORED_TOOLS
    assert p.engine in ENGINE_IDS and set(p.also_engines) <= set(ENGINE_IDS)
    assert set(p.parser_dialects) <= set(DIALECTS)
    assert {d for _, d in p.parser_names if d} <= set(DIALECTS)
    assert (p.tools_capability == "substring") == bool(p.capability_substrings)
    if p.ignored_tools == "refuse":
        assert p.refusal_message
    if p.based_on:
        assert profile(p.based_on).engine == p.engine


def test_engine_ids_are_the_engines_packages_table():
    from gguftpl.engines import registry

    doc = gguftpl.engines.__doc__ or ""
    assert set(ENGINE_IDS) == set(registry.ENGINE_IDS)
    for engine_id in ENGINE_IDS:
        family = engine_id.split("/")[0] + "/<runtime>" if "/" in engine_id else engine_id
        assert f"``{family}``" in doc, engine_id
    for engine_id in ENGINE_IDS:
        assert for_engine(engine_id), f"no runtime uses {engine_id}"
    assert {p.id for p in for_engine("llamacpp")} == {"llama.cpp", "goose", "jan", "ollama"}
    assert for_engine("no-such-engine") == ()


def test_profiles_import_nothing_above_errors():
    allowed = re.compile(
        r"^gguftpl\.(errors|engines|engines\.registry|runtimes\.toolprompts|runtimes\.profiles(\..+)?|runtimes)$"
    )
    files = [
        *sorted((ROOT / "gguftpl" / "runtimes" / "profiles").glob("*.py")),
        ROOT / "gguftpl/runtimes/toolprompts.py",
    ]
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("gguftpl"):
                assert allowed.match(node.module), f"{path.name} imports {node.module}"
            elif isinstance(node, ast.Import):
                assert not any(a.name.startswith("gguftpl") for a in node.names), path.name


def test_injected_prompt_constants_are_not_empty():
    for text in (toolprompts.LMSTUDIO_TOOL_PROMPT, toolprompts.TGI_DEFAULT_TOOL_PROMPT, toolprompts.GOOSE_TOOLS_HEADER):
        assert text.strip()
    assert toolprompts.LMSTUDIO_AVAILABLE_TOOLS in toolprompts.LMSTUDIO_TOOL_PROMPT
    assert toolprompts.LMSTUDIO_CALL_OPEN in toolprompts.LMSTUDIO_TOOL_PROMPT
    assert toolprompts.LMSTUDIO_CALL_CLOSE in toolprompts.LMSTUDIO_TOOL_PROMPT


@pytest.mark.parametrize("runtime_id", ["lmstudio", "tgi"])
def test_injected_prompt_carries_every_tool_and_parameter(runtime_id: str):
    p = profile(runtime_id)
    assert p.injects_tool_prompt
    text = injected_tool_prompt(p, TOOLS)
    for tool in TOOLS:
        assert tool["function"]["name"] in text
        for param in _param_names(tool):
            assert param in text, (tool["function"]["name"], param)


def test_lmstudio_prompt_gives_back_the_tools_as_a_tool_array():
    text = injected_tool_prompt(profile("lmstudio"), TOOLS)
    head, rest = text.split("AVAILABLE TOOLS:\n", 1)
    setting = json.loads(rest.split("\n\nRULES:\n", 1)[0])
    assert setting["type"] == "toolArray"
    assert [t["function"] for t in setting["tools"]] == [t["function"] for t in TOOLS]
    assert head.startswith("You are a tool-calling AI.")


def test_lmstudio_prompt_is_the_docs_example():
    """The docs' own ``lms log stream`` output for their get_delivery_date tool, byte for byte."""
    expected = (DATA / "lmstudio-default-tool-prompt.txt").read_text()
    assert toolprompts.lmstudio_tool_prompt([DELIVERY]) == expected


def test_tgi_appended_text_gives_back_the_tools_in_tgis_shape():
    text = injected_tool_prompt(profile("tgi"), TOOLS)
    assert text.startswith(toolprompts.TGI_SEPARATOR) and text.endswith(toolprompts.TGI_DEFAULT_TOOL_PROMPT)
    tools_json = text[len(toolprompts.TGI_SEPARATOR) : -len(toolprompts.TGI_DEFAULT_TOOL_PROMPT)]
    assert tools_json.endswith("\n")
    sent = json.loads(tools_json)
    assert [t["function"]["name"] for t in sent] == [t["function"]["name"] for t in TOOLS] + ["no_tool"]
    for tool, got in zip(TOOLS, sent, strict=False):
        assert list(got["function"]) == ["description", "name", "arguments"]
        assert json.loads(got["function"]["arguments"]) == tool["function"]["parameters"]
        assert got["function"]["description"] == tool["function"].get("description")


def test_tgi_appended_text_is_tgis_own_test_expectation():
    """TGI's ``test_chat_template_with_default_tool_template`` expected prompt, the part TGI appended."""
    expected = (DATA / "tgi-appended-text.txt").read_text()
    got = toolprompts.tgi_appended_text(
        [WEATHER], tool_prompt="This default prompt will be used", tool_choice="required"
    )
    assert got == expected


def test_tgi_when_the_template_reads_tools_appends_only_the_prompt():
    text = injected_tool_prompt(profile("tgi"), TOOLS, template_uses_tools=True)
    assert text == toolprompts.TGI_SEPARATOR + toolprompts.TGI_DEFAULT_TOOL_PROMPT
    assert not any(t["function"]["name"] in text for t in TOOLS)


def test_tgi_refuses_a_tool_without_parameters():
    bare = {"type": "function", "function": {"name": "ping"}}
    with pytest.raises(ValueError, match="arguments"):
        toolprompts.tgi_tools_json([bare])


def test_goose_lists_names_and_descriptions_but_no_parameters():
    """Goose's emulated tools: the schemas do not reach the model, only names and descriptions."""
    text = injected_tool_prompt(profile("goose"), TOOLS)
    for tool in TOOLS:
        fn = tool["function"]
        assert f"- {fn['name']}: {fn.get('description') or toolprompts.GOOSE_NO_DESCRIPTION}\n" in text
        for param in _param_names(tool):
            assert param not in text


@pytest.mark.parametrize("p", [p for p in PROFILES if not p.injects_tool_prompt], ids=lambda p: p.id)
def test_runtimes_that_do_not_inject_have_no_prompt(p: RuntimeProfile):
    with pytest.raises(ValueError, match="does not inject"):
        injected_tool_prompt(p, TOOLS)


def test_table_has_one_row_per_runtime_with_seven_cells():
    table = profiles_table()
    lines = table.strip().splitlines()
    assert len(lines) == 2 + len(PROFILES)
    for line, p in zip(lines[2:], PROFILES, strict=True):
        cells = re.split(r"(?<!\\)\|", line)[1:-1]
        assert len(cells) == 7, line
        assert p.name in cells[0] and p.engine in cells[1] and p.template_choice in cells[2]
        if p.ignored_tools == "refuse":
            assert p.refusal_message in cells[4]


def test_transformers_gguf_loader_maps_only_the_default_template():
    """vLLM and SGLang read a GGUF's tokenizer through transformers' GGUF loader: the installed transformers maps
    ``tokenizer.chat_template`` and no named template, which is why their profiles say ``default_only``."""
    mapping = pytest.importorskip("transformers.integrations.gguf.gguf_tokenizer_mapping")
    config_keys = mapping.GGUF_TOKENIZER_MAPPING["tokenizer_config"]
    assert config_keys.get("chat_template") == "chat_template"
    assert not [k for k in config_keys if k.startswith("chat_template.")]
    for runtime_id in ("vllm", "sglang"):
        p = profile(runtime_id)
        assert p.template_choice == "default_only" and p.engine == "transformers"
        assert any("gguf_tokenizer_mapping" in s for s in p.template_source.sources)
