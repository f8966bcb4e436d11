"""The committed samples are exactly what scripts/make_samples.py builds, and say what they claim."""

from __future__ import annotations

import sys

from gguftpl.gguf.reader import read_header
from gguftpl.gguf.templateset import load_templateset
from tests.conftest import ROOT, SAMPLES


def test_samples_regenerate_byte_for_byte(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    import make_samples

    built = make_samples.build(tmp_path)
    assert built
    for path in built:
        assert path.read_bytes() == (SAMPLES / path.name).read_bytes(), path.name


def test_samples_describe_the_real_situations():
    chatml = load_templateset(read_header(SAMPLES / "hermes-2-pro-mistral-7b.chatml.gguf"))
    assert list(chatml.templates) == ["default"]
    assert "tools" not in chatml.default.text
    assert chatml.token_type(chatml.token_id("<|im_start|>")) == 3
    assert chatml.token_id("<tool_call>") is not None

    upstream = load_templateset(read_header(SAMPLES / "hermes-2-pro-mistral-7b.upstream.gguf"))
    assert list(upstream.templates) == ["default", "tool_use"]
    assert upstream.listed_names == ["tool_use"]
    assert "<tool_call>" in upstream.templates["tool_use"].text

    none = load_templateset(read_header(SAMPLES / "no-template.gguf"))
    assert none.templates == {}
    assert none.special_tokens["eot"].text == "<end_of_turn>"
