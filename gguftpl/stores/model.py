"""What resolving a model reference gives: the local GGUF, where it lives, and what its store says about it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["OllamaLayers", "StoreModel"]


@dataclass(frozen=True)
class OllamaLayers:
    """The layers of an Ollama manifest other than the weights (``server/images.go::GetModel`` reads the same)."""

    manifest: str
    """The manifest file (``manifests/<host>/<namespace>/<model>/<tag>``)."""
    template: str | None = None
    """The Go ``TEMPLATE`` (``application/vnd.ollama.image.template``, or the legacy ``.prompt``)."""
    system: str | None = None
    """The ``SYSTEM`` message (``application/vnd.ollama.image.system``)."""
    params: dict[str, Any] = field(default_factory=dict)
    """The ``PARAMETER`` values (``application/vnd.ollama.image.params``, JSON): ``stop``, ``temperature``, …"""
    config: dict[str, Any] = field(default_factory=dict)
    """The config blob (``model_format``, ``renderer``, ``parser``, ``capabilities``, …)."""
    model_digest: str = ""
    """The model layer's digest (``sha256:<hex>``): what several tags share."""

    @property
    def stops(self) -> tuple[str, ...]:
        stop = self.params.get("stop")
        if isinstance(stop, str):
            return (stop,)
        return tuple(s for s in stop if isinstance(s, str)) if isinstance(stop, list) else ()

    @property
    def renderer(self) -> str:
        return str(self.config.get("renderer") or "")

    @property
    def parser(self) -> str:
        return str(self.config.get("parser") or "")

    def to_dict(self) -> dict[str, Any]:
        return {
            "manifest": self.manifest,
            "model_digest": self.model_digest,
            "template": self.template,
            "system": self.system,
            "params": self.params,
            "renderer": self.renderer or None,
            "parser": self.parser or None,
        }


@dataclass(frozen=True)
class StoreModel:
    """One GGUF a runtime's store holds, found from a reference or by a scan."""

    ref: str
    """The reference in its full form (``ollama://registry.ollama.ai/library/hermes-test:latest`` is shown as
    ``ollama://hermes-test:latest``): what findings and reports name, never the blob's hash."""
    store: str
    """``ollama``, ``lmstudio`` or ``hf-cache``."""
    path: str
    """The local GGUF to read (an Ollama blob, an HF snapshot file, an LM Studio file): never written."""
    size: int
    root: str
    """The store's folder."""
    identity: tuple[int, int] = (0, 0)
    """(st_dev, st_ino) of the GGUF: two names of one blob are one file to audit."""
    ollama: OllamaLayers | None = None
    upstream_repo: str | None = None
    """The Hub repo the file came from, when the store says (the HF cache's folder name)."""
    revision: str | None = None
    """The HF cache's commit of that repo."""

    @property
    def content_addressed(self) -> bool:
        """The file is named by its content (an Ollama blob) or shared by a cache's snapshots: patch must write a
        copy elsewhere, never beside it or over it."""
        return self.store in ("ollama", "hf-cache")

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"ref": self.ref, "store": self.store, "path": self.path, "size": self.size}
        if self.upstream_repo:
            d["upstream_repo"] = self.upstream_repo
            d["revision"] = self.revision
        if self.ollama is not None:
            d["ollama"] = self.ollama.to_dict()
        return d
