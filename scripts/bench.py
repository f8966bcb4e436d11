#!/usr/bin/env python3
"""Side-by-side benchmarks: every comparison runs in this one process run, interleaved, and prints ratios.

Sections (run all, or name some: `python scripts/bench.py header patch`):
  header  header read: gguftpl's reader vs gguf-py's GGUFReader (SmolLM2 49k vocab; generated 262,144 vocab)
  patch   patch vs cp vs gguf-new-metadata on a generated >= 2 GiB GGUF: throughput and peak RSS; then, on a
          loop-mounted XFS (root), patch vs cp --reflink=never/always on 1 GiB: time and disk space used
  audit   audit of a generated 262k-vocab GGUF and of a directory of 100 GGUFs, vs ggufdoctor
  verify  verify of SmolLM2 with the llama.cpp stand-in vs --load-weights, and of Qwen2.5-Coder-0.5B with the
          stand-in vs --live (the model answers): time and peak RSS
  remote  bytes and requests per remote audit (49k and 262k vocab); 20-file repo audit, concurrent vs serial
  bigfolder  cold audit of a folder of 100 GGUFs with 262k-token vocabularies: time and peak RSS
  scan    gguftpl scan of a home with 50 models (25 Ollama tags, 25 LM Studio files): cold, then warm
  survey  `gguftpl survey --author` of 60 and of 240 repos (4 quants of SmolLM2 each) on the local Hub: time,
          peak RSS (flat in the number of repos), header reads (at most one per file); then the warm re-run
  patch-folder  `patch DIR -o OUT` of 24 quants vs `cp -r --reflink=never` of the folder, on a loop XFS
  bombs   cold audit and verify of GGUFs whose template is a render bomb (scripts/bench_bombs.py): time, peak RSS

Each measurement is a fresh process (peak RSS from wait4, started by a small launcher: ~8 MiB floor); times
are medians of --runs runs. Absolute times on a shared machine are noise; read the ratios. Targets from the
issues are printed beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "tests"))  # xfsloop: the loop-mounted XFS the tests use too
PY = sys.executable
BIN = Path(PY).parent


# A process's peak RSS (ru_maxrss) starts at the high-water mark of the memory it was exec'd from, even
# through posix_spawn: the kernel records the old mm's peak at exec. This process grows (it generates the
# test files), so each command is started from a fresh, small launcher instead; the floor is the launcher's
# own peak (~9 MiB), not this process's.
LAUNCHER = """
import os, sys, time
res, cmd = sys.argv[1], sys.argv[2:]
t0 = time.perf_counter()
pid = os.posix_spawnp(cmd[0], cmd, os.environ)
_, status, usage = os.wait4(pid, 0)
dt = time.perf_counter() - t0
with open(res, "w") as f:
    f.write(f"{os.waitstatus_to_exitcode(status)} {dt} {usage.ru_maxrss}")
