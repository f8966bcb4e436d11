"""`gguftpl scan` on a home with the three stores, written as the runtimes write them (an HF cache made by
huggingface_hub itself against the local Hub): every model listed once, exit 1 when one drops tools, a warm re-run
renders nothing, a hostile store is an error row and exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CHATML, DATA, build_gguf, read_pty
from tests.ollama_store import CHATML_GO, CHATML_PARAMS, lmstudio_model, manifest_path, ollama_model, write_manifest

HERMES = DATA / "hermes"


@pytest.fixture
def home(tmp_path: Path, hub) -> Path:  # type: ignore[no-untyped-def]
    from huggingface_hub import hf_hub_download

    h = tmp_path / "home"
    h.mkdir()
    templates = {
        "default": (HERMES / "NousResearch-Hermes-2-Pro-Mistral-7B.default.jinja").read_text(encoding="utf-8"),
        "tool_use": (HERMES / "NousResearch-Hermes-2-Pro-Mistral-7B.tool_use.jinja").read_text(encoding="utf-8"),
    }
    hermes = build_gguf(tmp_path / "hermes.gguf", templates=templates)
    plain = build_gguf(tmp_path / "plain.gguf", templates={"default": CHATML})
    root = h / ".ollama" / "models"
    ollama_model(root, "hermes-test", hermes, template=CHATML_GO, params=CHATML_PARAMS)
    ollama_model(root, "hermes-test", hermes, tag="v1", template=CHATML_GO, params=CHATML_PARAMS)  # one blob
    ollama_model(root, "plain", plain)
    lmstudio_model(h, "pub/Hermes-GGUF/hermes-Q4.gguf", hermes)
    hub.add_file("org/Plain-GGUF", "plain-Q8_0.gguf", plain)
    hf_hub_download("org/Plain-GGUF", "plain-Q8_0.gguf", endpoint=hub.url, cache_dir=h / ".cache/huggingface/hub")
    return h


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OLLAMA_MODELS", "HF_HUB_CACHE", "OLLAMA_GO_TEMPLATE")}
    # the home's own facts cache: cold means cold, whatever other tests have cached
    # (the facts cache not named "gguftpl": `python -m gguftpl` runs in home, which comes first on its path)
    hf_home = str(home / ".cache" / "huggingface")
    env.update(HOME=str(home), HF_HOME=hf_home, GGUFTPL_CACHE_DIR=str(home / "facts-cache"))
    return env


def run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "gguftpl", "scan", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=_env(home), cwd=home)


def test_scan_lists_every_model_once_and_a_warm_run_renders_nothing(home: Path) -> None:
    cold = run(home, "--format", "json")
    assert cold.returncode == 1, cold.stderr
    doc = json.loads(cold.stdout)
    refs = [m["ref"] for m in doc["models"]]
    assert refs == [
        "ollama://hermes-test:latest",
        "ollama://plain:latest",
        "lmstudio://pub/Hermes-GGUF/hermes-Q4.gguf",
        "hf-cache://org/Plain-GGUF/plain-Q8_0.gguf",
    ]
    first = doc["models"][0]
    assert first["also"] == ["ollama://hermes-test:v1"] and first["runtimes"]["ollama"] == "refused"
    assert (
        "Ollama" in first["drops_tools"]
        and first["fix"] == "gguftpl patch ollama://hermes-test:latest --ollama-modelfile DIR"
    )
    assert doc["models"][1]["drops_tools"] == []  # plain ChatML: nothing to drop
    # Ollama's TEMPLATE refuses the tools Hermes' own tool_use renders; the plain one loses them either way
    from gguftpl.engines import registry

    go = registry.availability("ollama").installed
    agrees = [m["jinja_agrees_on_tools"] for m in doc["models"]]
    assert agrees == ([False, True, None, None] if go else [None, None, None, None])
    assert doc["models"][3]["upstream_repo"] == "org/Plain-GGUF"
    assert doc["analysed"] > 0 and doc["go_rendered"] == 1 and doc["bytes_hashed"] > 0
    warm = run(home, "--format", "json")
    assert warm.returncode == 1
    assert warm.stdout, warm.stderr
    again = json.loads(warm.stdout)
    assert [m["ref"] for m in again["models"]] == refs
    assert (again["analysed"], again["go_rendered"], again["bytes_hashed"]) == (0, 0, 0)


def test_a_warm_scan_starts_no_child_process(home: Path, tmp_path: Path) -> None:
    """Warm, every answer is in the facts cache: no engine child, no Node, no Go, no `node --version` probe."""
    from tests.strace import strace

    cmd = [sys.executable, "-m", "gguftpl", "scan"]
    cold = strace(cmd, tmp_path / "cold.st", timeout=900, env=_env(home), cwd=home)
    assert cold.result.returncode == 1, cold.result.stderr
    assert cold.processes > 0  # the trace sees children: the cold scan starts its engines
    warm = strace(cmd, tmp_path / "warm.st", timeout=900, env=_env(home), cwd=home)
    table = cold.result.stdout.split("\n\n")[0]  # the models (the summary after it has the times and counts)
    assert warm.result.returncode == 1 and warm.result.stdout.split("\n\n")[0] == table and "hermes-test" in table
    assert warm.execs == [sys.executable] and warm.processes == 0, (warm.execs, warm.processes)


def test_scan_text_table_and_store_filter(home: Path) -> None:
    r = run(home, "--store", "ollama")
    assert r.returncode == 1, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split()[:3] == ["MODEL", "STORE", "SIZE"] and "Ollama" in lines[0]
    assert any(line.startswith("ollama://hermes-test:latest") and line.rstrip().endswith("400") for line in lines)
    assert "  fix: gguftpl patch ollama://hermes-test:latest --ollama-modelfile DIR" in lines
    assert not any("lmstudio://" in line for line in lines)


def test_a_narrow_terminal_gets_each_model_with_its_runtimes_not_a_broken_table(home: Path) -> None:
    wide = run(home, "--width", "400")
    head, *rows = wide.stdout.split("\n\n")[0].splitlines()
    runtimes = head.split("SIZE", 1)[1].split("  ")
    runtimes = [n.strip() for n in runtimes if n.strip()]
    assert "Ollama" in runtimes and "LM Studio" in runtimes
    row = next(r for r in rows if r.startswith("ollama://hermes-test:latest "))
    cells = row.split()[4:]  # ref, store, size and unit, then one cell per runtime
    assert len(cells) == len(runtimes) and cells[runtimes.index("Ollama")] == "400"
    narrow = run(home, "--width", "80")
    assert narrow.returncode == 1, narrow.stderr
    lines = narrow.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    size = f"{(home.parent / 'hermes.gguf').stat().st_size / 1024:.1f} KB"  # the fixture's GGUF, its blob
    at = lines.index(f"ollama://hermes-test:latest  (ollama, {size})")
    said = " ".join(" ".join(lines[at + 1 : at + 3]).split())  # the runtimes' line, broken between cells
    assert said.startswith("tools: ") and ", ".join(f"{n} {c}" for n, c in zip(runtimes, cells, strict=True)) in said
    assert "  fix: gguftpl patch ollama://hermes-test:latest --ollama-modelfile DIR" in lines
    assert not any(line.startswith("MODEL ") for line in lines)


def test_a_hostile_store_is_an_error_row_and_exit_2(home: Path) -> None:
    root = home / ".ollama" / "models"
    evil = {"mediaType": "application/vnd.ollama.image.model", "digest": "sha256:" + "0" * 64, "size": 3}
    write_manifest(root, manifest_path(root, "evil"), [evil])
    r = run(home, "--store", "ollama", "--format", "json")
    assert r.returncode == 2
    doc = json.loads(r.stdout)
    assert [p["ref"] for p in doc["problems"]] == ["ollama://evil:latest"]
    assert "ollama://hermes-test:latest" in [m["ref"] for m in doc["models"]]


def test_every_hostile_shape_is_its_own_error_row_and_the_scan_ends(home: Path) -> None:
    """FIFOs where a ref, a pointer, a manifest or a model would be (a plain open would wait for a writer for
    good), a 10 GB sparse blob, a 100 MB manifest and symlink loops: each one row with its reason, never read."""
    from tests.ollama_store import MEDIA

    root = home / ".ollama" / "models"
    hexd = "ab" * 32
    with open(root / "blobs" / f"sha256-{hexd}", "wb") as fh:
        fh.write(b"GGUF")
        fh.truncate(10 << 30)
    write_manifest(root, manifest_path(root, "sparse"), [{"mediaType": MEDIA + "model", "digest": f"sha256:{hexd}",
                                                          "size": 10 << 30}])  # fmt: skip
    big = manifest_path(root, "big")
    big.parent.mkdir(parents=True)
    with open(big, "wb") as fh:
        fh.truncate(100 << 20)
    loop = manifest_path(root, "loop")
    loop.parent.mkdir(parents=True)
    loop.symlink_to(loop)
    fifo = manifest_path(root, "fifo")
    fifo.parent.mkdir(parents=True)
    os.mkfifo(fifo)
    os.mkfifo(home / ".lmstudio-home-pointer")  # LM Studio's pointer: read as absent, its default homes still looked at
    os.mkfifo(home / ".lmstudio" / "models" / "pub" / "Hermes-GGUF" / "fifo.gguf")
    (home / ".lmstudio" / "models" / "pub" / "Hermes-GGUF" / "loop.gguf").symlink_to("loop.gguf")
    repo = home / ".cache/huggingface/hub/models--org--Plain-GGUF"
    (repo / "refs" / "main").unlink()
    os.mkfifo(repo / "refs" / "main")
    (home / ".cache" / "llama.cpp").mkdir(parents=True)
    os.mkfifo(home / ".cache" / "llama.cpp" / "x.gguf")
    r = subprocess.run([sys.executable, "-m", "gguftpl", "scan", "--format", "json"], capture_output=True, text=True,
                       timeout=300, env=_env(home), cwd=home)  # fmt: skip
    assert r.returncode == 2, r.stderr
    doc = json.loads(r.stdout)
    problems = {p["ref"]: p["error"] for p in doc["problems"]}
    want = {
        "ollama://big:latest": "over the 4 MiB cap",
        "ollama://fifo:latest": "FIFO",
        "ollama://loop:latest": "symlink loop",
        "ollama://sparse:latest": "sparse",
        "lmstudio://pub/Hermes-GGUF/fifo.gguf": "not a file",
        "lmstudio://pub/Hermes-GGUF/loop.gguf": "symlink loop",
        "hf-cache://org/Plain-GGUF": "FIFO",
        str(home / ".cache" / "llama.cpp" / "x.gguf"): "not a regular file",
    }
    assert sorted(problems) == sorted(want)
    for ref, why in want.items():
        assert why in problems[ref], (ref, problems[ref])
    # the healthy models are still there, each once
    refs = [m["ref"] for m in doc["models"]]
    assert refs == ["ollama://hermes-test:latest", "ollama://plain:latest", "lmstudio://pub/Hermes-GGUF/hermes-Q4.gguf"]
    assert doc["bytes_hashed"] < 10 << 20  # the sparse 10 GB was never hashed


def test_a_split_gguf_is_one_model(tmp_path: Path) -> None:
    """gguf-split's shards (NAME-0000k-of-0000n.gguf) are one model, named by shard 1 that holds the metadata, in
    LM Studio's folder and under --path; a later shard without its first is still listed (nothing stands for it)."""
    home = tmp_path / "home"
    first = build_gguf(tmp_path / "first.gguf", templates={"default": CHATML})
    rest = build_gguf(tmp_path / "rest.gguf", templates={})
    for i, src in ((1, first), (2, rest), (3, rest)):
        lmstudio_model(home, f"pub/Big-GGUF/big-{i:05d}-of-00003.gguf", src)
    folder = tmp_path / "models"
    folder.mkdir()
    for i, src in ((1, first), (2, rest)):
        (folder / f"m-{i:05d}-of-00002.gguf").write_bytes(src.read_bytes())
    (folder / "lone-00002-of-00002.gguf").write_bytes(rest.read_bytes())
    r = run(home, "--path", str(folder), "--format", "json")
    assert r.returncode in (0, 1), r.stderr
    env = _env(home)
    cmd = [sys.executable, "-m", "gguftpl", "inspect", "--format", "json", "lmstudio://pub/Big-GGUF"]
    i = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=home)
    assert i.returncode == 0, i.stderr  # the folder's one model: the set, by its first shard
    assert json.loads(i.stdout)["files"][0]["path"] == "lmstudio://pub/Big-GGUF/big-00001-of-00003.gguf"
    assert [m["ref"] for m in json.loads(r.stdout)["models"]] == [
        "lmstudio://pub/Big-GGUF/big-00001-of-00003.gguf",
        str(folder / "lone-00002-of-00002.gguf"),
        str(folder / "m-00001-of-00002.gguf"),
    ]


