"""Rule documentation as text: the table ``gguftpl rules`` prints and the page for one rule."""

from __future__ import annotations

import json
from typing import Any

from gguftpl.findings import Rule, all_rules


def find_rule(query: str) -> Rule | None:
    """A rule by code (``GT201``, any case) or by name (``tools-not-rendered``)."""
    q = query.strip()
    for rule in all_rules():
        if rule.code.upper() == q.upper() or rule.name == q.lower():
            return rule
    return None


def rule_table(rules: list[Rule]) -> str:
    if not rules:
        return ""
    wname = max(len(r.name) for r in rules)
    return "".join(f"{r.code}  {r.severity.value:<7}  {r.name:<{wname}}  {r.summary}\n" for r in rules)


def rule_page(rule: Rule) -> str:
    """Markdown in ruff's shape: What it does / Why is this bad? / Example / Fix."""
    parts = [
        f"# {rule.name} ({rule.code})",
        f"Default severity: {rule.severity.value}",
        "## What it does",
        rule.summary,
    ]
    if rule.why:
        parts += ["## Why is this bad?", rule.why]
    if rule.example:
        parts += ["## Example", rule.example]
    if rule.fix:
        parts += ["## Fix", rule.fix]
    return "\n\n".join(parts) + "\n"


def rule_json(rule: Rule) -> dict[str, Any]:
    return {
        "code": rule.code,
        "name": rule.name,
        "severity": rule.severity.value,
        "summary": rule.summary,
        "why": rule.why,
        "example": rule.example,
        "fix": rule.fix,
    }


def rules_json(rules: list[Rule]) -> str:
    return json.dumps([rule_json(r) for r in rules], indent=2, ensure_ascii=False) + "\n"
