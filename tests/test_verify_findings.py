"""GT6xx: each rule's check reads one stage of a verify result (no llama.cpp needed to test the mapping)."""

from __future__ import annotations

from gguftpl.findings import checks
from gguftpl.verify.findings import findings_from_result
from gguftpl.verify.result import CORE_STAGES, FAIL, PASS, SKIP, STAGE_SELECTION, Stage, VerifyResult


def result(template: str | None, failing: dict[str, str]) -> VerifyResult:
    stages = [Stage(name, FAIL if name in failing else PASS, failing.get(name, "fine")) for name in CORE_STAGES]
    stages.append(Stage("tools: call parsed", FAIL, "a tool stage is no finding"))
    return VerifyResult("m.gguf", stages, template=template)


def test_every_gt6xx_verdict_rule_has_a_check_in_stage_order() -> None:
    codes = [rule.code for rule, _check in checks("llamacpp")]
    assert codes == ["GT606", "GT607", "GT605", "GT601", "GT602", "GT603", "GT604"]


def test_failed_stages_become_findings_in_stage_order() -> None:
    failing = {name: f"{name} broke\nsecond line" for name in CORE_STAGES[1:]}
    found = findings_from_result(result("tool_use", failing), "my model.gguf", "Org/Repo")
    assert [f.code for f in found] == ["GT601", "GT602", "GT603", "GT604"]
    first = found[0]
    assert first.message == "llama.cpp verification, stage 'schema in prompt': schema in prompt broke"
    assert first.evidence == "schema in prompt broke\nsecond line"
    assert (first.location.file, first.location.key, first.template) == (
        "my model.gguf",
        "tokenizer.chat_template.tool_use",
        "tool_use",
    )
    assert first.fix == "gguftpl patch 'my model.gguf' --from-hub Org/Repo -o FIXED.gguf && gguftpl verify FIXED.gguf"
    assert first.extra == {"stage": "schema in prompt"}
    assert found[-1].fix is None  # GT604: no repair command, the engines differ


def test_the_selection_stage_maps_by_what_llamacpp_did() -> None:
    sel = {STAGE_SELECTION: "no"}
    for template, code in (("fallback", "GT605"), ("rejected", "GT606"), ("render-bomb", "GT607")):
        r = result(template, sel)
        for st in r.stages[1:5]:
            st.status = SKIP
        (finding,) = findings_from_result(r)
        assert finding.code == code and finding.template is None and finding.location.key is None
        assert finding.location.file == "m.gguf" and "--from-hub REPO" in (finding.fix or "")
    assert findings_from_result(result("default", {})) == []
