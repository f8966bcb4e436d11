"""`audit --engine llamacpp`: llama.cpp's own verdicts join the static/behavioural ones."""

from __future__ import annotations

import pytest

from gguftpl.audit import AuditOptions, audit_paths
from tests.conftest import SAMPLES

pytest.importorskip("xllamacpp")


def test_llamacpp_engine_adds_llamacpp_verdicts():
    bad = audit_paths([SAMPLES / "hermes-2-pro-mistral-7b.chatml.gguf"], AuditOptions(engine="llamacpp"))
    codes = {f.code for f in bad.findings}
    assert "GT201" in codes  # transformers semantics
    assert "GT601" in codes  # llama.cpp dropped the tools too
    gt601 = next(f for f in bad.findings if f.code == "GT601")
    assert gt601.evidence
    # the file's one repair, as the audit's GT201 gives it (offline, from the catalog, every runtime)
    gt201 = next(f for f in bad.findings if f.code == "GT201")
    assert gt601.fix == gt201.fix
    assert "--from-catalog NousResearch/Hermes-2-Pro-Mistral-7B --tools-in-default" in gt601.fix

    good = audit_paths([SAMPLES / "hermes-2-pro-mistral-7b.upstream.gguf"], AuditOptions(engine="llamacpp"))
    assert not [f for f in good.findings if f.code.startswith("GT6") and f.severity.value == "error"]
    assert good.exit_code("error") == 0

    hf_only = audit_paths([SAMPLES / "hermes-2-pro-mistral-7b.chatml.gguf"])
    assert not [f for f in hf_only.findings if f.code.startswith("GT6")]


def test_engine_option_on_the_cli():
    import subprocess
    import sys

    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "gguftpl",
            "audit",
            "--engine",
            "llamacpp",
            "--format",
            "json",
            str(SAMPLES / "hermes-2-pro-mistral-7b.chatml.gguf"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 1, r.stderr
    import json

    codes = {f["code"] for f in json.loads(r.stdout)["files"][0]["findings"]}
    assert {"GT201", "GT601"} <= codes