"""


def run(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, int, str]:
    """(wall seconds, peak RSS in MiB, stdout) of one fresh process, timed and measured by the launcher."""
    exe = cmd[0] if os.sep in cmd[0] else shutil.which(cmd[0]) or cmd[0]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, tempfile.NamedTemporaryFile() as res:
        actions = [(os.POSIX_SPAWN_DUP2, out.fileno(), 1), (os.POSIX_SPAWN_DUP2, err.fileno(), 2)]
        launcher = [PY, "-S", "-c", LAUNCHER, res.name, exe, *cmd[1:]]
        pid = os.posix_spawn(PY, launcher, env if env is not None else os.environ, file_actions=actions)
        _, status = os.waitpid(pid, 0)
        out.seek(0)
        err.seek(0)
        text, errs = out.read().decode(errors="replace"), err.read().decode(errors="replace")
        fields = Path(res.name).read_text().split()
    if os.waitstatus_to_exitcode(status) != 0 or len(fields) != 3:
        raise SystemExit(f"launcher for {cmd[0]} failed: {errs.strip()[-500:]}")
    code, dt, maxrss_kib = int(fields[0]), float(fields[1]), int(fields[2])
    if code not in (0, 1):
        raise SystemExit(f"{cmd[0]} failed ({code}): {errs.strip()[-500:]}")
    return dt, maxrss_kib // 1024, text


def median_runs(fns: dict[str, Callable[[], tuple[float, int, str]]], runs: int) -> dict[str, tuple[float, int, str]]:
    """Interleave the candidates run by run, so machine noise hits all of them alike."""
    results: dict[str, list[tuple[float, int, str]]] = {k: [] for k in fns}
    for _ in range(runs):
        for name, fn in fns.items():
            results[name].append(fn())
    return {k: (statistics.median(r[0] for r in v), max(r[1] for r in v), v[-1][2]) for k, v in results.items()}


def table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |" for r in rows]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def corpus(name: str) -> Path:
    from fetch_corpus import corpus_path

    p = corpus_path(name)
    if not p.exists():
        raise SystemExit(f"{p} missing: run scripts/fetch_corpus.py")
    return p


# ------------------------------------------------------------------------------------------------ fixtures


def make_big_vocab(path: Path, n_vocab: int = 262_144) -> Path:
    """A GGUF with a gemma-3-sized vocabulary (tokens, scores, types, merges) and a tiny body."""
    if path.exists():
        return path
    from gguftpl.gguf.reader import ValueType
    from gguftpl.gguf.tinymodel import tiny_llama_kv, tiny_llama_tensors
    from gguftpl.gguf.writer import Typed, write_gguf
    from tests.conftest import CHATML

    tokens = ["<|im_start|>", "<|im_end|>"] + [f"▁w{i:x}" for i in range(n_vocab - 2)]
    kv = {
        **tiny_llama_kv(),
        "general.name": "bench-262k",
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.tokens": Typed(ValueType.ARRAY, tokens, ValueType.STRING),
        "tokenizer.ggml.scores": Typed(ValueType.ARRAY, [0.0] * n_vocab, ValueType.FLOAT32),
        "tokenizer.ggml.token_type": Typed(ValueType.ARRAY, [3, 3] + [1] * (n_vocab - 2), ValueType.INT32),
        "tokenizer.ggml.merges": Typed(ValueType.ARRAY, [f"▁w{i:x} {i % 7}" for i in range(n_vocab)], ValueType.STRING),
        "tokenizer.ggml.bos_token_id": Typed(ValueType.UINT32, 0),
        "tokenizer.ggml.eos_token_id": Typed(ValueType.UINT32, 1),
        "tokenizer.chat_template": CHATML,
    }
    write_gguf(path, kv, tiny_llama_tensors(n_vocab, n_embd=16))
    return path


def make_big_file(path: Path, gib: float = 2.1) -> Path:
    """A >= 2 GiB GGUF of 201 random-byte tensors (random so no filesystem shortcut applies)."""
    from gguftpl.gguf.reader import read_header
    from gguftpl.gguf.writer import write_gguf
    from tests.conftest import CHATML

    n_tensors = 201
    per = int(gib * 2**30 / n_tensors) // 4 * 4
    if path.exists() and path.stat().st_size >= gib * 2**30 * 0.99:
        return path
    kv = {"general.architecture": "llama", "general.name": "bench-2gib", "tokenizer.chat_template": CHATML}
    write_gguf(path, kv, [(f"blk.{i}.weight", (per // 4,), 0, b"") for i in range(n_tensors)])
    h = read_header(path)
    block = os.urandom(64 << 20)
    with open(path, "r+b") as fh:
        fh.seek(h.data_offset)
        left = (h.data_end or 0) - h.data_offset
        while left:
            n = min(len(block), left)
            fh.write(block[:n])
            left -= n
    return path


# ------------------------------------------------------------------------------------------------ sections


def bench_header(work: Path, runs: int) -> str:
    files = {
        "SmolLM2-135M (49,152 tokens)": corpus("SmolLM2-135M-Instruct.Q4_1.gguf"),
        "generated (262,144 tokens)": make_big_vocab(work / "vocab262k.gguf"),
    }
    ours = (
        "import time,sys;t=time.perf_counter();from gguftpl.gguf.reader import read_header;"
        "h=read_header(sys.argv[1]);print(time.perf_counter()-t)"
    )
    theirs = (
        "import time,sys;t=time.perf_counter();import gguf;r=gguf.GGUFReader(sys.argv[1]);print(time.perf_counter()-t)"
    )
    rows = [["file", "gguftpl read", "gguf.GGUFReader", "speed-up (target >= 25x)", "RSS ours / theirs"]]
    for label, path in files.items():
        res = median_runs(
            {
                "ours": lambda p=path: run([PY, "-c", ours, str(p)]),
                "theirs": lambda p=path: run([PY, "-c", theirs, str(p)]),
            },
            runs,
        )
        # in-process time (import + read), without interpreter start-up; the last run's figure
        t_ours = float(res["ours"][2].strip())
        t_theirs = float(res["theirs"][2].strip())
        rows.append(
            [
                label,
                f"{t_ours * 1000:.0f} ms",
                f"{t_theirs * 1000:.0f} ms",
                f"{t_theirs / t_ours:.1f}x",
                f"{res['ours'][1]} / {res['theirs'][1]} MiB",
            ]
        )
    return "### Header read (import + read, median of fresh processes)\n\n" + table(rows)


PATCH_GIB = 2.1
"""Size of the patch benchmark's GGUF (--patch-gib)."""


