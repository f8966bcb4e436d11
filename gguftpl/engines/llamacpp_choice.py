"""Which chat template llama.cpp renders a request with: decided here, and only here.

llama.cpp reads two templates from a GGUF (``llama_model_chat_template``): the default
(``tokenizer.chat_template``) and ``tool_use`` (``tokenizer.chat_template.tool_use``); a file's other named
templates (``rag``, ...) never reach it. A request with a non-empty ``tools`` array is rendered with
``tool_use`` when there is one, every other request with the default, and a file without a default gets
llama.cpp's built-in ChatML, silently. Audit (which templates the parse check loads), render and verify all ask
:func:`choose_template`. Needs nothing from xllamacpp.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

LOADED = ("default", "tool_use")
"""The templates llama.cpp reads from a GGUF, in that order."""
FALLBACK = "fallback"
"""The choice's name when llama.cpp falls back to :data:`CHATML_FALLBACK`."""
CHATML_FALLBACK = (
    "{%- for message in messages -%}\n"
    "  {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "  {{- '<|im_start|>assistant\n' -}}\n"
    "{%- endif -%}"
)
"""llama.cpp's built-in ChatML (``CHATML_TEMPLATE_SRC``), as ``/props`` reports it for a file without a default
template (a test keeps the two equal)."""

_T = TypeVar("_T")


@dataclass(frozen=True)
class TemplateChoice:
    name: str
    """``tool_use``, ``default`` or :data:`FALLBACK`."""
    text: str
    """The template's text (:data:`CHATML_FALLBACK` for the fallback)."""

    @property
    def fallback(self) -> bool:
        return self.name == FALLBACK


def loaded_templates(templates: Mapping[str, _T]) -> dict[str, _T]:
    """The entries of ``templates`` (name -> anything) that llama.cpp loads, default first."""
    return {name: templates[name] for name in LOADED if name in templates}


def choose_template(templates: Mapping[str, str], tools: bool | Sequence[Any] | None) -> TemplateChoice:
    """The template llama.cpp renders a request with, given the file's templates (name -> text; a
    ``--chat-template`` override stands in for the default and hides ``tool_use``) and whether the request
    carries tools: ``tool_use`` when tools are passed and there is one, else the default, else llama.cpp's
    ChatML fallback."""
    if tools and "tool_use" in templates:
        return TemplateChoice("tool_use", templates["tool_use"])
    if "default" in templates:
        return TemplateChoice("default", templates["default"])
    return TemplateChoice(FALLBACK, CHATML_FALLBACK)
