"""gguftpl: find and repair broken chat templates inside GGUF model files.

The library under the CLI. Heavy dependencies (transformers, huggingface_hub, xllamacpp, mcp) load only
when the function that needs them runs, so importing gguftpl is cheap.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

from gguftpl.errors import (
    GGUFFormatError,
    GGUFTplError,
    HubError,
    LlamaCppError,
    PatchError,
    StoreError,
    TemplateError,
    ToolSourceError,
    UsageError,
)

# name -> module, imported on first use (the `gguftpl` command imports this package before it can install its
# signal handlers: nothing here may take time)
_LAZY = {
    "Finding": "gguftpl.findings",
    "Severity": "gguftpl.findings",
    "Rule": "gguftpl.findings",
    "Location": "gguftpl.findings",
    "all_rules": "gguftpl.findings",
    "TemplateFacts": "gguftpl.templates.facts",
    "template_findings": "gguftpl.analysis",
    "AuditOptions": "gguftpl.audit",
    "AnalysisCache": "gguftpl.auditcache",
    "audit_file": "gguftpl.audit",
    "GGUFHeader": "gguftpl.gguf.reader",
    "read_header": "gguftpl.gguf.reader",
    "load_templateset": "gguftpl.gguf.templateset",
    "TemplateSet": "gguftpl.gguf.templateset",
    "analyze_templateset": "gguftpl.analysis",
    "analyze_template_text": "gguftpl.analysis",
    "audit_paths": "gguftpl.audit",
    "audit_header": "gguftpl.audit",
    "AuditRun": "gguftpl.audit",
    "FileAudit": "gguftpl.audit",
    "Repair": "gguftpl.repair",
    "file_repair": "gguftpl.repair",
    "patch_templates": "gguftpl.patching",
    "patch_from_upstream": "gguftpl.patching",
    "patch_tools_in_default": "gguftpl.patching",
    "run_patch": "gguftpl.patching",
    "patch_folder": "gguftpl.folderpatch",
    "FolderPatch": "gguftpl.folderpatch",
    "FolderFile": "gguftpl.folderpatch",
    "PatchOptions": "gguftpl.patching",
    "PatchResult": "gguftpl.patching",
    "PatchPlan": "gguftpl.patchplan",
    "plan_patch": "gguftpl.patchplan",
    "fetch_upstream": "gguftpl.upstream.hub",
    "UpstreamSource": "gguftpl.upstream.resolve",
    "resolve_upstream": "gguftpl.upstream.resolve",
    "diff": "gguftpl.upstream.diff",
    "DiffOptions": "gguftpl.upstream.diff",
    "DiffResult": "gguftpl.upstream.diff",
    "diff_templateset": "gguftpl.upstream.diff",
    "verify_file": "gguftpl.verify.stages",
    "VerifyResult": "gguftpl.verify.result",
    "LlamaCppSession": "gguftpl.engines.llamacpp_session",
    "render_prompt": "gguftpl.verify.render",
    "llamacpp_findings": "gguftpl.verify.findings",
    "render_hf": "gguftpl.engines.transformers",
    "StoreModel": "gguftpl.stores.model",
    "resolve_model": "gguftpl.stores",
    "scan": "gguftpl.scan",
    "ScanResult": "gguftpl.scan",
    "ollama_modelfile": "gguftpl.runtimes.modelfile",
    "survey": "gguftpl.hubsurvey",
    "SurveyResult": "gguftpl.hubsurvey",
    "RepoRow": "gguftpl.hubsurvey",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gguftpl' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = [
    "GGUFFormatError",
    "GGUFTplError",
    "HubError",
    "LlamaCppError",
    "PatchError",
    "StoreError",
    "TemplateError",
    "ToolSourceError",
    "UsageError",
    *_LAZY,
]
