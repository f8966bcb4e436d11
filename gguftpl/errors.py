"""Typed errors. The CLI maps every one of them to a one-line message and exit code 2 (see cli/__init__.py)."""

from __future__ import annotations


class GGUFTplError(Exception):
    """Base of every error gguftpl raises on purpose."""


class GGUFFormatError(GGUFTplError):
    """The bytes are not a GGUF we can read: bad magic, truncation, hostile lengths, bad UTF-8."""

    def __init__(self, message: str, offset: int | None = None) -> None:
        self.offset = offset
        where = f" at byte {offset}" if offset is not None else ""
        super().__init__(f"{message}{where}")


class TemplateError(GGUFTplError):
    """A chat template cannot be parsed or rendered."""


class HubError(GGUFTplError):
    """The Hugging Face Hub (or a stand-in endpoint) cannot give what was asked: missing repo, revision,
    file, gated repo, no network."""


class HubUnreachableError(HubError):
    """The Hub could not be reached (offline with a cold cache, network down): not a verdict about the repo, so
    a bundled catalog entry already matched may stand in."""


class PatchError(GGUFTplError):
    """A rewrite was refused or failed; the input is untouched and no output is left behind."""


class LlamaCppError(GGUFTplError):
    """llama.cpp (xllamacpp) is missing, refused to load the model or answered with an error."""


class ToolSourceError(GGUFTplError):
    """A tools file or MCP server could not give a usable tool list or call result."""


class UsageError(GGUFTplError):
    """Arguments that make no sense together, a file that does not exist, and the like."""


class EngineInstallError(GGUFTplError):
    """An engine that is not a Python package (``@huggingface/jinja`` under Node.js, Ollama's Go worker) could not
    be installed: no Node.js or npm, the registry unreachable, the download not the pinned one."""


class StoreError(GGUFTplError):
    """A model reference (``ollama://``, ``lmstudio://``, ``hf-cache://``) cannot be resolved in its store: the
    store or the model is not there, or the store is hostile (a manifest naming a blob outside it, a digest that
    does not match its blob, a symlink loop, a manifest past its size cap, a sparse blob)."""


class RecordError(GGUFTplError):
    """A ``verify --record`` folder that cannot be written (not empty, not a folder), or a ``--replay`` folder that
    is not a whole, well-formed record (a file missing, truncated, too large, or of another shape)."""