def test_scan_path_llamacpp_cache_and_empty_home(tmp_path: Path, home: Path) -> None:
    folder = tmp_path / "models"
    folder.mkdir()
    build_gguf(folder / "x.gguf", templates={"default": CHATML})
    empty = tmp_path / "empty-home"
    cached = build_gguf(tmp_path / "y.gguf", templates={"default": CHATML})
    (empty / ".cache" / "llama.cpp").mkdir(parents=True)
    os.replace(cached, empty / ".cache" / "llama.cpp" / "org_Y-GGUF_y.gguf")  # llama.cpp's -hf file naming
    r = run(empty, "--path", str(folder), "--format", "json")
    assert r.returncode == 0, r.stderr
    models = json.loads(r.stdout)["models"]
    assert [(m["ref"], m["store"]) for m in models] == [
        (str(empty / ".cache" / "llama.cpp" / "org_Y-GGUF_y.gguf"), "llama.cpp"),
        (str(folder / "x.gguf"), "path"),
    ]


def test_scan_html_shows_the_models_matrix_their_fixes_and_what_the_scan_adds(home: Path, tmp_path: Path) -> None:
    from tests.browser import Dom, dump_dom, text
    from tests.test_html_report import matrix

    page = tmp_path / "scan.html"
    r = run(home, "--format", "html", "-o", str(page))
    assert r.returncode == 1, r.stderr
    assert r.stdout == "" and page.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    doc = json.loads(run(home, "--format", "json").stdout)
    dom = Dom.parse(dump_dom(page, tmp_path))
    head, rows = matrix(dom)
    assert list(rows) == [m["ref"] for m in doc["models"]]
    for m in doc["models"]:
        ids = list(m["runtimes"])
        assert len(ids) == len(head)
        expected = [
            m["runtimes"][i]
            if m["runtimes"][i] in ("injected", "refused", "fails")
            else {True: "yes", False: "no", None: "unknown"}[m["tools_reach_prompt"][i]]
            for i in ids
        ]
        assert rows[m["ref"]] == expected, m["ref"]
    assert rows["ollama://hermes-test:latest"][head.index("Ollama")] == "refused"
    footer = [text(p) for p in dom.find("footer").find_all("p")]
    assert "ollama://hermes-test:latest: also ollama://hermes-test:v1" in footer
    modelfile = "gguftpl patch ollama://hermes-test:latest --ollama-modelfile DIR"
    assert f"ollama://hermes-test:latest: fix: {modelfile}" in footer
    assert dom.find_all("article", cls="prompts")  # the prompt each runtime renders, side by side