def bench_patch(work: Path, runs: int) -> str:
    big = make_big_file(work / ("big.gguf" if PATCH_GIB == 2.1 else f"big-{PATCH_GIB:g}gib.gguf"), PATCH_GIB)
    size = big.stat().st_size
    tpl = ROOT / "upstream_templates" / "NousResearch" / "Hermes-2-Pro-Mistral-7B" / "tool_use.jinja"
    outs = {k: work / f"out-{k}.gguf" for k in ("cp", "patch", "new_metadata")}

    def fresh(out: Path) -> None:
        # every candidate starts with no output and no dirty pages left by the one before
        if out.exists():
            out.unlink()
        os.sync()

    def do_cp() -> tuple[float, int, str]:
        fresh(outs["cp"])
        return run(["cp", str(big), str(outs["cp"])])

    def do_cp_sync() -> tuple[float, int, str]:
        # the durable baseline: patch fsyncs before its rename, plain cp leaves dirty pages behind
        fresh(outs["cp"])
        return run(["sh", "-c", 'cp "$0" "$1" && sync "$1"', str(big), str(outs["cp"])])

    def do_patch() -> tuple[float, int, str]:
        # the rewrite alone: the before/after audit is measured on its own below
        fresh(outs["patch"])
        return run([*PATCH_CMD, str(big), "-o", str(outs["patch"]), "--template", f"tool_use={tpl}"])

    def do_new_metadata() -> tuple[float, int, str]:
        fresh(outs["new_metadata"])
        return run(
            [str(BIN / "gguf-new-metadata"), str(big), str(outs["new_metadata"]), "--chat-template-file", str(tpl)]
        )

    run(["md5sum", str(big)])  # warm the page cache once
    fns = {"cp": do_cp, "cp_sync": do_cp_sync, "patch": do_patch, "new_metadata": do_new_metadata}
    raw: dict[str, list[tuple[float, int, str]]] = {k: [] for k in fns}
    names = list(fns)
    for i in range(runs):
        # interleaved, keeping every run for the spread; the order rotates because on this VM the run after
        # a 2 GiB file was freed (online discard) is the slow one, whichever tool it is
        for name in names[i % len(names) :] + names[: i % len(names)]:
            raw[name].append(fns[name]())
    for out in outs.values():
        fresh(out)
    return (
        f"### Patch a {size / 2**30:.2f} GiB GGUF (median of {runs} interleaved runs)\n\n"
        + _patch_rows(size, raw)
        + "\n\n"
        + audit_cost_note(big, runs)
        + "\n\n"
        + bench_patch_reflink(work, runs)
    )


def _patch_rows(size: int, raw: dict[str, list[tuple[float, int, str]]]) -> str:
    med = {k: statistics.median(r[0] for r in v) for k, v in raw.items()}
    rows = [
        [
            "tool",
            "time (median)",
            "fastest-slowest",
            "throughput",
            "vs cp (target patch >= 0.8x)",
            "vs cp + sync",
            "peak RSS (target patch < 150 MB)",
        ]
    ]
    for name, label in (
        ("cp", "cp"),
        ("cp_sync", "cp + sync (durable, as patch is)"),
        ("patch", "gguftpl patch --no-audit (fsync + byte-compare proof)"),
        ("new_metadata", "gguf-new-metadata (no fsync, no proof)"),
    ):
        times = sorted(r[0] for r in raw[name])
        t = med[name]
        rows.append(
            [
                label,
                f"{t:.2f} s",
                f"{times[0]:.2f}-{times[-1]:.2f} s",
                f"{size / t / 2**30:.2f} GiB/s",
                f"{med['cp'] / t:.2f}x",
                f"{med['cp_sync'] / t:.2f}x",
                f"{max(r[1] for r in raw[name])} MiB",
            ]
        )
    return table(rows)


PATCH_CMD = [str(BIN / "gguftpl"), "patch", "--no-audit"]
"""A patch audits its input before and its output after (for the before/after); the rows time the rewrite."""


def audit_cost_note(big: Path, runs: int) -> str:
    """What the before/after audit adds to a patch: two audits of the file (the patch rows leave them out),
    cold (a template never seen, a fresh facts cache) and warm (the same templates again)."""
    cold, warm = [], []
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="gguftpl-bench-cache-") as cache:
            env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error", "GGUFTPL_CACHE_DIR": cache}
            cmd = [str(BIN / "gguftpl"), "audit", "--exit-zero", str(big)]
            cold.append(run(cmd, env)[0])
            warm.append(run(cmd, env)[0])
    c, w = statistics.median(cold), statistics.median(warm)
    return (
        "The patch rows run `patch --no-audit`: they time the rewrite. A plain `patch` also audits the input "
        f"before and the output after (for the before/after): an audit of this file takes {c:.2f} s cold and "
        f"{w:.2f} s warm (median of {runs}), so a patch adds about {c + w:.1f}-{2 * c:.1f} s to the rows."
    )


