"""Ollama's model store, read as Ollama reads it (``ollama/ollama`` @fb30760996871fa9460115c753afd2c60d4ab0f7,
v0.33.0-rc2):

- The store is ``$OLLAMA_MODELS``, else ``$HOME/.ollama/models`` (``envconfig/config.go::Models``; ``Var`` trims
  spaces and quotes from the variable).
- On Linux, Ollama's installer runs the server as a system user ``ollama`` whose home it creates
  (``scripts/install.sh`` @3fa8daaecfb55b86a40506aefc3190753020bf62: ``useradd -r -s /bin/false -U -m -d
  /usr/share/ollama ollama``, a systemd unit with ``User=ollama``, and the installing user added to the ``ollama``
  group): the models ``ollama pull`` fetches through that server are in *its* ``$HOME/.ollama/models``. Without
  ``OLLAMA_MODELS``, that store (the home the user database gives ``ollama``) is looked in after the user's own.
- A name is ``[host/][namespace/]model[:tag]``, the tag cut at the last ``:`` after the last ``/``, missing parts
  defaulted to ``registry.ollama.ai``, ``library`` and ``latest`` (``types/model/name.go::ParseName``,
  ``ParseNameBare``, ``DefaultName``); each part is checked as ``isValidPart`` does (host up to 350 characters,
  the others up to 80; letters, digits, ``_``, ``-``, ``.`` except in a namespace, ``:`` only in a host).
- Its manifest is ``manifests/<host>/<namespace>/<model>/<tag>`` (``manifest/paths.go::PathForName``,
  ``Name.Filepath``), a JSON document with ``config`` and ``layers`` of ``{mediaType, digest, size}``
  (``manifest/manifest.go::Manifest``, ``manifest/layer.go::Layer``); a scan globs ``manifests/*/*/*/*``
  (``manifest.Manifests``).
- A digest names the blob ``blobs/sha256-<hex>``; only ``^sha256[:-][0-9a-fA-F]{64}$`` is accepted
  (``manifest/paths.go::BlobsPath``).
- ``server/images.go::GetModel`` reads the layers by media type, a later layer of a type replacing an earlier
  one: ``application/vnd.ollama.image.model`` (the GGUF), ``.template`` or the legacy ``.prompt`` (the Go
  TEMPLATE), ``.system``, ``.params`` (JSON options: ``stop``, ``temperature``, …), and the config blob (JSON:
  ``renderer``, ``parser``, ``capabilities``, …).

Unlike Ollama, nothing is trusted: the manifest is capped (:data:`~gguftpl.stores.safety.MAX_MANIFEST_BYTES`),
every blob must resolve inside ``blobs/``, the small layers are checked against their digests in memory and the
weights by :func:`gguftpl.stores.safety.check_blob`.
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
from dataclasses import dataclass
from typing import Any

from gguftpl.errors import StoreError
from gguftpl.safeio import printable
from gguftpl.stores.model import OllamaLayers, StoreModel
from gguftpl.stores.safety import MAX_MANIFEST_BYTES, check_blob, read_small

__all__ = [
    "MEDIA",
    "SERVICE_USER",
    "Name",
    "display",
    "find",
    "list_names",
    "load",
    "models_dir",
    "models_dirs",
    "parse_name",
    "service_models_dir",
]

DEFAULT_HOST, DEFAULT_NAMESPACE, DEFAULT_TAG = "registry.ollama.ai", "library", "latest"
_MEDIA = "application/vnd.ollama.image."
MEDIA = {
    "model": _MEDIA + "model",
    "template": _MEDIA + "template",
    "prompt": _MEDIA + "prompt",
    "system": _MEDIA + "system",
    "params": _MEDIA + "params",
}
"""The layer media types read (``server/images.go::GetModel``)."""
_DIGEST = re.compile(r"^sha256[:-]([0-9a-fA-F]{64})$")
_LIMITS = {"host": 350, "namespace": 80, "model": 80, "tag": 80}


@dataclass(frozen=True)
class Name:
    host: str
    namespace: str
    model: str
    tag: str

    @property
    def parts(self) -> tuple[str, str, str, str]:
        return (self.host, self.namespace, self.model, self.tag)


SERVICE_USER = "ollama"
"""The system user Ollama's Linux installer runs the server as (``scripts/install.sh``); ``GGUFTPL_OLLAMA_USER``
names another (a server set up by hand), empty for none."""


def models_dir() -> str:
    """``envconfig.Models()``: ``$OLLAMA_MODELS`` (trimmed of spaces and quotes), else ``$HOME/.ollama/models``."""
    own = os.environ.get("OLLAMA_MODELS", "").strip().strip("\"'")
    return own or os.path.join(os.path.expanduser("~"), ".ollama", "models")


def service_models_dir() -> str | None:
    """The store of the server the Linux installer set up: ``~ollama/.ollama/models``; None without that user."""
    user = os.environ.get("GGUFTPL_OLLAMA_USER", SERVICE_USER)
    if not user:
        return None
    try:
        import pwd

        home = pwd.getpwnam(user).pw_dir
    except (ImportError, KeyError):
        return None
    return os.path.join(home, ".ollama", "models") if home else None


def models_dirs() -> list[str]:
    """The stores to look in, in order: ``$OLLAMA_MODELS`` alone when set, else the user's own store, then the
    service's (when there is one and it is another folder)."""
    first = models_dir()
    if os.environ.get("OLLAMA_MODELS", "").strip().strip("\"'"):
        return [first]
    service = service_models_dir()
    return [first] if service is None or os.path.abspath(service) == os.path.abspath(first) else [first, service]


