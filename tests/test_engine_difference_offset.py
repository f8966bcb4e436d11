"""The audit (GT604) and verify's agreement stage name the same first difference for the same template and
conversation: one comparison (``templates.enginediff.compare_with_llamacpp``: the conversation as llama.cpp hands
it to the template) and one place that locates it (``locate_difference``). Issue 26 item 5: the same difference was
at character 471 in the audit and 466 in verify."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from gguftpl.audit import audit_file
from gguftpl.templates import probes
from gguftpl.templates.enginediff import locate_difference
from gguftpl.verify.stages import verify_file

pytest.importorskip("xllamacpp")

# reads content only as parts (llama.cpp then sends string content as one text part) and formats it with
# `'%s' | format(...)`, which llama.cpp leaves unformatted: the engines differ after the user's text, and a
# comparison that gave transformers the string content (not the parts llama.cpp sends) differed elsewhere
PARTS_AND_FORMAT = (
    "{{ 'You are a careful assistant; answer briefly. ' }}{% if tools %}<tools>{{ tools | tojson }}</tools>"
    "{% endif %}{% for m in messages %}<{{ m.role }}>{% for part in m.content %}{% if part.type == 'text' %}"
    "{{ part.text }}{% endif %}{% endfor %}{{ ' %s' | format('done') }}</s>{% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
)


def test_audit_and_verify_name_one_offset(make_gguf: Callable[..., Path]) -> None:
    path = make_gguf("parts.gguf", templates={"default": PARTS_AND_FORMAT})
    fa = audit_file(path)
    gt604 = [f for f in fa.findings if f.code == "GT604" and f.extra.get("probe") == probes.TOOLS]
    assert gt604, [(f.code, f.message) for f in fa.findings]
    facts = next(t for t in fa.templates if t.name == "default")
    audit_d = next(d for d in facts.engine_differences if d.probe == probes.TOOLS and d.engine == "llamacpp")

    result = verify_file(path)
    stage = next(st for st in result.stages if st.name.startswith("engine") or "agreement" in st.name)
    request = next(r for r in stage.data["requests"] if r["request"] == "tools request")
    assert request["identical"] is False
    assert request["first_difference"] == audit_d.at, (stage.evidence, gt604[0].message)
    assert f"from character {audit_d.at} (line {audit_d.line})" in stage.evidence
    assert f"from character {audit_d.at} (line {audit_d.line})" in gt604[0].message
    assert probes.CANARY_USER in stage.data["llama_prompt"][: audit_d.at]  # the user's text agreed (as parts)


def test_locate_difference_is_the_one_offset() -> None:
    d = locate_difference("ab\ncdef", "ab\ncdXf")
    assert d is not None and (d.at, d.line) == (5, 2)
    assert locate_difference("same", "same") is None
