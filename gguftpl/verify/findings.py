"""``audit --engine llamacpp``: verify a file and report its failed core stages as GT6xx findings.

The mapping from stages to rules is not here: each GT6xx rule's check sits beside the rule in
:mod:`gguftpl.rules.llamacpp` (scope ``llamacpp``) and reads the :class:`~gguftpl.verify.result.VerifyResult`.
"""

from __future__ import annotations

import os

from gguftpl.findings import Finding
from gguftpl.verify.result import VerifyResult


def findings_from_result(
    result: VerifyResult, label: str | None = None, upstream_repo: str | None = None, repair: str | None = None
) -> list[Finding]:
    """Failed core stages as GT6xx findings located at ``label`` (default: the result's path); tool-check
    stages are not findings. ``repair``: the file's one repair (:mod:`gguftpl.repair`), the fix of the stages that
    lose the tools."""
    from gguftpl.findings import checks
    from gguftpl.rules.llamacpp import VerifyFacts

    facts = VerifyFacts(result, label or result.path, upstream_repo, repair)
    return [finding for _rule, check in checks("llamacpp") for finding in check(facts)]


def llamacpp_findings(
    path: str | os.PathLike[str],
    label: str | None = None,
    *,
    load_weights: bool = False,
    upstream_repo: str | None = None,
    repair: str | None = None,
) -> list[Finding]:
    """Run :func:`gguftpl.verify.stages.verify_file` and turn failed stages 1–5 into GT6xx findings located at
    ``label`` (default: the path). Raises LlamaCppError when xllamacpp is missing."""
    from gguftpl.verify.stages import verify_file

    result = verify_file(path, load_weights=load_weights)
    return findings_from_result(result, label or os.fspath(path), upstream_repo, repair)
