"""Model references wherever a GGUF path goes (inspect, audit, diff, render, verify, patch), through the real
command in a child process whose HOME holds the stores (tests/ollama_store.py writes them as the runtimes do)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CHATML, build_gguf
from tests.ollama_store import CHATML_GO, CHATML_PARAMS, lmstudio_model, manifest_path, ollama_model, write_manifest

HF_REF = "hf-cache://org/Tiny-GGUF/tiny-Q8_0.gguf"


@pytest.fixture
def home(tmp_path: Path, hub) -> Path:  # type: ignore[no-untyped-def]
    from huggingface_hub import hf_hub_download

    h = tmp_path / "home"
    h.mkdir()
    gguf = build_gguf(tmp_path / "src.gguf", templates={"default": CHATML})
    ollama_model(h / ".ollama" / "models", "hermes-test", gguf, template=CHATML_GO, params=CHATML_PARAMS)
    lmstudio_model(h, "pub/Tiny-GGUF/tiny.gguf", gguf)
    # over 640 KB: the local Hub gives it an LFS etag (its sha256), as the Hub does every GGUF, so the cache's
    # blob is named by its sha256 like an Ollama blob; made by huggingface_hub itself
    big = build_gguf(
        tmp_path / "big.gguf", templates={"default": CHATML}, extra_kv={"general.description": "x" * 700_000}
    )
    hub.add_file("org/Tiny-GGUF", "tiny-Q8_0.gguf", big)
    hf_hub_download("org/Tiny-GGUF", "tiny-Q8_0.gguf", endpoint=hub.url, cache_dir=h / ".cache/huggingface/hub")
    return h


def _hf_blob(home: Path) -> Path:
    (blob,) = (home / ".cache/huggingface/hub/models--org--Tiny-GGUF/blobs").iterdir()
    return blob


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(root.rglob("*")) if p.is_file()}


def run(home: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OLLAMA_MODELS", "HF_HUB_CACHE")}
    env.update(HOME=str(home), HF_HOME=str(home / ".cache" / "huggingface"))
    cmd = [sys.executable, "-m", "gguftpl", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=cwd or home)


def test_inspect_names_the_reference(home: Path) -> None:
    r = run(home, "inspect", "--format", "json", "ollama://hermes-test", "lmstudio://pub/Tiny-GGUF")
    assert r.returncode == 0, r.stderr
    files = json.loads(r.stdout)["files"]
    assert [f["path"] for f in files] == ["ollama://hermes-test:latest", "lmstudio://pub/Tiny-GGUF/tiny.gguf"]
    assert files[0]["store"]["ollama"]["template"] == CHATML_GO
    assert files[0]["templates"][0]["length"] == len(CHATML.encode())


def test_audit_findings_name_the_reference_not_the_blob(home: Path) -> None:
    r = run(home, "audit", "--format", "json", "--exit-zero", "ollama://hermes-test", "lmstudio://pub/Tiny-GGUF")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [f["path"] for f in doc["files"]] == ["ollama://hermes-test:latest", "lmstudio://pub/Tiny-GGUF/tiny.gguf"]
    assert "sha256-" not in r.stdout
    (ollama,) = [row for row in doc["files"][0]["runtimes"] if row["id"] == "ollama"]
    # ChatML without tools in the GGUF and a TEMPLATE without .Tools: both lose them, and the row says so (without
    # the Go engine, Ollama's side is unknown and so is the agreement)
    from gguftpl.engines import registry

    go = registry.availability("ollama").installed
    assert ollama["ollama"]["jinja_agrees_on_tools"] is (True if go else None)
    t = run(home, "audit", "--exit-zero", "ollama://hermes-test")
    said = "they agree about tools" if go else "agrees about tools is unknown"
    assert said in " ".join(t.stdout.split()), t.stdout


def test_render_and_diff_take_references(home: Path) -> None:
    r = run(home, "render", "--raw", "ollama://hermes-test")
    assert r.returncode == 0, r.stderr
    assert "<|im_start|>user" in r.stdout
    upstream = home / "upstream"
    upstream.mkdir()
    config = {"chat_template": CHATML, "bos_token": "<|im_start|>", "eos_token": "<|im_end|>"}
    (upstream / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    d = run(home, "diff", "--format", "json", "--no-behaviour", "lmstudio://pub/Tiny-GGUF", "--upstream", str(upstream))
    assert d.returncode in (0, 1), d.stderr
    assert json.loads(d.stdout)["templates"][0]["name"] == "default"


def test_verify_takes_a_reference(home: Path) -> None:
    pytest.importorskip("xllamacpp")
    r = run(home, "verify", "--format", "json", "ollama://hermes-test")
    assert r.returncode in (0, 1), r.stderr
    doc = json.loads(r.stdout)
    assert doc["path"] == "ollama://hermes-test:latest" and "sha256-" not in r.stdout
    (ollama,) = [row for row in doc["runtimes"] if row["id"] == "ollama"]
    assert ollama["template"] == "TEMPLATE layer (Go)" and ollama["outcome"] == "refused"


def test_patch_never_writes_into_a_store(home: Path, tmp_path: Path) -> None:
    new = tmp_path / "t.jinja"
    new.write_text(CHATML + "{# x #}", encoding="utf-8")
    r = run(home, "patch", "ollama://hermes-test", "--in-place", "--template", f"default={new}")
    assert r.returncode == 2 and "never patched in place" in r.stderr and len(r.stderr.splitlines()) == 1
    inside = home / ".ollama" / "models" / "fixed.gguf"
    r = run(home, "patch", "ollama://hermes-test", "-o", str(inside), "--template", f"default={new}")
    assert r.returncode == 2 and "inside ollama's store" in r.stderr and not inside.exists()
    out = tmp_path / "fixed.gguf"
    r = run(home, "patch", "ollama://hermes-test", "-o", str(out), "--template", f"default={new}", "--no-audit")
    assert r.returncode == 0, r.stderr
    assert out.exists() and f"--ollama-modelfile DIR --ollama-from {out}" in r.stdout
    copy = home / ".lmstudio" / "models" / "pub" / "Tiny-GGUF" / "tiny-fixed.gguf"
    r = run(home, "patch", "lmstudio://pub/Tiny-GGUF/tiny.gguf", "-o", str(copy), "--template", f"default={new}")
    assert r.returncode == 0, r.stderr
    assert "LM Studio lists the copy as lmstudio://pub/Tiny-GGUF/tiny-fixed.gguf" in r.stdout


@pytest.mark.parametrize("command", ["inspect", "audit", "render"])
def test_hostile_manifest_is_one_line_exit_2(home: Path, tmp_path: Path, command: str) -> None:
    root = home / ".ollama" / "models"
    secret = tmp_path / "secret"
    secret.write_bytes(b"GGUF" + b"\0" * 64)
    write_manifest(
        root,
        manifest_path(root, "evil"),
        [{"mediaType": "application/vnd.ollama.image.model", "digest": f"../../../{secret.name}", "size": 68}],
    )
    before = secret.stat().st_atime_ns
    r = run(home, command, "ollama://evil")
    assert r.returncode == 2, r.stdout
    assert len(r.stderr.splitlines()) == 1 and "not a sha256 digest" in r.stderr
    assert secret.stat().st_atime_ns == before


def test_blob_not_matching_its_name_is_one_line_exit_2(home: Path) -> None:
    blobs = home / ".ollama" / "models" / "blobs"
    model = max(blobs.iterdir(), key=lambda p: p.stat().st_size)  # the GGUF, the largest blob
    data = bytearray(model.read_bytes())
    data[len(data) // 2] ^= 0xFF
    model.write_bytes(bytes(data))
    r = run(home, "audit", "ollama://hermes-test")
    assert r.returncode == 2 and r.stdout == ""
    assert len(r.stderr.splitlines()) == 1 and "does not match its name" in r.stderr


def test_every_command_takes_an_hf_cache_reference(home: Path, tmp_path: Path) -> None:
    blob = _hf_blob(home).name
    assert len(blob) == 64  # named by its sha256: checked like an Ollama blob
    r = run(home, "inspect", "--format", "json", "hf-cache://org/Tiny-GGUF")
    assert r.returncode == 0, r.stderr
    (f,) = json.loads(r.stdout)["files"]
    assert f["path"] == HF_REF and f["store"]["upstream_repo"] == "org/Tiny-GGUF"
    r = run(home, "audit", "--format", "json", "--exit-zero", "hf-cache://org/Tiny-GGUF@main/tiny-Q8_0.gguf")
    assert r.returncode == 0, r.stderr
    assert [f["path"] for f in json.loads(r.stdout)["files"]] == [HF_REF] and blob not in r.stdout
    r = run(home, "render", "--raw", HF_REF)
    assert r.returncode == 0 and "<|im_start|>user" in r.stdout, r.stderr
    upstream = home / "upstream"
    upstream.mkdir()
    config = {"chat_template": CHATML, "bos_token": "<|im_start|>", "eos_token": "<|im_end|>"}
    (upstream / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    d = run(home, "diff", "--format", "json", "--no-behaviour", HF_REF, "--upstream", str(upstream))
    assert d.returncode in (0, 1), d.stderr
    assert json.loads(d.stdout)["templates"][0]["name"] == "default"
    if importlib.util.find_spec("xllamacpp") is not None:
        v = run(home, "verify", "--format", "json", HF_REF)
        assert v.returncode in (0, 1), v.stderr
        assert json.loads(v.stdout)["path"] == HF_REF and blob not in v.stdout
    new = tmp_path / "t.jinja"
    new.write_text(CHATML + "{# x #}", encoding="utf-8")
    cache = home / ".cache" / "huggingface" / "hub"
    before = _tree(cache)
    inside = cache / "fixed.gguf"
    r = run(home, "patch", HF_REF, "-o", str(inside), "--template", f"default={new}")
    assert r.returncode == 2 and "inside hf-cache's store" in r.stderr and not inside.exists()
    out = tmp_path / "fixed.gguf"
    r = run(home, "patch", HF_REF, "-o", str(out), "--template", f"default={new}", "--no-audit")
    assert r.returncode == 0, r.stderr
    assert f"plan for {HF_REF}:" in r.stdout and blob not in r.stdout
    assert f"the cached {HF_REF} is unchanged; point the runtime at {out}" in r.stdout
    assert _tree(cache) == before


@pytest.mark.parametrize("ref", ["ollama://hermes-test", "hf-cache://org/Tiny-GGUF", "lmstudio://pub/Tiny-GGUF"])
def test_patch_from_a_reference_without_an_output_is_refused_naming_it(home: Path, tmp_path: Path, ref: str) -> None:
    new = tmp_path / "t.jinja"
    new.write_text(CHATML + "{# x #}", encoding="utf-8")
    before = _tree(home)
    r = run(home, "patch", ref, "--template", f"default={new}")
    assert r.returncode == 2 and r.stdout == ""
    (line,) = r.stderr.splitlines()
    assert ref in line and "-o OUT.gguf" in line and "--in-place" not in line, line
    assert _tree(home) == before  # nothing written anywhere in the stores


def test_patch_from_ollama_names_the_reference_not_the_blob(home: Path, tmp_path: Path) -> None:
    new = tmp_path / "t.jinja"
    new.write_text(CHATML + "{# x #}", encoding="utf-8")
    out = tmp_path / "fixed.gguf"
    r = run(home, "patch", "ollama://hermes-test", "-o", str(out), "--template", f"default={new}")
    assert r.returncode == 0, r.stderr
    assert "plan for ollama://hermes-test:latest:" in r.stdout and "sha256-" not in r.stdout


def _hostile_home(home: Path, tmp_path: Path, shape: str) -> tuple[str, Path]:
    """A store that reaches for ``secret`` (a real GGUF outside every store) in one way; (reference, secret)."""
    from tests.ollama_store import MEDIA, blob, layer

    root = home / ".ollama" / "models"
    secret_dir = tmp_path / "outside"
    secret_dir = tmp_path / "outside"
    secret_dir.mkdir()
    secret = build_gguf(secret_dir / "secret.gguf", templates={"default": CHATML})
    digest, size = blob(tmp_path / "scratch", secret)  # the secret's real digest: read, it would even match
    hexd = digest.split(":")[1]
    model = {"mediaType": MEDIA + "model", "digest": digest, "size": size}
    if shape == "traversal":
        write_manifest(root, manifest_path(root, "evil"), [{**model, "digest": "../../../../outside/secret.gguf"}])
    elif shape == "blob-symlink":
        (root / "blobs" / f"sha256-{hexd}").symlink_to(secret)
        write_manifest(root, manifest_path(root, "evil"), [model])
    elif shape == "layer-symlink":
        tmpl = layer(tmp_path / "scratch", "template", secret.read_bytes()[:64])
        (root / "blobs" / tmpl["digest"].replace(":", "-")).symlink_to(secret)
        write_manifest(root, manifest_path(root, "evil"), [layer(root, "model", secret), tmpl])
    elif shape == "manifest-symlink":
        path = manifest_path(root, "evil")
        path.parent.mkdir(parents=True)
        path.symlink_to(secret)
    elif shape == "digest-mismatch":
        (root / "blobs" / f"sha256-{hexd}").write_bytes(secret.read_bytes()[:-1] + b"!")
        write_manifest(root, manifest_path(root, "evil"), [model])
    else:  # an HF cache snapshot file that points out of its repo's folder
        snap = home / ".cache/huggingface/hub/models--org--Tiny-GGUF/snapshots"
        (commit,) = snap.iterdir()
        (commit / "evil.gguf").symlink_to(secret)
        return "hf-cache://org/Tiny-GGUF/evil.gguf", secret
    return "ollama://evil", secret


@pytest.mark.parametrize(
    "shape", ["traversal", "blob-symlink", "layer-symlink", "manifest-symlink", "digest-mismatch", "hf-snapshot"]
)
def test_a_hostile_store_is_one_line_exit_2_and_nothing_outside_is_opened(
    home: Path, tmp_path: Path, shape: str
) -> None:
    from tests.strace import strace

    ref, secret = _hostile_home(home, tmp_path, shape)
    env = {k: v for k, v in os.environ.items() if k not in ("OLLAMA_MODELS", "HF_HUB_CACHE")}
    env.update(HOME=str(home), HF_HOME=str(home / ".cache" / "huggingface"))
    for command in ("audit", "inspect"):
        t = strace([sys.executable, "-m", "gguftpl", command, ref], tmp_path / f"{command}.st", env=env, cwd=home,
                   timeout=600)  # fmt: skip
        assert t.result.returncode == 2 and t.result.stdout == "", (command, t.result.stdout)
        assert len(t.result.stderr.splitlines()) == 1, t.result.stderr
        outside = [p for p in t.opened if p.startswith(str(secret.parent))]
        assert outside == [], (command, outside)
        assert t.opened, "the trace saw no open at all"


def test_the_hf_cache_folder_is_the_upstream_when_the_file_names_none(home: Path) -> None:
    r = run(home, "audit", "--format", "json", "--exit-zero", HF_REF, "lmstudio://pub/Tiny-GGUF")
    assert r.returncode == 0, r.stderr
    cached, lm = json.loads(r.stdout)["files"]
    # the GGUF has no general.base_model/source keys; the cache folder models--org--Tiny-GGUF says where it came from
    assert cached["upstream"]["repo"] == "org/Tiny-GGUF"
    how = cached["upstream"]["how"]
    assert how.startswith("from the Hugging Face cache folder it was downloaded into (a GGUF repo"), how
    assert lm["upstream"]["repo"] is None  # the same GGUF from LM Studio: nothing says where it came from


def test_render_with_ollamas_engine_follows_the_models_manifest(home: Path, tmp_path: Path) -> None:
    from gguftpl.engines import registry

    if not registry.availability("ollama").installed:
        pytest.skip("Ollama's Go engine is not built: gguftpl engines install ollama")
    root = home / ".ollama" / "models"
    gguf = build_gguf(tmp_path / "chatml.gguf", templates={"default": CHATML})
    # a TEMPLATE of the user's own that renders the tools, where an import would get the curated chatml (no .Tools)
    own = "{{ if .Tools }}TOOLS {{ range .Tools }}{{ json . }}{{ end }}\n{{ end }}" + CHATML_GO
    ollama_model(root, "mine", gguf, template=own)
    ollama_model(root, "native", gguf)
    r = run(home, "render", "--engine", "ollama", "ollama://mine")
    assert r.returncode == 0, r.stderr
    assert "--- engine: ollama; template: TEMPLATE layer (Go)" in r.stdout and "| TOOLS {" in r.stdout
    assert "NOT in the prompt" not in r.stdout and "curated" not in r.stdout
    r = run(home, "render", "--engine", "ollama", "ollama://native")
    assert r.returncode == 2 and r.stdout == ""
    (line,) = r.stderr.splitlines()
    assert "no TEMPLATE layer" in line and "--engine llamacpp" in line
