"""``gguftpl rules [CODE]``: list every rule, or explain one."""

from __future__ import annotations

import click

from gguftpl.cli.output import echo, echo_json, echo_json_text, width_option
from gguftpl.errors import UsageError


@click.command("rules")
@click.argument("rule", required=False, metavar="[CODE|NAME]")
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True, help="Output format."
)
@width_option
def command(rule: str | None, fmt: str) -> None:
    """List every rule (code, severity, name, summary), or explain one: what it finds, why it matters, an
    example and the fix."""
    from gguftpl.findings import all_rules
    from gguftpl.report.ruledoc import find_rule, rule_json, rule_page, rule_table, rules_json

    if rule is None:
        rules = all_rules()
        if fmt == "json":
            echo_json_text(rules_json(rules), nl=False)
        else:
            echo(rule_table(rules), nl=False)
        return
    found = find_rule(rule)
    if found is None:
        raise UsageError(f"unknown rule {rule!r} (run `gguftpl rules` for the list)")
    if fmt == "json":
        echo_json(rule_json(found))
    else:
        echo(rule_page(found), nl=False)
