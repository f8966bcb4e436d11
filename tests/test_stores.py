"""Model references resolved in real store layouts (tests/ollama_store.py writes them as each runtime does), and
hostile stores refused with one line, nothing outside the store read."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gguftpl.errors import StoreError
from gguftpl.stores import is_ref, parse_ref, resolve
from tests.conftest import CHATML, build_gguf
from tests.ollama_store import CHATML_GO, CHATML_PARAMS, blob, layer, manifest_path, ollama_model, write_manifest


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    monkeypatch.setenv("HOME", str(h))
    for var in ("OLLAMA_MODELS", "HF_HUB_CACHE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HOME", str(h / ".cache" / "huggingface"))
    return h


@pytest.fixture
def gguf(tmp_path: Path) -> Path:
    return build_gguf(tmp_path / "src.gguf", templates={"default": CHATML})


def test_parse_refs() -> None:
    assert is_ref("ollama://hermes") and is_ref("HF-CACHE://a/b") and not is_ref("/tmp/ollama://x")
    assert not is_ref("hf://org/repo/f.gguf") and not is_ref("model.gguf")
    assert parse_ref("lmstudio://pub/repo/f.gguf").name == "pub/repo/f.gguf"
    for bad in ("ollama://", "ollama://../x", "lmstudio://pub//f", "hf-cache://a/b/../../c", "ollama://a\\b"):
        with pytest.raises(StoreError):
            parse_ref(bad)


def test_ollama_model_resolves_to_its_blob_and_layers(home: Path, gguf: Path) -> None:
    root = home / ".ollama" / "models"
    ollama_model(root, "hermes-test", gguf, template=CHATML_GO, system="Be brief.", params=CHATML_PARAMS)
    m = resolve("ollama://hermes-test")
    assert m.ref == "ollama://hermes-test:latest" and m.store == "ollama"
    assert Path(m.path).parent == (root / "blobs").resolve() and Path(m.path).name.startswith("sha256-")
    assert Path(m.path).read_bytes() == gguf.read_bytes()
    assert m.ollama is not None and m.ollama.template == CHATML_GO and m.ollama.system == "Be brief."
    assert m.ollama.stops == ("<|im_start|>", "<|im_end|>")
    assert resolve("ollama://registry.ollama.ai/library/hermes-test:latest").path == m.path


def test_ollama_models_env_and_namespaces(
    home: Path, gguf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "elsewhere"
    monkeypatch.setenv("OLLAMA_MODELS", f' "{root}" ')  # Ollama's Var trims spaces and quotes
    ollama_model(root, "qwen", gguf, tag="q4", namespace="someone")
    assert resolve("ollama://someone/qwen:q4").ref == "ollama://someone/qwen:q4"
    with pytest.raises(StoreError, match="no such model"):
        resolve("ollama://qwen:q4")


def test_a_blob_shared_by_two_tags_is_one_file(home: Path, gguf: Path) -> None:
    root = home / ".ollama" / "models"
    ollama_model(root, "m", gguf, tag="a")
    ollama_model(root, "m", gguf, tag="b", template=CHATML_GO)
    a, b = resolve("ollama://m:a"), resolve("ollama://m:b")
    assert a.path == b.path and a.identity == b.identity and a.ref != b.ref
    assert len(list((root / "blobs").iterdir())) == 3  # one GGUF blob for both, the template, one config


def _hostile(root: Path, layers: list[dict], name: str = "bad") -> None:
    write_manifest(root, manifest_path(root, name), layers)


def test_manifest_naming_a_blob_outside_the_store(home: Path, gguf: Path, tmp_path: Path) -> None:
    root = home / ".ollama" / "models"
    secret = tmp_path / "secret.gguf"
    secret.write_bytes(gguf.read_bytes())
    _hostile(root, [{"mediaType": "application/vnd.ollama.image.model", "digest": "../../../secret.gguf", "size": 1}])
    with pytest.raises(StoreError, match="not a sha256 digest"):
        resolve("ollama://bad")
    # a blob name that is right but a symlink out of the store
    digest, size = blob(tmp_path / "other", gguf)
    hexd = digest.split(":")[1]
    (root / "blobs").mkdir(parents=True, exist_ok=True)
    os.symlink(tmp_path / "other" / "blobs" / f"sha256-{hexd}", root / "blobs" / f"sha256-{hexd}")
    atime = os.stat(tmp_path / "other" / "blobs" / f"sha256-{hexd}").st_atime_ns
    _hostile(root, [{"mediaType": "application/vnd.ollama.image.model", "digest": digest, "size": size}], "out")
    with pytest.raises(StoreError, match="points outside the store"):
        resolve("ollama://out")
    assert os.stat(tmp_path / "other" / "blobs" / f"sha256-{hexd}").st_atime_ns == atime


def test_digest_that_does_not_match_its_blob(home: Path, gguf: Path) -> None:
    root = home / ".ollama" / "models"
    ollama_model(root, "m", gguf)
    m = resolve("ollama://m")
    data = bytearray(Path(m.path).read_bytes())
    data[-1] ^= 1
    Path(m.path).write_bytes(bytes(data))  # same size, another content
    with pytest.raises(StoreError, match="does not match its name"):
        resolve("ollama://m")


def test_symlink_loop_and_huge_manifest(home: Path, gguf: Path) -> None:
    root = home / ".ollama" / "models"
    path = manifest_path(root, "loop")
    path.parent.mkdir(parents=True)
    os.symlink(path, path)
    with pytest.raises(StoreError, match="symlink loop"):
        resolve("ollama://loop")
    big = manifest_path(root, "big")
    big.parent.mkdir(parents=True)
    with open(big, "wb") as fh:
        fh.truncate(100 << 20)  # 100 MB, never read
    with pytest.raises(StoreError, match="over the 4 MiB cap"):
        resolve("ollama://big")


def test_sparse_blob_is_refused_without_hashing_it(home: Path) -> None:
    root = home / ".ollama" / "models"
    hexd = "ab" * 32
    (root / "blobs").mkdir(parents=True)
    with open(root / "blobs" / f"sha256-{hexd}", "wb") as fh:
        fh.write(b"GGUF")
        fh.truncate(10 << 30)  # 10 GB of holes
    _hostile(root, [{"mediaType": "application/vnd.ollama.image.model", "digest": f"sha256:{hexd}", "size": 10 << 30}])
    with pytest.raises(StoreError, match="sparse"):
        resolve("ollama://bad")


def test_small_layer_with_a_wrong_digest(home: Path, gguf: Path) -> None:
    root = home / ".ollama" / "models"
    model = layer(root, "model", gguf)
    tmpl = layer(root, "template", CHATML_GO.encode())
    (root / "blobs" / tmpl["digest"].replace(":", "-")).write_text("{{ .Tools }}")
    _hostile(root, [model, tmpl])
    with pytest.raises(StoreError, match="does not match its name"):
        resolve("ollama://bad")


def test_lmstudio_folder_new_and_old(home: Path, gguf: Path) -> None:
    from tests.ollama_store import lmstudio_model

    lmstudio_model(home, "lmstudio-community/Tiny-GGUF/tiny-Q4.gguf", gguf)
    lmstudio_model(home, "old/Thing-GGUF/thing.gguf", gguf, old=True)
    m = resolve("lmstudio://lmstudio-community/Tiny-GGUF")
    assert m.ref == "lmstudio://lmstudio-community/Tiny-GGUF/tiny-Q4.gguf" and m.store == "lmstudio"
    assert resolve("lmstudio://old/Thing-GGUF/thing.gguf").size == gguf.stat().st_size
    (home / ".lmstudio-home-pointer").write_text(str(home / ".lmstudio") + "\n")
    with pytest.raises(StoreError, match="no such model"):
        resolve("lmstudio://nobody/None")


def test_hf_cache_made_by_huggingface_hub(home: Path, tmp_path: Path, hub) -> None:  # type: ignore[no-untyped-def]
    from huggingface_hub import hf_hub_download

    # over 640 KB: the local Hub gives it an LFS etag (its sha256), as the Hub does for every GGUF
    big = build_gguf(
        tmp_path / "big.gguf", templates={"default": CHATML}, extra_kv={"general.description": "x" * 700_000}
    )
    hub.add_file("org/Tiny-GGUF", "tiny-Q8_0.gguf", big)
    from gguftpl.hubenv import cache_dir

    # the cache folder of this environment (huggingface_hub fixes its own default when first imported, which in
    # a long test process was under another HOME)
    cached = hf_hub_download("org/Tiny-GGUF", "tiny-Q8_0.gguf", endpoint=hub.url, cache_dir=cache_dir())
    m = resolve("hf-cache://org/Tiny-GGUF")
    assert m.ref == "hf-cache://org/Tiny-GGUF/tiny-Q8_0.gguf" and m.upstream_repo == "org/Tiny-GGUF"
    assert m.path == os.path.realpath(cached) and len(Path(m.path).name) == 64
    assert resolve(f"hf-cache://org/Tiny-GGUF@{m.revision}/tiny-Q8_0.gguf").path == m.path
    Path(m.path).chmod(0o644)
    with open(m.path, "r+b") as fh:
        fh.seek(100)
        fh.write(b"!")
    with pytest.raises(StoreError, match="does not match its name"):
        resolve("hf-cache://org/Tiny-GGUF")
    with pytest.raises(StoreError, match="not in the Hugging Face cache"):
        resolve("hf-cache://org/Other")


def test_verified_digest_is_remembered(home: Path, gguf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gguftpl.stores import safety

    root = home / ".ollama" / "models"
    ollama_model(root, "m", gguf)
    resolve("ollama://m")
    calls = []
    real = safety.sha256_of
    monkeypatch.setattr(safety, "sha256_of", lambda fh, progress=None: calls.append(1) or real(fh))
    resolve("ollama://m")
    assert calls == []
    os.utime(resolve("ollama://m").path)  # touched: hashed again
    resolve("ollama://m")
    assert calls == [1]
    assert json.loads(json.dumps(resolve("ollama://m").to_dict()))["store"] == "ollama"


@pytest.fixture
def service_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """A real system user standing for the ``ollama`` one Ollama's Linux installer creates (``useradd -r -d
    HOME``), under a name of its own (``GGUFTPL_OLLAMA_USER``) so that no other test ever sees its store."""
    import shutil
    import subprocess

    if os.geteuid() != 0 or shutil.which("useradd") is None:
        pytest.skip("needs root and useradd to create the service user")
    name = f"gtsvc{os.getpid() % 100000}"
    home = tmp_path / "service-home"
    subprocess.run(["useradd", "-r", "-s", "/bin/false", "-M", "-d", str(home), name], check=True)
    try:
        monkeypatch.setenv("GGUFTPL_OLLAMA_USER", name)
        yield home
    finally:
        subprocess.run(["userdel", name], check=False)


def test_the_linux_service_store_is_looked_in_after_the_users_own(
    home: Path, gguf: Path, service_user: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gguftpl.stores.discover import discover

    ollama_model(home / ".ollama" / "models", "mine", gguf)
    service = service_user / ".ollama" / "models"
    ollama_model(service, "pulled", gguf, template=CHATML_GO)
    m = resolve("ollama://pulled")
    assert m.root == str(service) and m.ref == "ollama://pulled:latest" and m.ollama.template == CHATML_GO
    assert resolve("ollama://mine").root == str(home / ".ollama" / "models")
    found = discover(["ollama"])
    assert [(f.ref, f.root) for f in found] == [
        ("ollama://mine:latest", str(home / ".ollama" / "models")),
        ("ollama://pulled:latest", str(service)),
    ]
    with pytest.raises(StoreError, match="no such model in the Ollama stores"):
        resolve("ollama://nowhere")
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "gguftpl", "scan", "--store", "ollama", "--format", "json"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=dict(os.environ), cwd=home)
    assert r.returncode in (0, 1), r.stderr  # the command finds it as the library does
    assert [m["ref"] for m in json.loads(r.stdout)["models"]] == ["ollama://mine:latest", "ollama://pulled:latest"]
    monkeypatch.setenv("OLLAMA_MODELS", str(home / ".ollama" / "models"))  # the user named the store: that one only
    assert [f.ref for f in discover(["ollama"])] == ["ollama://mine:latest"]
    with pytest.raises(StoreError, match="no such model in the Ollama store "):
        resolve("ollama://pulled")