def test_a_big_blob_is_hashed_under_a_bar_on_a_terminal(tmp_path: Path) -> None:
    """The first check of a blob of tens of GB takes minutes: on a terminal a bar says so (in a real pty)."""
    import hashlib
    import pty

    from tests.ollama_store import MEDIA

    home = tmp_path / "home"
    root = home / ".ollama" / "models"
    (root / "blobs").mkdir(parents=True)
    data = b"GGUF" + bytes(300 << 20)  # 300 MiB of written bytes (no holes), over the bar's threshold
    digest = hashlib.sha256(data).hexdigest()
    (root / "blobs" / f"sha256-{digest}").write_bytes(data)
    del data
    layer = {"mediaType": MEDIA + "model", "digest": f"sha256:{digest}", "size": (300 << 20) + 4}
    write_manifest(root, manifest_path(root, "big"), [layer])
    pid, fd = pty.fork()
    if pid == 0:  # child: stdout and stderr are the terminal, 120 columns wide (a new pty has none)
        import fcntl
        import struct
        import termios

        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))
        os.chdir(home)
        os.execve(sys.executable, [sys.executable, "-m", "gguftpl", "scan", "--store", "ollama"], _env(home))
    got = read_pty(fd)
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    out = got.decode("utf-8", "replace")
    assert "checking the blob's sha256 (once)" in out and "/300M" in out and "Ollama model blob sha256-" in out, out
    assert "ollama://big:latest" in out  # then the table
    assert os.waitstatus_to_exitcode(status) in (0, 1, 2)
