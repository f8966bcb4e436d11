"""``scripts/bench.py patch-folder``: a converter's folder of 24 quants patched with one command
(``gguftpl patch DIR -o OUT --from-catalog …``, audits and all) vs copying the folder with
``cp --reflink=never`` (what a patch costs without reflinks), on a loop-mounted XFS: time and space added."""

from __future__ import annotations

import shutil
import statistics
from collections.abc import Callable
from pathlib import Path

FOLDER_FILE_MIB = 512
"""Tensor data per quant (--folder-file-mib): 24 quants, 12 GiB by default. A real release is larger still (the
24 quants of a 7B model: ~110 GiB); the patch's time does not grow with the tensor data (reflinks), cp's does, so
the ratio here is a lower bound of a real release's. 12 GiB is what a CI-sized disk holds twice (source and cp's
copy) with room to spare."""
UPSTREAM = "NousResearch/Hermes-2-Pro-Mistral-7B"


def bench_patch_folder(work: Path, runs: int, run: Callable[..., tuple[float, int, str]], py: str) -> str:
    from quantfolder import make_quant_folder
    from xfsloop import Unavailable, used_bytes, xfs_loop

    per_file = FOLDER_FILE_MIB << 20
    try:
        with xfs_loop(work / "xfs-folder", size=24 * per_file * 3 + (2 << 30)) as mnt:
            src = mnt / "release"
            made = make_quant_folder(src, data_bytes=per_file)
            total = sum(p.stat().st_size for p in made)
            out = mnt / "out"
            fns = {
                "cp": lambda: run(["cp", "-r", "--reflink=never", str(src), str(out)]),
                "cp_sync": lambda: run(
                    ["sh", "-c", 'cp -r --reflink=never "$0" "$1" && sync -f "$1"', str(src), str(out)]
                ),
                "patch": lambda: run(
                    [py, "-m", "gguftpl", "patch", str(src), "-o", str(out), "--from-catalog", UPSTREAM]
                ),
            }
            times: dict[str, list[float]] = {k: [] for k in fns}
            space: dict[str, list[int]] = {k: [] for k in fns}
            for i in range(runs):
                names = list(fns)
                for name in names[i % len(names) :] + names[: i % len(names)]:
                    shutil.rmtree(out, ignore_errors=True)
                    before = used_bytes(mnt)
                    t, _rss, _ = fns[name]()
                    times[name].append(t)
                    space[name].append(used_bytes(mnt) - before)
            shutil.rmtree(out, ignore_errors=True)
    except Unavailable as exc:
        return f"### Patch a folder of quants on XFS\n\nnot measured: {exc}"
    return _rows(len(made), total, runs, times, space)


def _rows(n: int, total: int, runs: int, times: dict[str, list[float]], space: dict[str, list[int]]) -> str:
    from bench import table

    med = {k: statistics.median(v) for k, v in times.items()}
    rows = [["tool", "time (median)", "fastest-slowest", "this / patch (target cp >= 10x)", "space added per file"]]
    for name, label in (
        ("cp", "cp -r --reflink=never"),
        ("cp_sync", "cp -r --reflink=never + sync (durable, as patch is)"),
        ("patch", "gguftpl patch DIR -o OUT --from-catalog (audits, proofs, GT55x)"),
    ):
        ts = sorted(times[name])
        rows.append(
            [
                label,
                f"{med[name]:.2f} s",
                f"{ts[0]:.2f}-{ts[-1]:.2f} s",
                f"{med[name] / med['patch']:.1f}x",
                f"{statistics.median(space[name]) / n / 2**20:.2f} MiB",
            ]
        )
    return (
        f"### Patch a folder of {n} quants ({total / 2**30:.2f} GiB) on XFS with reflinks (loop-mounted; median of "
        f"{runs} interleaved runs, space counted after sync)\n\n" + table(rows)
    )
