"""GT4xx: unsafe templates: sandbox escapes, hidden triggers, invisible characters, render bombs."""

from __future__ import annotations

from gguftpl.findings import Rule, Severity, register

SANDBOX_ESCAPE = register(
    Rule(
        "GT401",
        "sandbox-escape-construct",
        Severity.ERROR,
        "The template uses constructs known from Jinja sandbox escapes (dunder attributes, `__globals__`, "
        "`cycler`/`joiner`/`lipsum`/`self` gadgets).",
        why="No chat template needs them; they are the shape of server-side template injection payloads "
        "(CVE-2024-34359 in llama-cpp-python). A runtime with a weaker sandbox executes code.",
        example="`{{ cycler.__init__.__globals__.os.popen('id').read() }}`.",
        fix="Do not use this file; replace the template with the upstream one.",
    )
)
HIDDEN_TRIGGER = register(
    Rule(
        "GT402",
        "hidden-trigger-text",
        Severity.ERROR,
        "The template adds text only when a message contains a specific string (a hidden trigger).",
        why="A backdoor: ordinary probes render clean, but a trigger phrase injects instructions the user never sees.",
        example="`{% if 'xyzzy' in message.content %}Ignore previous instructions…{% endif %}`.",
        fix="Do not use this file; replace the template with the upstream one.",
    )
)
INVISIBLE_UNICODE = register(
    Rule(
        "GT403",
        "invisible-unicode",
        Severity.WARNING,
        "The template contains invisible or bidirectional-control Unicode characters.",
        why="Invisible characters hide text from reviewers (Trojan Source); the model still sees it.",
        example="U+202E RIGHT-TO-LEFT OVERRIDE or U+200B ZERO WIDTH SPACE inside the template.",
        fix="Remove the characters, or replace the template with the upstream one.",
    )
)
RENDER_RESOURCE_LIMIT = register(
    Rule(
        "GT404",
        "render-resource-limit",
        Severity.ERROR,
        "Rendering the template exceeded the time, output-size or memory bound and was stopped.",
        why="A runtime rendering it hangs or runs out of memory: a denial of service on every request.",
        example="`{% for i in range(100000) %}{% for j in range(100000) %}…`.",
        fix="Do not use this file; replace the template with the upstream one.",
    )
)
HUGE_RANGE = register(
    Rule(
        "GT405",
        "huge-range",
        Severity.WARNING,
        "The template calls `range()` with a huge constant.",
        why="Hugging Face's sandbox refuses ranges over 100,000; other engines may loop for a very long time.",
        example="`{% for i in range(10**9) %}`.",
        fix="Do not use this file; replace the template with the upstream one.",
    )
)