REFLINK_GIB = 1.0
"""Size of the reflink benchmark's GGUF (--reflink-gib)."""


def bench_patch_reflink(work: Path, runs: int) -> str:
    """Patch (-o and --in-place) vs cp --reflink=never/always on a loop-mounted XFS: time and space used."""
    from xfsloop import Unavailable, used_bytes, xfs_loop

    try:
        with xfs_loop(work / "xfs", size=int(REFLINK_GIB * 4 * 2**30)) as mnt:
            return _reflink_table(mnt, runs, used_bytes)
    except Unavailable as exc:
        return f"### Patch on XFS with reflinks\n\nnot measured: {exc}"


def _reflink_table(mnt: Path, runs: int, used_bytes: Callable[[Path], int]) -> str:
    big = make_big_file(mnt / "big.gguf", REFLINK_GIB)
    tpl = ROOT / "upstream_templates" / "NousResearch" / "Hermes-2-Pro-Mistral-7B" / "tool_use.jinja"
    out, victim = mnt / "out.gguf", mnt / "inplace.gguf"
    fns: dict[str, Callable[[], tuple[float, int, str]]] = {
        "cp_never": lambda: run(["cp", "--reflink=never", str(big), str(out)]),
        "cp_never_sync": lambda: run(["sh", "-c", 'cp --reflink=never "$0" "$1" && sync "$1"', str(big), str(out)]),
        "cp_always": lambda: run(["cp", "--reflink=always", str(big), str(out)]),
        "patch": lambda: run([*PATCH_CMD, str(big), "-o", str(out), "--template", f"tool_use={tpl}"]),
        "in_place": lambda: run([*PATCH_CMD, str(victim), "--in-place", "--template", f"tool_use={tpl}"]),
        "rewrite": lambda: run([PY, "-c", REWRITE_IN_PROCESS, str(big), str(out), str(tpl)]),
        "startup": lambda: run([PY, "-c", "import gguftpl.cli"]),
    }
    times: dict[str, list[float]] = {k: [] for k in fns}
    space: dict[str, list[int]] = {k: [] for k in fns}
    for i in range(runs):
        names = list(fns)
        for name in names[i % len(names) :] + names[: i % len(names)]:
            for f in (out, victim):
                f.unlink(missing_ok=True)
            if name == "in_place":  # the model to patch in place: a clone of the big one (not timed)
                run(["cp", "--reflink=always", str(big), str(victim)])
            before = used_bytes(mnt)
            t, _rss, printed = fns[name]()
            times[name].append(float(printed) if name == "rewrite" else t)
            space[name].append(used_bytes(mnt) - before)
    for f in (out, victim):
        f.unlink(missing_ok=True)
    return _reflink_rows(big.stat().st_size, runs, times, space)


REWRITE_IN_PROCESS = (
    "import sys,time;from pathlib import Path;from gguftpl.gguf.rewrite import rewrite;"
    "kv={'tokenizer.chat_template.tool_use':Path(sys.argv[3]).read_text()};"
    "t=time.perf_counter();rewrite(sys.argv[1],sys.argv[2],set_kv=kv);print(time.perf_counter()-t)"
)
"""The same rewrite as the patch rows, timed inside the process: what it costs past the interpreter."""


def _reflink_rows(size: int, runs: int, times: dict[str, list[float]], space: dict[str, list[int]]) -> str:
    med = {k: statistics.median(v) for k, v in times.items()}
    rows = [
        [
            "tool",
            "time (median)",
            "fastest-slowest",
            "cp --reflink=never / this (target patch >= 5x)",
            "cp --reflink=never + sync / this",
            "disk space added (target patch < 64 MiB)",
        ]
    ]
    for name, label in (
        ("cp_never", "cp --reflink=never"),
        ("cp_never_sync", "cp --reflink=never + sync (durable, as patch is)"),
        ("cp_always", "cp --reflink=always (shares, no header change)"),
        ("patch", "gguftpl patch --no-audit -o (clone + FIEMAP proof, fsync)"),
        ("in_place", "gguftpl patch --no-audit --in-place"),
        ("rewrite", "of which the rewrite (gguf.rewrite.rewrite, timed in process)"),
        ("startup", "of which start-up (python -c 'import gguftpl.cli')"),
    ):
        ts = sorted(times[name])
        rows.append(
            [
                label,
                f"{med[name]:.3f} s",
                f"{ts[0]:.3f}-{ts[-1]:.3f} s",
                f"{med['cp_never'] / med[name]:.1f}x",
                f"{med['cp_never_sync'] / med[name]:.1f}x",
                f"{statistics.median(space[name]) / 2**20:.2f} MiB",
            ]
        )
    return (
        f"### Patch a {size / 2**30:.2f} GiB GGUF on XFS with reflinks (loop-mounted; median of {runs} interleaved "
        "runs, space as the filesystem counts it after sync)\n\n" + table(rows)
    )