def find(name: Name) -> StoreModel:
    """The model ``name`` from the first store of :func:`models_dirs` that has its manifest (the first store's
    one-line error when none has)."""
    dirs = models_dirs()
    for root in dirs:
        if os.path.lexists(os.path.join(root, "manifests", *name.parts)):
            return load(root, name)
    if len(dirs) > 1:
        raise StoreError(
            f"ollama://{display(name)}: no such model in the Ollama stores {', '.join(printable(d) for d in dirs)}"
        )
    return load(dirs[0], name)


def _valid(kind: str, s: str) -> bool:
    if not 1 <= len(s) <= _LIMITS[kind] or not (s[0].isascii() and (s[0].isalnum() or s[0] == "_")):
        return False
    for c in s[1:]:
        if c in "_-" or (c.isascii() and c.isalnum()):
            continue
        if c == "." and kind != "namespace":
            continue
        if c == ":" and kind == "host":
            continue
        return False
    return True


def parse_name(text: str) -> Name:
    """``ParseName``: ``[host/][namespace/]model[:tag]`` with Ollama's defaults; :class:`StoreError` when a part
    is not one Ollama accepts (so no name reaches outside ``manifests/``)."""
    s, tag = text, ""
    if s.rfind(":") > s.rfind("/"):
        s, _, tag = s.rpartition(":")
    parts = s.split("/")
    if len(parts) > 3:
        raise StoreError(f"ollama://{printable(text)}: an Ollama name is [host/][namespace/]model[:tag]")
    model = parts[-1]
    namespace = parts[-2] if len(parts) >= 2 else DEFAULT_NAMESPACE
    host = parts[-3] if len(parts) == 3 else DEFAULT_HOST
    if "://" in host:
        host = host.split("://", 1)[1]
    name = Name(host, namespace, model, tag or DEFAULT_TAG)
    for kind, part in zip(("host", "namespace", "model", "tag"), name.parts, strict=True):
        if not _valid(kind, part):
            raise StoreError(f"ollama://{printable(text)}: {printable(part)!r} is not a valid Ollama {kind}")
    return name


def display(name: Name) -> str:
    """``Name.DisplayShortest``: the host and namespace only when they are not the defaults."""
    if name.host.lower() != DEFAULT_HOST:
        head = f"{name.host}/{name.namespace}/"
    elif name.namespace.lower() != DEFAULT_NAMESPACE:
        head = f"{name.namespace}/"
    else:
        head = ""
    return f"{head}{name.model}:{name.tag}"


