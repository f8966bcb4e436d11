#!/usr/bin/env python3
"""Record what real models answer to gguftpl's live requests, for the judges' tests (tests/data/live_outputs/).

For each model of the fetched corpus (scripts/fetch_corpus.py) and each case, one generation at temperature 0
through llama.cpp (xllamacpp, in a child process, one thread), written as one JSON file with its provenance
(model, sha256, llama.cpp version, the command) and the exact request. Cases:

- ``chatml``: the file's default template replaced by plain ChatML (the Goose failure; ``gguftpl patch``), the
  canary tool offered and dropped by the template, the canary request;
- ``no-tools``: the file as shipped, no tools at all, the canary request;
- ``no-tools-ask``: the file as shipped, no tools, a request that asks for the tool's result;
- ``own``: the file as shipped, the canary tool offered, the canary request.

Run: ``python scripts/record_live_outputs.py [--max-tokens N] [--out DIR] [MODEL ...]``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>'"
    " + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
MODELS = ("Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf", "SmolLM2-135M-Instruct.Q4_1.gguf")


def corpus_dir() -> Path:
    env = os.environ.get("GGUFTPL_CORPUS_DIR")
    if env:
        return Path(env)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "gguftpl" / "corpus"


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def chatml_copy(src: Path, folder: Path) -> Path:
    tpl = folder / "chatml.jinja"
    tpl.write_text(CHATML, encoding="utf-8")
    out = folder / ("chatml-" + src.name)
    cmd = [sys.executable, "-m", "gguftpl", "patch", str(src), "--template", f"default={tpl}", "-o", str(out)]
    subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    return out


def record(model: Path, served: Path, case: str, ask: str, tools: list[dict[str, Any]] | None, args: Any) -> dict:
    from gguftpl.engines.llamacpp_child import ChildSession
    from gguftpl.verify.live import LiveOptions, generate

    with ChildSession(served, n_threads=1) as s:
        gen = generate(s, [{"role": "user", "content": ask}], tools, LiveOptions(max_tokens=args.max_tokens))
    return {
        "provenance": {
            "model": model.name,
            "sha256": sha256(model),
            "template": "plain ChatML default (gguftpl patch --template default=chatml.jinja)"
            if case == "chatml"
            else "the file's own",
            "llama_cpp": f"xllamacpp {version('xllamacpp')}",
            "command": "python scripts/record_live_outputs.py " + " ".join(sys.argv[1:]),
            "settings": {"temperature": 0, "seed": 0, "max_tokens": args.max_tokens, "threads": 1},
        },
        "case": case,
        "request": {"messages": [{"role": "user", "content": ask}], "tools": tools or []},
        "generation": gen.to_dict(),
    }


def main() -> None:
    from gguftpl.templates import probes
    from gguftpl.verify.live import canary_ask
    from gguftpl.verify.liveprobes import NO_TOOLS_ASK

    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="*", default=list(MODELS))
    ap.add_argument("--case", action="append", help="only these cases (default: all)")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--out", type=Path, default=ROOT / "tests" / "data" / "live_outputs")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.models:
        model = corpus_dir() / name
        with tempfile.TemporaryDirectory() as tmp:
            cases = [
                ("chatml", chatml_copy(model, Path(tmp)), canary_ask(), probes.canary_tools()),
                ("no-tools", model, canary_ask(), None),
                ("no-tools-ask", model, NO_TOOLS_ASK, None),
                ("own", model, canary_ask(), probes.canary_tools()),
            ]
            for case, served, ask, tools in cases:
                if args.case and case not in args.case:
                    continue
                doc = record(model, served, case, ask, tools, args)
                stem = name.split("-Instruct")[0].lower()
                path = args.out / f"{stem}.{case}.json"
                path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
                print(f"{path.name}: {doc['generation']['message'].get('content')!r}", flush=True)


if __name__ == "__main__":
    main()
