"""Offline, ``gguftpl diff FILE`` compares with the catalog entry discovery already matched, and says so (issue 25
item 10: it exited 2 needing the Hub), on the real Qwen2.5-Coder-0.5B-Instruct GGUF from PyPI."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

QWEN = "Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf"


def offline_diff(path: Path, home: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, HF_HOME=str(home), HF_HUB_OFFLINE="1", HF_ENDPOINT="http://127.0.0.1:9")
    cmd = [sys.executable, "-m", "gguftpl", "diff", str(path), "--no-behaviour", *extra]
    return subprocess.run(cmd, env=env, capture_output=True, text=True)


def test_offline_diff_uses_the_matched_catalog_entry(corpus_file: Callable[[str], Path], tmp_path: Path) -> None:
    res = offline_diff(corpus_file(QWEN), tmp_path / "hf")  # a cold Hub cache
    assert res.returncode == 0, res.stderr
    assert "compared with the bundled catalog entry" in res.stderr and res.stderr.count("\n") == 1
    (upstream,) = [ln for ln in res.stdout.splitlines() if ln.strip().startswith("upstream:")]
    assert "Qwen/Qwen2.5-7B-Instruct (bundled catalog; discovered catalog match" in upstream
    assert upstream.endswith("compared with that entry, the Hub being unreachable)")
    assert "default   identical" in res.stdout


def test_offline_diff_without_fallback_still_needs_the_hub(corpus_file: Callable[[str], Path], tmp_path: Path) -> None:
    res = offline_diff(corpus_file(QWEN), tmp_path / "hf", "--no-fallback")
    assert res.returncode == 2 and "HF_HUB_OFFLINE" in res.stderr and res.stderr.count("\n") == 1