def make_quant_dir(folder: Path, n: int = 100) -> Path:
    """``n`` small GGUFs as a converter's output folder: 10 models x 10 quants (file_type differs)."""
    from gguftpl.gguf.reader import ValueType
    from gguftpl.gguf.writer import Typed
    from tests.conftest import CHATML, build_gguf

    folder.mkdir(parents=True, exist_ok=True)
    if len(list(folder.glob("*.gguf"))) == n:
        return folder
    for i in range(n):
        model, quant = divmod(i, 10)
        build_gguf(
            folder / f"model{model}-Q{quant}.gguf",
            templates={"default": CHATML.replace("assistant", f"assistant{model}")},
            extra_kv={"general.file_type": Typed(ValueType.UINT32, quant + 1)},
            seed=None,
        )
    return folder


def make_big_vocab_dir(folder: Path, n: int = 100) -> Path:
    """``n`` GGUFs with 262,144-token vocabularies whose metadata all differ (``general.name``), so no file is
    answered from another's: one written by the tiny-model writer, the others its header with another name of
    the same length and the (zero) tensor data left sparse, so the folder costs ``n`` headers of disk."""
    from gguftpl.gguf.reader import read_header

    folder.mkdir(parents=True, exist_ok=True)
    if len(list(folder.glob("*.gguf"))) == n:
        return folder
    base = make_big_vocab(folder.parent / "vocab262k.gguf")
    header = read_header(base)
    name = header.kv["general.name"]
    size = base.stat().st_size
    with open(base, "rb") as fh:
        head = bytearray(fh.read(header.data_offset))
    width = len(name.value.encode())
    for i in range(n):
        head[name.end - width : name.end] = f"{i:0{width}d}".encode()
        with open(folder / f"vocab262k-{i:03d}.gguf", "wb") as out:
            out.write(head)
            out.truncate(size)
    return folder


def bench_big_folder(work: Path, runs: int) -> str:
    """Cold audit (``--no-cache``) of 100 GGUFs with 262k-token vocabularies: memory must be bounded by the
    largest file, not the folder (issue 27: 4.67 GB before the per-file facts were dropped once reported)."""
    folder = make_big_vocab_dir(work / "vocab262k-folder")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "GGUFTPL_CACHE_DIR": str(work / "cache")}
    one = sorted(folder.glob("*.gguf"))[0]
    cmd = [str(BIN / "gguftpl"), "audit", "--no-cache", "--exit-zero", "--format", "json"]
    res = median_runs({"dir": lambda: run([*cmd, str(folder)], env), "one": lambda: run([*cmd, str(one)], env)}, runs)
    n = len(list(folder.glob("*.gguf")))
    rows = [["cold audit (--no-cache)", "time", "peak RSS (target folder < 300 MB)"]]
    rows.append([f"folder of {n} GGUFs, 262,144 tokens each", f"{res['dir'][0]:.2f} s", f"{res['dir'][1]} MiB"])
    rows.append(["one of them", f"{res['one'][0]:.2f} s", f"{res['one'][1]} MiB"])
    note = f"Median time and largest peak RSS of {runs} fresh processes (the main process; workers are separate)."
    return "### Audit of a folder of big vocabularies\n\n" + table(rows) + "\n\n" + note


