"""gguftpl: find and repair broken chat templates inside GGUF model files."""

from gguftpl.errors import (
    GGUFFormatError,
    GGUFTplError,
    HubError,
    LlamaCppError,
    PatchError,
    TemplateError,
    ToolSourceError,
)
from gguftpl.gguf.reader import GGUFHeader, read_header

__all__ = [
    "GGUFFormatError",
    "GGUFHeader",
    "GGUFTplError",
    "HubError",
    "LlamaCppError",
    "PatchError",
    "TemplateError",
    "ToolSourceError",
    "read_header",
]
