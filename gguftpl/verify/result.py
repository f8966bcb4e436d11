"""What ``verify`` found: stages with a status and evidence, the facts the GT6xx rules read.

Light on purpose (no llama.cpp, no transformers): :mod:`gguftpl.rules.llamacpp` and the report read it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

PASS, FAIL, WARN, SKIP = "pass", "fail", "warn", "skip"

STAGE_SELECTION = "template selection"
STAGE_SCHEMA = "schema in prompt"
STAGE_CALL = "call parsed"
STAGE_RESULT = "result rendered"
STAGE_AGREEMENT = "engine agreement"
CORE_STAGES = (STAGE_SELECTION, STAGE_SCHEMA, STAGE_CALL, STAGE_RESULT, STAGE_AGREEMENT)

REJECTED = "rejected"
"""``VerifyResult.template`` when llama.cpp refused to load the file because of a template."""
RENDER_BOMB = "render-bomb"
"""``VerifyResult.template`` when a template was not run through llama.cpp: it would hang or crash it."""
INCOMPLETE = "incomplete"
"""``VerifyResult.template`` when the file itself cannot load (tensor data past its end): nothing was run."""
NOT_CHAT = "not-chat"
"""``VerifyResult.template`` when the file's model answers no chat request (embedding, reranker): nothing was run."""
NOT_RUN = (REJECTED, RENDER_BOMB, INCOMPLETE, NOT_CHAT)
"""``VerifyResult.template`` values that name no template: llama.cpp used none."""


@dataclass
class Stage:
    name: str
    status: str
    """``pass``, ``fail``, ``skip`` (tool checks may also give ``warn``)."""
    evidence: str
    data: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    """Keys every JSON report shows beside name, status and evidence (the live stage's ``outcome``)."""

    @property
    def ok(self) -> bool:
        return self.status != FAIL

    def to_dict(self, with_data: bool = False) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "status": self.status, "evidence": self.evidence, **self.summary}
        if with_data:
            d["data"] = self.data
        return d


@dataclass
class VerifyResult:
    path: str
    stages: list[Stage]
    template: str | None = None
    """Name of the template llama.cpp used with tools (``default``, ``tool_use``), ``fallback``, or one of
    :data:`NOT_RUN` (:data:`REJECTED`, :data:`RENDER_BOMB`, :data:`INCOMPLETE`) when it was not run."""
    standin: dict[str, Any] | None = None
    timings: dict[str, float] = field(default_factory=dict)
    load_weights: bool = False
    """True when llama.cpp loaded the real file, False for a stand-in."""

    @property
    def ok(self) -> bool:
        return all(s.ok for s in self.stages)

    def stage(self, name: str) -> Stage:
        for s in self.stages:
            if s.name == name:
                return s
        raise KeyError(name)

    def failed(self, name: str) -> Stage | None:
        """The stage ``name`` when it failed, else None."""
        return next((s for s in self.stages if s.name == name and s.status == FAIL), None)

    def to_dict(self, with_data: bool = False) -> dict[str, Any]:
        d: dict[str, Any] = {
            "path": self.path,
            "stages": [s.to_dict(with_data) for s in self.stages],
            "ok": self.ok,
            "template": self.template,
            "load_weights": self.load_weights,
        }
        if self.standin is not None:
            d["standin"] = self.standin
        return d


def skipped_after(first: Stage, why: str) -> list[Stage]:
    """``first`` (the selection stage) and the other core stages skipped because of ``why``."""
    return [first, *(Stage(name, SKIP, f"not reached: {why}") for name in CORE_STAGES[1:])]


def excerpt(text: str, at: int = -1, radius: int = 120, limit: int = 400) -> str:
    if at < 0:
        return text if len(text) <= limit else text[: limit // 2] + " … " + text[-limit // 2 :]
    return text[max(0, at - radius) : at + radius]