def bench_audit(work: Path, runs: int) -> str:
    """Cold audits (a template never seen: --no-cache) and warm ones (its facts in the cache folder) of the
    bundled sample, a 262k-vocab GGUF and a 100-file folder, interleaved with ggufdoctor on the same inputs."""
    sample = ROOT / "samples" / "hermes-2-pro-mistral-7b.chatml.gguf"
    vocab = make_big_vocab(work / "vocab262k.gguf")
    folder = make_quant_dir(work / "quants")
    files = sorted(str(p) for p in folder.glob("*.gguf"))
    gguftpl = str(BIN / "gguftpl")
    doctor = str(BIN / "ggufdoctor")
    cache_dir = work / "cache"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "GGUFTPL_CACHE_DIR": str(cache_dir)}

    def ours(target: Path, *flags: str) -> Callable[[], tuple[float, int, str]]:
        return lambda: run([gguftpl, "audit", "--exit-zero", "--format", "json", *flags, str(target)], env)

    def doctor_one(target: Path) -> Callable[[], tuple[float, int, str]]:
        return lambda: run([doctor, str(target), "--fail-on", "never"], env)

    def doctor_all() -> tuple[float, int, str]:
        total, peak = 0.0, 0  # ggufdoctor takes one file per run
        for f in files:
            t, rss, _ = run([doctor, f, "--fail-on", "never"], env)
            total, peak = total + t, max(peak, rss)
        return total, peak, ""

    # a regular install byte-compiles the package; an editable one under PYTHONDONTWRITEBYTECODE never does,
    # and would pay ~0.2 s of compiling per run that ggufdoctor's wheel does not
    subprocess.run([PY, "-m", "compileall", "-q", str(ROOT / "gguftpl")], check=True)
    for target in (sample, vocab, folder):
        ours(target)()  # prime the cache for the warm rows
    candidates: dict[str, Callable[[], tuple[float, int, str]]] = {}
    for key, target in (("sample", sample), ("vocab", vocab), ("dir", folder)):
        candidates[f"cold_{key}"] = ours(target, "--no-cache")
        candidates[f"warm_{key}"] = ours(target)
        if key != "dir":
            candidates[f"doctor_{key}"] = doctor_one(target)
    res = median_runs(candidates, runs)
    res["doctor_dir"] = doctor_all()
    header = ["input", "gguftpl cold", "gguftpl warm", "ggufdoctor", "cold ratio (target 2x)"]
    rows = [[*header, "warm ratio (target 10x; folder 25x)", "peak RSS cold / warm / theirs"]]
    labels = {
        "sample": "bundled sample (samples/…chatml.gguf)",
        "vocab": "generated 262,144-token GGUF",
        "dir": f"folder of {len(files)} GGUFs (10 models x 10 quants; ggufdoctor: {len(files)} runs)",
    }
    for key, label in labels.items():
        cold, warm, theirs = res[f"cold_{key}"], res[f"warm_{key}"], res[f"doctor_{key}"]
        rows.append(
            [
                label,
                f"{cold[0]:.2f} s",
                f"{warm[0]:.2f} s",
                f"{theirs[0]:.2f} s",
                f"{theirs[0] / cold[0]:.1f}x",
                f"{theirs[0] / warm[0]:.1f}x",
                f"{cold[1]} / {warm[1]} / {theirs[1]} MiB",
            ]
        )
    note = (
        f"Median of {runs} interleaved fresh processes (the folder's ggufdoctor column: one pass of {len(files)} "
        "runs). Cold: `--no-cache`, so every template is parsed, rendered by the jinja2 worker and loaded and "
        "rendered by llama.cpp's worker (both separate processes: their memory is not in the RSS column). "
        "Warm: the same command with the template facts in the cache folder. ggufdoctor ran offline "
        "(HF_HUB_OFFLINE=1)."
    )
    return "### Audit (fresh processes)\n\n" + table(rows) + "\n\n" + note


def bench_verify(work: Path, runs: int) -> str:
    smol = corpus("SmolLM2-135M-Instruct.Q4_1.gguf")
    cmd = [str(BIN / "gguftpl"), "verify", "--format", "json", str(smol)]
    env = {**os.environ, "TRANSFORMERS_VERBOSITY": "error"}
    res = median_runs({"standin": lambda: run(cmd, env), "weights": lambda: run([*cmd, "--load-weights"], env)}, runs)
    rows = [["SmolLM2-135M Q4_1 (98 MB)", "time", "peak RSS", "stages"]]
    for key, label in (("standin", "verify (stand-in)"), ("weights", "verify --load-weights")):
        t, rss, out = res[key]
        stages = " ".join(s["status"] for s in json.loads(out)["stages"])
        rows.append([label, f"{t:.2f} s", f"{rss} MiB", stages])
    ratio = res["weights"][0] / res["standin"][0]
    rss_ratio = res["weights"][1] / max(1, res["standin"][1])
    return (
        "### Verify through llama.cpp (fresh processes)\n\n"
        + table(rows)
        + f"\n\nstand-in vs real weights: {ratio:.1f}x faster, {rss_ratio:.1f}x less memory\n\n"
        + bench_verify_live(runs)
    )


def bench_verify_live(runs: int) -> str:
    """``verify --live`` on the real tool-trained model: the five stages on the real weights, then the model
    answers the canary request (and, with no parsed call, again with tool_choice=required), in a child."""
    qwen = corpus("Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf")
    cmd = [str(BIN / "gguftpl"), "verify", "--format", "json", str(qwen)]
    live = [*cmd, "--live", "--threads", "1"]
    env = {**os.environ, "TRANSFORMERS_VERBOSITY": "error"}
    res = median_runs({"standin": lambda: run(cmd, env), "live": lambda: run(live, env)}, runs)
    rows = [["Qwen2.5-Coder-0.5B Q4_K_M (491 MB)", "time", "peak RSS", "stages", "live outcome"]]
    for key, label in (("standin", "verify (stand-in)"), ("live", "verify --live --threads 1")):
        t, rss, out = res[key]
        doc = json.loads(out)
        stages = " ".join(s["status"] for s in doc["stages"])
        rows.append([label, f"{t:.2f} s", f"{rss} MiB", stages, str(doc["stages"][-1].get("outcome", "-"))])
    ratio = res["live"][0] / res["standin"][0]
    return (
        table(rows)
        + f"\n\n--live costs {ratio:.1f}x the stand-in's time (load, the stages on real weights, two answers of "
        "up to 192 tokens); peak RSS is the largest process (the model's child, reaped by gguftpl, counts)"
    )


