"""Verification through a real llama.cpp (xllamacpp, in-process): stand-ins, the session, the five stages on
the committed samples and on the real SmolLM2, before and after a patch with the upstream Hermes tool_use
template."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from gguftpl.engines.llamacpp_session import LlamaCppSession
from gguftpl.engines.llamacpp_standin import STOP_TOKEN, build_standin
from gguftpl.gguf.reader import read_header
from gguftpl.gguf.writer import write_gguf
from gguftpl.templates import probes
from gguftpl.verify.calltext import call_text_from_template
from gguftpl.verify.findings import llamacpp_findings
from gguftpl.verify.result import (
    CORE_STAGES,
    FAIL,
    PASS,
    STAGE_AGREEMENT,
    STAGE_CALL,
    STAGE_RESULT,
    STAGE_SCHEMA,
    STAGE_SELECTION,
    VerifyResult,
)
from gguftpl.verify.stages import verify_file

pytest.importorskip("xllamacpp")

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"
CHATML_SAMPLE = SAMPLES / "hermes-2-pro-mistral-7b.chatml.gguf"
UPSTREAM_SAMPLE = SAMPLES / "hermes-2-pro-mistral-7b.upstream.gguf"
NO_TEMPLATE_SAMPLE = SAMPLES / "no-template.gguf"
HERMES_TOOL_USE = (ROOT / "upstream_templates/NousResearch/Hermes-2-Pro-Mistral-7B/tool_use.jinja").read_text(
    encoding="utf-8"
)
SMOLLM2 = "SmolLM2-135M-Instruct.Q4_1.gguf"


def statuses(r: VerifyResult) -> dict[str, str]:
    return {s.name: s.status for s in r.stages}


@pytest.fixture(scope="module")
def sample_results() -> dict[str, VerifyResult]:
    return {p.name: verify_file(p) for p in (CHATML_SAMPLE, UPSTREAM_SAMPLE, NO_TEMPLATE_SAMPLE)}


# ------------------------------------------------------------------------------------------- samples


def test_bartowski_like_sample_drops_tools(sample_results: dict[str, VerifyResult]) -> None:
    r = sample_results[CHATML_SAMPLE.name]
    st = statuses(r)
    assert list(st) == list(CORE_STAGES)
    assert st[STAGE_SELECTION] == PASS and r.template == "default"
    assert r.stage(STAGE_SELECTION).data["caps"]["supports_tools"] is False
    assert st[STAGE_SCHEMA] == FAIL
    prompt = r.stage(STAGE_SCHEMA).data["prompt"]
    assert probes.CANARY_USER in prompt and probes.CANARY_TOOL_NAME not in prompt
    assert st[STAGE_CALL] == FAIL  # ChatML writes nothing for an assistant tool call
    assert st[STAGE_RESULT] == PASS  # ...but does print a tool message's content
    assert not r.ok


def test_upstream_sample_passes_every_stage(sample_results: dict[str, VerifyResult]) -> None:
    r = sample_results[UPSTREAM_SAMPLE.name]
    assert statuses(r) == dict.fromkeys(CORE_STAGES, PASS), [s.evidence for s in r.stages]
    assert r.template == "tool_use"
    call = r.stage(STAGE_CALL).data
    # the call text is the template's own: newline Hermes, as upstream's tool_use renders it in history
    assert call["call_text"].startswith("<tool_call>\n{") and call["call_text"].endswith("}\n</tool_call>")
    (tc,) = call["parsed"]["tool_calls"]
    assert tc["function"]["name"] == probes.CANARY_TOOL_NAME
    assert json.loads(tc["function"]["arguments"]) == {probes.CANARY_PARAM_NAME: probes.CANARY_ARG_VALUE}
    # the upstream default template starts with {{bos_token}}: llama.cpp strips it, and says so
    assert "leading bos_token removed" in r.stage(STAGE_AGREEMENT).evidence
    assert r.ok


def test_no_template_shows_llamacpp_fallback(sample_results: dict[str, VerifyResult]) -> None:
    r = sample_results[NO_TEMPLATE_SAMPLE.name]
    sel = r.stage(STAGE_SELECTION)
    assert sel.status == FAIL and r.template == "fallback"
    assert "falls back" in sel.evidence
    # the fallback is ChatML, and it is what llama.cpp rendered the tools request with
    fallback = sel.data["fallback_text"]
    assert "<|im_start|>" in fallback
    assert r.stage(STAGE_SCHEMA).status == FAIL
    assert r.stage(STAGE_SCHEMA).data["prompt"].startswith("<|im_start|>user\n" + probes.CANARY_USER)


def test_patched_sample_passes(tmp_path: Path) -> None:
    from gguftpl.patching import patch_templates

    out = tmp_path / "fixed.gguf"
    patch_templates(CHATML_SAMPLE, out, set_templates={"tool_use": HERMES_TOOL_USE})
    r = verify_file(out)
    assert r.template == "tool_use"
    assert statuses(r) == dict.fromkeys(CORE_STAGES, PASS), [s.evidence for s in r.stages]


def test_findings_from_failed_stages(sample_results: dict[str, VerifyResult]) -> None:
    from gguftpl.verify.findings import findings_from_result

    bad = findings_from_result(sample_results[CHATML_SAMPLE.name], "x.gguf")
    assert sorted(f.code for f in bad) == ["GT601", "GT602"]
    assert all(f.location.file == "x.gguf" and f.location.key == "tokenizer.chat_template" for f in bad)
    assert findings_from_result(sample_results[UPSTREAM_SAMPLE.name]) == []
    fb = findings_from_result(sample_results[NO_TEMPLATE_SAMPLE.name])
    assert "GT605" in {f.code for f in fb}


def test_llamacpp_findings_runs_verify() -> None:
    found = llamacpp_findings(CHATML_SAMPLE, "label.gguf")
    assert {f.code for f in found} == {"GT601", "GT602"}
    assert all(f.location.file == "label.gguf" for f in found)


# -------------------------------------------------------------------------------------- real SmolLM2


def test_smollm2_before_and_after_patch(corpus_file: Any, tmp_path: Path) -> None:
    from gguftpl.patching import patch_templates

    src = corpus_file(SMOLLM2)
    before = verify_file(src)
    assert before.stage(STAGE_SCHEMA).status == FAIL
    assert before.stage(STAGE_CALL).status == FAIL
    assert before.standin is not None and before.standin["vocab"] == "transplanted"
    assert before.standin["n_vocab"] == 49152
    out = tmp_path / "smollm2-tools.gguf"
    patch_templates(src, out, set_templates={"tool_use": HERMES_TOOL_USE})
    after = verify_file(out)
    assert after.template == "tool_use"
    for name in (STAGE_SCHEMA, STAGE_CALL, STAGE_RESULT):
        assert after.stage(name).status == PASS, after.stage(name).evidence


def test_standin_matches_real_weights_on_smollm2(corpus_file: Any) -> None:
    """The tokenizer transplant gives llama.cpp what the real model gives it: same template, caps, prompt,
    tokens and parse result."""
    src = corpus_file(SMOLLM2)
    msgs = probes.tools_conversation()
    tools = probes.canary_tools()
    canned = "plain answer " + probes.CANARY_ASSISTANT
    seen = []
    for load_weights in (False, True):
        with LlamaCppSession(src, load_weights=load_weights) as s:
            seen.append(
                (
                    s.props()["chat_template"],
                    s.caps,
                    s.bos_token,
                    s.eos_token,
                    s.apply_template(msgs, tools),
                    s.tokenize("<|im_start|>user\nhello wörld<|im_end|>"),
                    s.parse_completion(msgs, None, canned).get("content"),
                )
            )
    assert seen[0] == seen[1]
    assert seen[0][-1] == canned


# ------------------------------------------------------------------------------------------- stand-ins


def test_standin_transplants_every_tokenizer_key(tmp_path: Path) -> None:
    out = tmp_path / "s.gguf"
    info = build_standin(UPSTREAM_SAMPLE, out)
    src, dst = read_header(str(UPSTREAM_SAMPLE)), read_header(str(out))
    src_tok = {k: v.decoded() for k, v in src.kv.items() if k.startswith("tokenizer.")}
    dst_tok = {k: v.decoded() for k, v in dst.kv.items() if k.startswith("tokenizer.")}
    assert dst_tok == src_tok
    assert info.vocab == "transplanted" and info.added_tokens == []
    n_vocab = len(src_tok["tokenizer.ggml.tokens"])
    shapes = {t.name: t.shape for t in dst.tensors}
    assert shapes["token_embd.weight"][1] == n_vocab and shapes["output.weight"][1] == n_vocab
    assert dst.get("general.architecture") == "llama"
    assert out.stat().st_size < 200_000


def test_standin_for_a_file_without_vocabulary(tmp_path: Path) -> None:
    """Templates only, no tokenizer and no tensors: llama.cpp still verifies them on a byte-level vocab."""
    path = tmp_path / "novocab.gguf"
    write_gguf(path, {"general.architecture": "llama", "tokenizer.chat_template": HERMES_TOOL_USE})
    r = verify_file(path)
    assert r.standin is not None and r.standin["vocab"] == "byte-level"
    assert "<|im_start|>" in r.standin["added_tokens"] and "<|im_end|>" in r.standin["added_tokens"]
    for name in (STAGE_SCHEMA, STAGE_CALL, STAGE_RESULT, STAGE_AGREEMENT):
        assert r.stage(name).status == PASS, r.stage(name).evidence


def test_standin_adds_a_stop_token_when_the_file_has_no_eos(make_gguf: Any, tmp_path: Path) -> None:
    path = make_gguf("noeos.gguf", templates={"default": HERMES_TOOL_USE}, eos=None)
    assert read_header(str(path)).get("tokenizer.ggml.eos_token_id") is None
    info = build_standin(path, tmp_path / "s.gguf")
    assert info.added_tokens == [STOP_TOKEN]
    r = verify_file(path)
    assert r.stage(STAGE_CALL).status == PASS, r.stage(STAGE_CALL).evidence


def test_unreadable_file_is_a_typed_error(tmp_path: Path) -> None:
    from gguftpl.errors import GGUFFormatError, UsageError

    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 40)
    with pytest.raises(GGUFFormatError):
        verify_file(bad)
    with pytest.raises(UsageError):
        verify_file(tmp_path / "missing.gguf")


# --------------------------------------------------------------------------------------------- session


def test_session_shuts_down_cleanly_and_removes_the_standin() -> None:
    base_threads = threading.active_count()
    base_fds = len(os.listdir("/proc/self/fd"))
    for _ in range(3):
        with LlamaCppSession(CHATML_SAMPLE) as s:
            url = s.base_url
            tmp = s._tmp
            assert tmp is not None and os.path.isdir(tmp)
            assert url.startswith("http://127.0.0.1:")
        assert not os.path.exists(tmp)
        with pytest.raises(urllib.error.URLError):
            urllib.request.urlopen(url + "/props", timeout=5)
    assert threading.active_count() == base_threads
    assert len(os.listdir("/proc/self/fd")) <= base_fds + 2


def test_parser_takes_the_templates_newline_form_not_the_compact_one() -> None:
    """RESEARCH §4: llama.cpp derives its parser from the template; the Hermes tool_use template writes
    ``<tool_call>\\n{…}\\n</tool_call>``, so the compact form comes back as content."""
    msgs, tools = probes.tools_conversation(), probes.canary_tools()
    body = json.dumps({"name": probes.CANARY_TOOL_NAME, "arguments": {probes.CANARY_PARAM_NAME: "v1"}})
    with LlamaCppSession(UPSTREAM_SAMPLE) as s:
        ct = call_text_from_template(s, msgs, tools, probes.tool_call())
        assert ct.text.startswith("<tool_call>\n")
        newline = s.parse_completion(msgs, tools, f"<tool_call>\n{body}\n</tool_call>")
        compact = s.parse_completion(msgs, tools, f"<tool_call>{body}</tool_call>")
    assert newline["tool_calls"][0]["function"]["name"] == probes.CANARY_TOOL_NAME
    assert not compact.get("tool_calls")
    assert compact["content"] == f"<tool_call>{body}</tool_call>"


def test_template_override_is_used_for_every_request() -> None:
    with LlamaCppSession(CHATML_SAMPLE, chat_template=HERMES_TOOL_USE) as s:
        assert s.caps["supports_tools"] is True
        assert probes.CANARY_PARAM_TOKEN in s.apply_template(probes.tools_conversation(), probes.canary_tools())


def test_missing_xllamacpp_says_how_to_install(tmp_path: Path) -> None:
    code = "import sys; sys.modules['xllamacpp'] = None\nfrom gguftpl.cli import main\nmain(['verify', sys.argv[1]])\n"
    proc = subprocess.run(
        [sys.executable, "-c", code, str(CHATML_SAMPLE)], capture_output=True, text=True, check=False, cwd=ROOT
    )
    assert proc.returncode == 2
    assert "pip install 'gguftpl[llamacpp]'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_stage2_agrees_with_the_analysis_of_the_template_llamacpp_used(
    sample_results: dict[str, VerifyResult],
) -> None:
    """verify and audit reach the same tools verdict: gguftpl's own analysis (transformers renders, AST) of
    the very template llama.cpp chose says tools reach the prompt exactly when stage 2 passes."""
    from gguftpl.analysis import analyze_template_text

    for name, r in sample_results.items():
        sel = r.stage(STAGE_SELECTION).data
        text = sel.get("fallback_text")
        if text is None:
            from gguftpl.gguf.templateset import load_templateset

            text = load_templateset(read_header(str(SAMPLES / name))).templates[sel["template"]].text
        report = analyze_template_text(text)
        assert report.tools_in_prompt == (r.stage(STAGE_SCHEMA).status == PASS), name


def test_verify_file_with_openai_tools_adds_the_tool_checks() -> None:
    from gguftpl.verify.render import DEFAULT_TOOLS

    r = verify_file(UPSTREAM_SAMPLE, tools=DEFAULT_TOOLS)
    core, extra = r.stages[:5], r.stages[5:]
    assert [s.name for s in core] == list(CORE_STAGES)
    assert extra and all(s.name.startswith("tools: ") for s in extra)
    reach = next(s for s in extra if s.name == "tools: schema in prompt")
    assert reach.status == PASS
    parsed = next(s for s in extra if s.name == "tools: call parsed")
    assert parsed.status == PASS and "get_current_weather" in parsed.evidence


def test_template_llamacpp_cannot_parse_is_a_failed_stage_not_a_crash(make_gguf: Any) -> None:
    from gguftpl.verify.findings import findings_from_result
    from gguftpl.verify.result import SKIP

    path = make_gguf("broken.gguf", templates={"default": "{% for m in messages %}{{ m.content }"})
    r = verify_file(path)
    sel = r.stage(STAGE_SELECTION)
    assert sel.status == FAIL and r.template == "rejected"
    assert "Parser Error" in sel.evidence and "llama-server exits at startup" in sel.evidence
    assert [s.status for s in r.stages[1:]] == [SKIP] * 4
    assert [f.code for f in findings_from_result(r)] == ["GT606"]


def test_llamacpp_refuses_a_template_that_prints_call_arguments_with_string(make_gguf: Any) -> None:
    """Why GT208 matters for call arguments: llama.cpp derives its parser by rendering a call with
    mapping arguments; ``| string`` prints Python's repr there, the derivation fails and llama-server exits.
    The same template with ``| tojson`` loads and parses its own call."""
    from gguftpl.analysis import analyze_template_text, template_findings

    def template(expr: str) -> str:
        return (
            "{%- if tools %}<|im_start|>system\n{% for t in tools %}{{ t | tojson }}\n{% endfor %}<|im_end|>\n"
            "{% endif %}{%- for m in messages %}<|im_start|>{{ m.role }}\n"
            "{%- if m.tool_calls %}{% for c in m.tool_calls %}<tool_call>\n"
            '{"name": "{{ c.function.name }}", "arguments": ' + expr + "}\n</tool_call>{% endfor %}"
            "{%- else %}{{ m.content }}{% endif %}<|im_end|>\n{% endfor %}"
            "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
        )

    repr_args = template("{{ c.function.arguments | string }}")
    assert "GT208" in {f.code for f in template_findings(analyze_template_text(repr_args))}
    r = verify_file(make_gguf("repr.gguf", templates={"default": repr_args}))
    assert r.stage(STAGE_SELECTION).status == FAIL and r.template == "rejected"
    ok = verify_file(make_gguf("json.gguf", templates={"default": template("{{ c.function.arguments | tojson }}")}))
    assert ok.stage(STAGE_SELECTION).status == PASS
    assert ok.stage(STAGE_CALL).status == PASS, ok.stage(STAGE_CALL).evidence


def test_engine_agreement_masks_the_clock_but_not_other_differences() -> None:
    """A template that prints the time of day renders differently whenever the two engines render in
    different seconds; that text is masked, a real difference next to it is not."""
    import time

    from gguftpl.verify.compare import compare_engines

    clock = "{{ strftime_now('%H:%M:%S') }}|{% for m in messages %}{{ m.content }}{% endfor %}"
    differs = clock + "|{{ '%s!' | format(messages[0].content) }}"  # llama.cpp prints '%s!' as is
    msgs = [{"role": "user", "content": "hi"}]
    with LlamaCppSession(templates={"default": clock}) as s:
        lp = s.apply_template(msgs)
        assert lp.endswith("|hi")
        time.sleep(1.1)  # the HF render is at least one second later
        ag = compare_engines(s, clock, msgs, None, lp)
        assert ag.identical, (ag.llama_prompt, ag.hf_prompt)
        assert any("strftime_now('%H:%M:%S')" in n for n in ag.normalised)
    with LlamaCppSession(templates={"default": differs}) as s:
        ag = compare_engines(s, differs, msgs, None)
        assert not ag.identical
        assert ag.hf_prompt is not None and ag.hf_prompt.endswith("|hi!")


# A Kimi-style call section that writes the call's id where the function name belongs.
_ID_FOR_NAME = (
    "{%- if tools %}<|im_system|>tools<|im_middle|>{{ tools | tojson }}<|im_end|>{% endif %}"
    "{%- for m in messages %}<|im_{{ m.role }}|>{{ m.role }}<|im_middle|>{{ m.content or '' }}"
    "{%- if m.tool_calls %}<|tool_calls_section_begin|>{% for c in m.tool_calls %}<|tool_call_begin|>{{ c.id }}"
    "<|tool_call_argument_begin|>{{ c.function.arguments | tojson }}<|tool_call_end|>{% endfor %}"
    "<|tool_calls_section_end|>{% endif %}<|im_end|>{% endfor %}"
    "{%- if add_generation_prompt %}<|im_assistant|>assistant<|im_middle|>{% endif %}"
)


def test_call_written_by_id_is_rendered_with_an_id_that_carries_the_name() -> None:
    from gguftpl.verify.stages import verify_session

    with LlamaCppSession(templates={"default": _ID_FOR_NAME}) as s:
        r = verify_session(s)
    st = r.stage(STAGE_CALL)
    assert st.status == PASS, st.evidence
    assert st.data["call_id"] == f"functions.{probes.CANARY_TOOL_NAME}:0"
    assert "id where the name belongs" in st.evidence
    assert probes.CANARY_CALL_ID in st.evidence  # the id that loses the name is named


def test_call_without_name_or_id_is_not_reported_as_no_text() -> None:
    from gguftpl.verify.stages import verify_session

    nameless = _ID_FOR_NAME.replace("{{ c.id }}", "call")
    with LlamaCppSession(templates={"default": nameless}) as s:
        r = verify_session(s)
    st = r.stage(STAGE_CALL)
    assert st.status == FAIL
    assert "without the function's name" in st.evidence and probes.CANARY_ARG_VALUE in st.evidence
    assert "call_id" not in st.data
