"""Findings as data, and the registry of rules that can produce them.

A rule has a stable ``code`` (``GTnnn``) and a kebab-case ``name``; its documentation follows ruff's
*What it does / Why is this bad? / Example / Fix*. Modules that check things register their rules here
at import time with ``register(Rule(...))``; ``gguftpl rules`` lists ``all_rules()``.

Code ranges: GT0xx file/container, GT1xx template presence and parsing, GT2xx tool calling,
GT3xx special tokens, GT4xx safety, GT5xx upstream drift and repo consistency, GT6xx llama.cpp verification,
GT7xx other runtimes (Ollama).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any, TypeVar


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        return {"info": 0, "warning": 1, "error": 2}[self.value]


@dataclass(frozen=True)
class Rule:
    code: str
    """Stable identifier, e.g. ``GT201``. Never reused for another meaning."""
    name: str
    """kebab-case, e.g. ``tools-not-rendered``."""
    severity: Severity
    """Default severity; a finding may carry another one when the rule says so."""
    summary: str
    """One line: what the rule finds."""
    why: str = ""
    """Why is this bad?"""
    example: str = ""
    fix: str = ""
    """How to fix it, in words; the finding carries the runnable command."""


@dataclass(frozen=True)
class Location:
    file: str
    """Path or URL of the GGUF (or other input)."""
    key: str | None = None
    """GGUF metadata key, e.g. ``tokenizer.chat_template.tool_use``."""
    line: int | None = None
    """1-based line in the template, where known."""
    column: int | None = None


@dataclass(frozen=True)
class Finding:
    code: str
    name: str
    severity: Severity
    message: str
    location: Location
    template: str | None = None
    """Template name (``default``, ``tool_use``, …) or None for file-level findings."""
    evidence: str = ""
    """The excerpt of the rendered prompt, AST node or header that proves the finding."""
    fix: str | None = None
    """A command or change a user can run."""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["severity"] = self.severity.value
        return d


_RULES: dict[str, Rule] = {}

Check = Callable[..., Iterable[Finding]]
"""A rule's check: a small function over the facts of its scope that yields that rule's findings."""
_C = TypeVar("_C", bound=Check)
_CHECKS: dict[str, list[tuple[Rule, Check]]] = {}

SCOPES = ("file", "template", "repo", "upstream", "llamacpp")
"""What a check reads: ``file`` the header and template set of one GGUF, ``template`` the facts of one
template (with its file's context), ``repo`` the quants of one repo or folder, ``upstream`` a diff against
the upstream repo, ``llamacpp`` the verdicts of llama.cpp itself."""


def check(rule: Rule, scope: str) -> Callable[[_C], _C]:
    """Register the decorated function as ``rule``'s check over the facts of ``scope``; it sits beside the
    rule's documentation in ``gguftpl/rules/``, and the runner of that scope calls every check registered."""
    if scope not in SCOPES:
        raise ValueError(f"unknown check scope {scope!r}")

    def deco(fn: _C) -> _C:
        register(rule)
        _CHECKS.setdefault(scope, []).append((rule, fn))
        return fn

    return deco


def checks(scope: str) -> list[tuple[Rule, Check]]:
    """Every check registered for ``scope``, in registration order (its rule modules are loaded first)."""
    _load_rule_modules(scope=scope)
    return list(_CHECKS.get(scope, ()))


def register(rule: Rule) -> Rule:
    existing = _RULES.get(rule.code)
    if existing is not None and existing != rule:
        raise ValueError(f"rule code {rule.code} registered twice with different definitions")
    _RULES[rule.code] = rule
    return rule


def get_rule(code: str) -> Rule:
    if code not in _RULES:
        _load_rule_modules(code=code)
    return _RULES[code]


def all_rules() -> list[Rule]:
    _load_rule_modules()
    return sorted(_RULES.values(), key=lambda r: r.code)


def selector_specificity(code: str, selector: str) -> int:
    """How specifically ``selector`` (a code, a code prefix such as ``GT2``, or ``ALL``; any case) names the rule
    ``code``: the selector's length, 0 for ``ALL``, -1 when it does not name it. The one home of prefix matching:
    ``--select``/``--ignore`` (:class:`gguftpl.audit.RuleFilter`) and ``gguftpl rules PREFIX`` both use it."""
    s = selector.strip().upper()
    if s == "ALL":
        return 0
    return len(s) if s and code.upper().startswith(s) else -1


def rules_matching(selector: str) -> list[Rule]:
    """The rules a selector names: a code or prefix (``GT2``, ``gt20``, ``ALL``, as ``--select`` takes it) or a
    rule's kebab-case name; sorted by code, empty when it names none."""
    q = selector.strip()
    rules = all_rules()
    by_name = [r for r in rules if r.name == q.lower()]
    return by_name or [r for r in rules if selector_specificity(r.code, q) >= 0]


def fix_text(finding: Finding, rule: Rule | None = None) -> str:
    """How to fix ``finding``, in every format alike: its own command, else its rule's fix in words (``rule``, or
    the registered rule of its code); ``""`` when neither says. The one place that decides it."""
    if finding.fix:
        return finding.fix
    if rule is None:
        rule = _RULES.get(finding.code)
        if rule is None:
            try:
                rule = get_rule(finding.code)
            except KeyError:
                return ""
    return rule.fix


def make_finding(
    rule: Rule,
    message: str,
    location: Location,
    *,
    template: str | None = None,
    evidence: str = "",
    fix: str | None = None,
    severity: Severity | None = None,
    **extra: Any,
) -> Finding:
    return Finding(
        code=rule.code,
        name=rule.name,
        severity=severity or rule.severity,
        message=message,
        location=location,
        template=template,
        evidence=evidence,
        fix=fix,
        extra=extra,
    )


# Module of each code range -> the check scopes it registers. Imported on demand, range by range, so a file
# audit never loads the repo rules (difflib, the repo facts) and `gguftpl inspect` loads none
# (tests/test_rules_cmd.py checks the table against what each module registers).
RULE_MODULES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "gguftpl.rules.container": (("GT0",), ("file",)),
    "gguftpl.rules.template": (("GT1",), ("file", "template")),
    "gguftpl.rules.tools": (("GT2",), ("template",)),
    "gguftpl.rules.tokens": (("GT3",), ("template",)),
    "gguftpl.rules.safety": (("GT4",), ("file", "template")),
    "gguftpl.rules.upstream": (("GT50",), ()),
    "gguftpl.rules.repo": (("GT55",), ("repo",)),
    "gguftpl.rules.llamacpp": (("GT6",), ("template", "llamacpp")),
    "gguftpl.rules.runtimes": (("GT7",), ("file",)),
}


def _load_rule_modules(*, code: str | None = None, scope: str | None = None) -> None:
    """Import the rule modules (all of them, or those of ``code``'s range or with checks of ``scope``)."""
    import importlib

    for mod, (prefixes, scopes) in RULE_MODULES.items():
        if code is not None and not code.startswith(prefixes):
            continue
        if scope is not None and scope not in scopes:
            continue
        importlib.import_module(mod)