def bench_remote(work: Path, runs: int) -> str:
    from gguftpl.gguf.reader import read_header
    from gguftpl.repo.audit import bench_remote_audit, bench_repo_audit
    from tests.hubserver import HubServer

    vocab = make_big_vocab(work / "vocab262k.gguf")
    smol = corpus("SmolLM2-135M-Instruct.Q4_1.gguf")
    sample = ROOT / "samples" / "hermes-2-pro-mistral-7b.chatml.gguf"
    os.environ.setdefault("HF_HOME", str(work / "hf_home"))
    rows = [["remote audit", "file size", "header size", "bytes fetched", "requests"]]
    with HubServer(work / "hub") as hub:
        hub.add_file("bench/smol", "smol.gguf", smol)
        hub.add_file("bench/vocab", "vocab.gguf", vocab)
        for i in range(20):
            hub.add_file("bench/quants", f"model-Q{i}.gguf", sample)
        for label, repo, name, path in (
            ("SmolLM2 (49,152 tokens)", "bench/smol", "smol.gguf", smol),
            ("generated (262,144 tokens)", "bench/vocab", "vocab.gguf", vocab),
        ):
            header_size = read_header(path).tensor_info_end
            got, reqs = bench_remote_audit(f"hf://{repo}/{name}", endpoint=hub.url)
            rows.append([label, f"{path.stat().st_size:,}", f"{header_size:,}", f"{got:,}", str(reqs)])
        hub.latency = 0.05  # a far-away Hub: where concurrency pays
        serial = bench_repo_audit("bench/quants", jobs=1, endpoint=hub.url, upstream=False)
        concurrent = bench_repo_audit("bench/quants", jobs=4, endpoint=hub.url, upstream=False)
    rows2 = [["20-file repo audit (50 ms latency)", "time", "bytes", "requests"]]
    for label, r in (("--jobs 1", serial), ("--jobs 4", concurrent)):
        rows2.append([label, f"{r['seconds']:.2f} s", f"{r['bytes_fetched']:,}", str(r["requests"])])
    return (
        "### Remote (local Hub server on 127.0.0.1)\n\n"
        + table(rows)
        + "\n\n"
        + table(rows2)
        + f"\n\nconcurrency speed-up: {serial['seconds'] / concurrent['seconds']:.1f}x"
    )


