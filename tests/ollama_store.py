"""Model stores written the way each runtime writes them, for tests.

Ollama (``ollama/ollama`` @fb30760996871fa9460115c753afd2c60d4ab0f7): every layer a blob named ``sha256-<hex>`` of
its content under ``blobs/`` (``manifest/layer.go::NewLayer``: a temp file renamed to its digest), the config blob
JSON (``model.ConfigV2``), the manifest at ``manifests/<host>/<namespace>/<model>/<tag>``
(``manifest.WriteManifest``: schema 2, Docker's manifest media type). LM Studio: ``models/<publisher>/<repo>/<file>``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data" / "ollama_store"
CHATML_GO = (DATA / "chatml.gotmpl").read_text(encoding="utf-8")
CHATML_PARAMS = json.loads((DATA / "chatml.json").read_text(encoding="utf-8"))
MEDIA = "application/vnd.ollama.image."


def blob(root: Path, data: bytes | Path) -> tuple[str, int]:
    """Write one blob as NewLayer does; (digest ``sha256:<hex>``, size)."""
    blobs = root / "blobs"
    blobs.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha256()
    tmp = blobs / f"sha256-tmp{os.getpid()}"
    if isinstance(data, Path):
        with open(data, "rb") as src, open(tmp, "wb") as dst:
            while chunk := src.read(1 << 20):
                h.update(chunk)
                dst.write(chunk)
        size = data.stat().st_size
    else:
        h.update(data)
        tmp.write_bytes(data)
        size = len(data)
    final = blobs / f"sha256-{h.hexdigest()}"
    if final.exists():
        tmp.unlink()
    else:
        os.replace(tmp, final)
    return f"sha256:{h.hexdigest()}", size


def layer(root: Path, media: str, data: bytes | Path) -> dict[str, Any]:
    digest, size = blob(root, data)
    return {"mediaType": MEDIA + media, "digest": digest, "size": size}


def manifest_path(root: Path, name: str, tag: str = "latest", namespace: str = "library",
                  host: str = "registry.ollama.ai") -> Path:  # fmt: skip
    return root / "manifests" / host / namespace / name / tag


def write_manifest(root: Path, path: Path, layers: list[dict[str, Any]], config: dict[str, Any] | None = None) -> Path:
    cfg = config if config is not None else {
        "model_format": "gguf", "model_family": "llama", "model_families": ["llama"], "model_type": "tiny",
        "file_type": "F32", "architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": []},
    }  # fmt: skip
    digest, size = blob(root, json.dumps(cfg).encode())
    doc = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "config": {"mediaType": "application/vnd.docker.container.image.v1+json", "digest": digest, "size": size},
        "layers": layers,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc) + "\n", encoding="utf-8")
    return path


def ollama_model(root: Path, name: str, gguf: Path, *, tag: str = "latest", template: str | None = None,
                 system: str | None = None, params: dict[str, Any] | None = None,
                 config: dict[str, Any] | None = None, namespace: str = "library") -> Path:  # fmt: skip
    """One model as ``ollama create`` leaves it: the GGUF blob, then template, system and params layers."""
    layers = [layer(root, "model", gguf)]
    if template is not None:
        layers.append(layer(root, "template", template.encode()))
    if system is not None:
        layers.append(layer(root, "system", system.encode()))
    if params is not None:
        layers.append(layer(root, "params", json.dumps(params).encode()))
    return write_manifest(root, manifest_path(root, name, tag, namespace), layers, config)


def lmstudio_model(home: Path, rel: str, gguf: Path, *, old: bool = False) -> Path:
    """``<home>/.lmstudio/models/<publisher>/<repo>/<file>`` (``~/.cache/lm-studio`` with ``old``)."""
    base = home / (".cache/lm-studio" if old else ".lmstudio") / "models"
    dest = base / rel
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(gguf, dest)
    return dest


def read_modelfile(text: str) -> dict[str, Any]:
    """The commands of a Modelfile as Ollama's ``parser/parser.go`` reads the ones gguftpl writes: ``FROM``,
    ``TEMPLATE`` and ``SYSTEM`` (``\"\"\"`` quoted, several lines), ``PARAMETER name value`` (a quoted value unquoted;
    ``stop`` collected into a list, as ``ollama create`` stores it in the params layer)."""
    out: dict[str, Any] = {"params": {}}
    rest = text
    while rest:
        line, _, after = rest.partition("\n")
        word, _, value = line.partition(" ")
        if not line.strip() or line.startswith("#"):
            rest = after
            continue
        if value.startswith('"""'):
            body, _, rest = (value[3:] + "\n" + after).partition('"""')
            rest = rest.lstrip("\n")
            value = body
        else:
            rest = after
        key = word.upper()
        if key == "PARAMETER":
            name, _, v = value.partition(" ")
            v = v[1:-1] if len(v) >= 2 and v[0] == v[-1] == '"' else v
            if name == "stop":
                out["params"].setdefault("stop", []).append(v)
            else:
                out["params"][name] = v
        else:
            out[key.lower()] = value
    return out