def list_names(root: str | None = None) -> list[Name]:
    """Every manifest of the store (``manifest.Manifests``' glob), sorted; names Ollama would reject are left out."""
    root = root or models_dir()
    base = os.path.join(root, "manifests")
    out = []
    for match in sorted(glob.glob(os.path.join(glob.escape(base), "*", "*", "*", "*"))):
        parts = os.path.relpath(match, base).split(os.sep)
        if os.path.isdir(match) or len(parts) != 4:
            continue
        try:
            out.append(parse_name(f"{parts[0]}/{parts[1]}/{parts[2]}:{parts[3]}"))
        except StoreError:
            continue
    return out


def _digest(layer: Any, manifest: str) -> str:
    digest = layer.get("digest") if isinstance(layer, dict) else None
    m = _DIGEST.match(digest) if isinstance(digest, str) else None
    if m is None:
        raise StoreError(
            f"Ollama manifest {printable(manifest)} names a blob that is not a sha256 digest "
            f"({printable(str(digest))[:80]!r}): refusing to read outside blobs/"
        )
    return m.group(1).lower()


def _small(root: str, layer: dict[str, Any], manifest: str, what: str) -> bytes:
    hexd = _digest(layer, manifest)
    blobs = os.path.join(root, "blobs")
    data = read_small(os.path.join(blobs, f"sha256-{hexd}"), blobs, f"Ollama {what} blob")
    if hashlib.sha256(data).hexdigest() != hexd:
        raise StoreError(f"Ollama {what} blob sha256-{hexd[:12]}… does not match its name (manifest {manifest})")
    return data


def _json(data: bytes, what: str) -> dict[str, Any]:
    from gguftpl.safeio import loads_json

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise StoreError(f"{what} is not UTF-8") from None
    value = loads_json(text, what=what, error=StoreError)
    if not isinstance(value, dict):
        raise StoreError(f"{what} is not a JSON object")
    return value


def _manifest(root: str, name: Name) -> tuple[str, dict[str, Any]]:
    base = os.path.join(root, "manifests")
    path = os.path.join(base, *name.parts)
    if not os.path.lexists(path):
        raise StoreError(f"ollama://{display(name)}: no such model in the Ollama store {printable(root)} (no {path})")
    doc = _json(read_small(path, base, "Ollama manifest", MAX_MANIFEST_BYTES), f"Ollama manifest {path}")
    layers = doc.get("layers")
    if not isinstance(layers, list) or not all(isinstance(x, dict) for x in layers):
        raise StoreError(f"Ollama manifest {path} has no list of layers")
    return path, doc


def load(root: str | None, name: Name) -> StoreModel:
    """The model ``name`` of the store at ``root`` (None: :func:`models_dir`), its layers read and checked."""
    root = root or models_dir()
    path, doc = _manifest(root, name)
    found: dict[str, dict[str, Any]] = {}
    for layer in doc["layers"]:
        for key, media in MEDIA.items():
            if layer.get("mediaType") == media:
                found["template" if key == "prompt" else key] = layer  # a later layer replaces an earlier one
    model = found.get("model")
    if model is None:
        raise StoreError(f"ollama://{display(name)}: the manifest has no GGUF model layer ({MEDIA['model']})")
    texts = {
        k: _small(root, found[k], path, k).decode("utf-8", "replace") for k in ("template", "system") if k in found
    }
    params = _json(_small(root, found["params"], path, "params"), f"params of {path}") if "params" in found else {}
    config_layer = doc.get("config")
    config: dict[str, Any] = {}
    if isinstance(config_layer, dict) and config_layer.get("digest"):
        config = _json(_small(root, config_layer, path, "config"), f"config of {path}")
    hexd = _digest(model, path)
    size = model.get("size")
    blobs = os.path.join(root, "blobs")
    real, st = check_blob(
        os.path.join(blobs, f"sha256-{hexd}"), blobs, hexd, size if isinstance(size, int) else None, "Ollama model blob"
    )
    layers = OllamaLayers(
        manifest=path,
        template=texts.get("template"),
        system=texts.get("system"),
        params=params,
        config=config,
        model_digest=f"sha256:{hexd}",
    )
    return StoreModel(
        ref=f"ollama://{display(name)}",
        store="ollama",
        path=real,
        size=st.st_size,
        root=root,
        identity=(st.st_dev, st.st_ino),
        ollama=layers,
    )