def make_store_home(home: Path, n: int = 50) -> Path:
    """A home whose Ollama store and LM Studio folder hold ``n`` models, written as the runtimes write them
    (tests/ollama_store.py): Hermes-2-Pro GGUFs under Ollama's curated ChatML TEMPLATE, plain ChatML ones in LM
    Studio, each file distinct (its own seed), so every blob is hashed and every header read."""
    from tests.conftest import CHATML, DATA, build_gguf
    from tests.ollama_store import CHATML_GO, CHATML_PARAMS, lmstudio_model, ollama_model

    if (home / "done").exists():
        return home
    hermes = DATA / "hermes"
    templates = {
        "default": (hermes / "NousResearch-Hermes-2-Pro-Mistral-7B.default.jinja").read_text(encoding="utf-8"),
        "tool_use": (hermes / "NousResearch-Hermes-2-Pro-Mistral-7B.tool_use.jinja").read_text(encoding="utf-8"),
    }
    src = home.parent / "store-src"
    src.mkdir(parents=True, exist_ok=True)
    for i in range(n // 2):
        g = build_gguf(src / f"h{i}.gguf", templates=templates, seed=i + 1)
        ollama_model(home / ".ollama" / "models", f"hermes-{i}", g, template=CHATML_GO, params=CHATML_PARAMS)
        p = build_gguf(src / f"p{i}.gguf", templates={"default": CHATML}, seed=i + 1000)
        lmstudio_model(home, f"pub/M{i}-GGUF/m{i}.gguf", p)
    (home / "done").write_text("")
    return home


def bench_scan(work: Path, runs: int) -> str:
    """``gguftpl scan`` of 50 models: cold (an empty facts cache, every blob hashed) and warm (issue 22: a store
    of 50 models audits warm in under 2 s, and a warm run renders nothing)."""
    home = make_store_home(work / "store-home")
    env = {k: v for k, v in os.environ.items() if k not in ("OLLAMA_MODELS", "HF_HUB_CACHE")}
    env.update(HOME=str(home), HF_HOME=str(home / "hf"), HF_HUB_OFFLINE="1", GGUFTPL_CACHE_DIR=str(work / "scan-cache"))
    cmd = [str(BIN / "gguftpl"), "scan", "--format", "json"]
    shutil.rmtree(work / "scan-cache", ignore_errors=True)
    cold = run(cmd, env)
    warm = median_runs({"warm": lambda: run(cmd, env)}, runs)["warm"]
    rows = [["gguftpl scan", "time", "peak RSS", "models", "analysed", "TEMPLATEs rendered", "bytes hashed"]]
    for label, (dt, rss, text) in (("cold", cold), (f"warm (median of {runs})", warm)):
        doc = json.loads(text)
        rows.append([label, f"{dt:.2f} s", f"{rss} MiB", str(len(doc["models"])), str(doc["analysed"]),
                     str(doc["go_rendered"]), str(doc["bytes_hashed"])])  # fmt: skip
    return "### Scan of the stores (target: 50 models warm < 2 s, nothing rendered)\n\n" + table(rows)


def bench_bombs(work: Path, runs: int) -> str:
    from bench_bombs import bombs_table

    return bombs_table(work, runs, run, table)


def bench_survey(work: Path, runs: int) -> str:
    """``gguftpl survey --author`` over a local Hub (issue 23: 60 repos, bounded memory, no more than one header
    read per distinct file): a fresh state each time, then a second run on the state of the first (nothing read)."""
    from tests.hubserver import HubServer

    smol = corpus("SmolLM2-135M-Instruct.Q4_1.gguf")
    rows = [["gguftpl survey --author", "time", "peak RSS", "repos", "headers read", "most reads of one file"]]
    for n in (60, 240):
        with HubServer(work / f"survey-hub-{n}") as hub:
            for i in range(n):
                for q in ("Q4_K_M", "Q4_K_S", "Q8_0", "IQ2_XS"):
                    hub.add_file(f"bench{n}/m{i:03d}-GGUF", f"m{i:03d}-{q}.gguf", smol)
            hub.latency = 0.01
            env = {**os.environ, "HF_ENDPOINT": hub.url, "HF_HOME": str(work / "survey-hf"),
                   "GGUFTPL_CACHE_DIR": str(work / f"survey-cache-{n}")}  # fmt: skip
            state = work / f"survey-{n}.db"
            state.unlink(missing_ok=True)
            cmd = [str(BIN / "gguftpl"), "survey", "--author", f"bench{n}", "--state", str(state), "--format", "json"]
            for label in ("cold", "again (same state)"):
                hub.clear_log()
                dt, rss, text = run(cmd, env)
                doc = json.loads(text)
                reads = hub.header_reads()
                most = max(reads.values(), default=0)
                rows.append([f"{n} repos, {label}", f"{dt:.2f} s", f"{rss} MiB", str(doc["repos"]),
                             str(doc["header_reads"]), str(most)])  # fmt: skip
    return "### Survey of a publisher on the local Hub (target: bounded memory, <= 1 header read per file)\n\n" + table(
        rows
    )


SECTIONS: dict[str, Callable[[Path, int], str]] = {
    "header": bench_header,
    "patch": bench_patch,
    "audit": bench_audit,
    "verify": bench_verify,
    "remote": bench_remote,
    "bigfolder": bench_big_folder,
    "scan": bench_scan,
    "survey": bench_survey,
    "patch-folder": lambda work, runs: __import__("bench_folder").bench_patch_folder(work, runs, run, PY),
    "bombs": bench_bombs,
}


def main(argv: list[str] | None = None) -> int:
    global PATCH_GIB, REFLINK_GIB
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sections", nargs="*", help=f"any of {', '.join(SECTIONS)} (default: all)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--work", type=Path, default=None, help="folder for generated files (default: a temp dir)")
    ap.add_argument("--json", type=Path, help="also write the tables here")
    ap.add_argument("--patch-gib", type=float, default=PATCH_GIB, help="size of the patch benchmark's GGUF (>= 2)")
    ap.add_argument("--reflink-gib", type=float, default=REFLINK_GIB, help="size of the reflink benchmark's GGUF")
    ap.add_argument("--folder-file-mib", type=int, default=512, help="tensor data per quant of patch-folder")
    args = ap.parse_args(argv)
    import bench_folder

    bench_folder.FOLDER_FILE_MIB = args.folder_file_mib
    PATCH_GIB = args.patch_gib
    REFLINK_GIB = args.reflink_gib
    unknown = set(args.sections) - set(SECTIONS)
    if unknown:
        ap.error(f"unknown sections {sorted(unknown)}; choose from {', '.join(SECTIONS)}")
    work = args.work or Path(tempfile.mkdtemp(prefix="gguftpl-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    out = {}
    try:
        for name in args.sections or list(SECTIONS):
            text = SECTIONS[name](work, args.runs)
            out[name] = text
            print(text + "\n", flush=True)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
