"""``gguftpl rules``: every registered rule is documented, listed and explained."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from gguftpl.cli import main_group
from gguftpl.findings import Severity, all_rules
from gguftpl.report.ruledoc import find_rule

RULES = all_rules()


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main_group, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_rules_exist() -> None:
    assert {"GT001", "GT002"} <= {r.code for r in RULES}


@pytest.mark.parametrize("rule", RULES, ids=[r.code for r in RULES])
def test_every_rule_is_documented(rule) -> None:  # type: ignore[no-untyped-def]
    assert re.fullmatch(r"GT\d{3}", rule.code)
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", rule.name)
    assert isinstance(rule.severity, Severity)
    assert rule.summary.strip(), f"{rule.code} has no summary"
    assert rule.why.strip(), f"{rule.code} has no 'why is this bad' text"
    assert rule.fix.strip(), f"{rule.code} has no fix text"


def test_rule_names_are_unique() -> None:
    names = [r.name for r in RULES]
    assert len(names) == len(set(names))


def test_list_shows_every_rule() -> None:
    code, out, _ = run("rules")
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == len(RULES)
    for line, rule in zip(lines, RULES, strict=True):
        assert line.split()[:3] == [rule.code, rule.severity.value, rule.name]
        assert line.endswith(rule.summary)


def test_list_as_json() -> None:
    code, out, _ = run("rules", "--format", "json")
    assert code == 0
    doc = json.loads(out)
    assert [d["code"] for d in doc] == [r.code for r in RULES]
    assert set(doc[0]) == {"code", "name", "severity", "summary", "why", "example", "fix"}


@pytest.mark.parametrize("rule", RULES, ids=[r.code for r in RULES])
def test_explain_each_rule(rule) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = run("rules", rule.code.lower())
    assert code == 0
    assert out.startswith(f"# {rule.name} ({rule.code})")
    sections = re.findall(r"^## (.+)$", out, flags=re.M)
    expected = ["What it does"] + [
        title for title, text in (("Why is this bad?", rule.why), ("Example", rule.example), ("Fix", rule.fix)) if text
    ]
    assert sections == expected
    assert rule.summary in out and rule.why in out and rule.fix in out
    # by name too
    assert run("rules", rule.name)[1] == out


def test_explain_as_json() -> None:
    code, out, _ = run("rules", "GT001", "--format", "json")
    assert code == 0
    assert json.loads(out)["name"] == find_rule("GT001").name  # type: ignore[union-attr]


def test_unknown_rule_is_a_usage_error() -> None:
    code, out, err = run("rules", "GT999")
    assert code == 2
    assert out == ""
    assert "unknown rule 'GT999'" in err


def test_rule_modules_table_matches_what_each_module_registers() -> None:
    """findings.RULE_MODULES lets a file audit load only the rules it runs: it must name, for each module,
    every code range it defines and every scope it has checks for."""
    import importlib

    from gguftpl import findings

    rules = findings.all_rules()
    assert len(rules) >= 48
    for rule in rules:
        owners = [m for m, (prefixes, _) in findings.RULE_MODULES.items() if rule.code.startswith(prefixes)]
        assert len(owners) == 1, rule.code
        assert rule in vars(importlib.import_module(owners[0])).values(), (rule.code, owners[0])
    for scope in findings.SCOPES:
        for rule, fn in findings.checks(scope):
            assert scope in findings.RULE_MODULES[fn.__module__][1], (fn.__module__, scope, rule.code)


@pytest.mark.parametrize("prefix", ["GT2", "gt20", "GT0", "ALL"])
def test_a_prefix_lists_the_rules_select_takes(prefix: str) -> None:
    """`rules GT2` lists exactly the rules `--select GT2` runs: one home for prefix matching."""
    from gguftpl.audit import RuleFilter

    code, out, err = run("rules", prefix)
    assert code == 0, err
    selected = [r.code for r in RULES if RuleFilter(select=[prefix])(r.code)]
    assert selected  # the prefix names rules
    assert [line.split()[0] for line in out.splitlines()] == selected
    code, out, _ = run("rules", prefix, "--format", "json")
    assert code == 0
    assert [d["code"] for d in json.loads(out)] == selected


def test_an_unknown_prefix_is_refused_by_rules_and_select_alike() -> None:
    from gguftpl.audit import RuleFilter
    from gguftpl.errors import UsageError

    code, out, err = run("rules", "GT9")
    assert code == 2 and out == ""
    assert "unknown rule 'GT9'" in err
    with pytest.raises(UsageError):
        RuleFilter(select=["GT9"])
