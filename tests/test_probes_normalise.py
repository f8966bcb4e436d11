"""``probes.llamacpp_messages``: the conversation as llama.cpp hands it to a template, by its capability probe
(the engine comparison gives transformers this conversation, so it compares engines, not normalisation)."""

from __future__ import annotations

from gguftpl.templates import probes

BOTH = {"supports_string_content": True, "supports_typed_content": True, "supports_system_role": True}


def test_both_content_shapes_supported_leaves_the_messages_alone() -> None:
    msgs = [*probes.plain_conversation(system=True), *probes.text_parts_conversation()]
    assert probes.llamacpp_messages(msgs, BOTH) == msgs


def test_parts_only_turns_every_string_into_one_text_part() -> None:
    caps = {**BOTH, "supports_string_content": False}
    out = probes.llamacpp_messages(probes.tool_round_trip_conversation(content=None), caps)
    assert out[0]["content"] == [{"type": "text", "text": probes.CANARY_USER}]
    assert out[1]["content"] is None  # null stays null, as in llama.cpp
    assert out[2]["content"] == [{"type": "text", "text": probes.CANARY_RESULT}]
    assert probes.typed_content_only(caps) and not probes.typed_content_only(BOTH)


def test_strings_only_joins_text_parts_as_llama_cpp_does() -> None:
    caps = {**BOTH, "supports_typed_content": False}
    parts = [
        {"type": "text", "text": "a"},
        {"type": "image"},
        {"type": "text", "text": ""},
        {"type": "text", "text": "b"},
    ]
    out = probes.llamacpp_messages([{"role": "user", "content": parts}], caps)
    assert out == [{"role": "user", "content": "a\n\nb"}]


def test_no_system_role_folds_the_system_text_with_one_newline() -> None:
    caps = {**BOTH, "supports_system_role": False}
    out = probes.llamacpp_messages(probes.plain_conversation(system=True), caps)
    assert out == [{"role": "user", "content": f"{probes.CANARY_SYSTEM}\n{probes.CANARY_USER}"}]
