"""llama.cpp's template choice, decided in one function (gguftpl.engines.llamacpp_choice) that audit, render and verify
call; the session's choice is the same function over what llama.cpp itself loaded."""

from __future__ import annotations

import pytest

from gguftpl.engines.llamacpp_choice import CHATML_FALLBACK, FALLBACK, LOADED, choose_template, loaded_templates
from gguftpl.verify.render import select_template
from tests.conftest import CHATML, SAMPLES

TOOL_USE = "{{ tools | tojson }}" + CHATML


@pytest.mark.parametrize(
    ("templates", "tools", "name"),
    [
        ({"default": CHATML, "tool_use": TOOL_USE}, True, "tool_use"),
        ({"default": CHATML, "tool_use": TOOL_USE}, [{"type": "function"}], "tool_use"),
        ({"default": CHATML, "tool_use": TOOL_USE}, False, "default"),
        ({"default": CHATML, "tool_use": TOOL_USE}, [], "default"),  # an empty tools array is no tools
        ({"default": CHATML, "rag": TOOL_USE}, True, "default"),  # other named templates never reach llama.cpp
        ({"tool_use": TOOL_USE}, True, "tool_use"),
        ({"tool_use": TOOL_USE}, None, FALLBACK),
        ({}, True, FALLBACK),
    ],
)
def test_choose_template(templates: dict[str, str], tools: object, name: str) -> None:
    choice = choose_template(templates, tools)  # type: ignore[arg-type]
    assert choice.name == name
    assert choice.text == (CHATML_FALLBACK if name == FALLBACK else templates[name])
    assert choice.fallback is (name == FALLBACK)


def test_loaded_templates_are_default_and_tool_use_in_that_order() -> None:
    assert LOADED == ("default", "tool_use")
    assert list(loaded_templates({"rag": 1, "tool_use": 2, "default": 3})) == ["default", "tool_use"]
    assert loaded_templates({"rag": 1}) == {}


def test_render_selects_with_the_same_choice() -> None:
    both = {"default": CHATML, "tool_use": TOOL_USE}
    assert select_template(both, [{"type": "function"}], None) == "tool_use"
    assert select_template(both, [], None) == "default"
    assert select_template({"tool_use": TOOL_USE}, [], None) is None  # llama.cpp's fallback, not a file template
    assert select_template(both, [], "tool_use") == "tool_use"  # an explicit --template wins


def test_the_fallback_text_is_llamacpps_own() -> None:
    pytest.importorskip("xllamacpp")
    from gguftpl.engines.llamacpp_session import LlamaCppSession

    with LlamaCppSession(SAMPLES / "no-template.gguf") as s:
        assert s.props()["chat_template"] == CHATML_FALLBACK
        assert s.loaded_templates() == {}
        assert s.template_for([{"type": "function"}]).name == FALLBACK
