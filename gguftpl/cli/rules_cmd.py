"""``gguftpl rules [CODE|PREFIX|NAME]``: list every rule, the rules of a prefix, or explain one."""

from __future__ import annotations

import click

from gguftpl.cli.output import echo, echo_json, echo_json_text, width_option
from gguftpl.errors import UsageError


@click.command("rules")
@click.argument("rule", required=False, metavar="[CODE|PREFIX|NAME]")
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True, help="Output format."
)
@width_option
def command(rule: str | None, fmt: str) -> None:
    """List every rule (code, severity, name, summary), the rules of a code prefix as `--select` takes it
    (`gguftpl rules GT2`), or explain one: what it finds, why it matters, an example and the fix."""
    from gguftpl.findings import all_rules, rules_matching
    from gguftpl.report.ruledoc import find_rule, rule_json, rule_page, rule_table, rules_json

    found = find_rule(rule) if rule is not None else None
    if found is not None:  # one rule, by its code or name: its page
        if fmt == "json":
            echo_json(rule_json(found))
        else:
            echo(rule_page(found), nl=False)
        return
    rules = all_rules() if rule is None else rules_matching(rule)
    if not rules:
        raise UsageError(f"unknown rule {rule!r}: not a code, a code prefix (GT2) or a name (run `gguftpl rules`)")
    if fmt == "json":
        echo_json_text(rules_json(rules), nl=False)
    else:
        echo(rule_table(rules), nl=False)
