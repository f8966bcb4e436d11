"""Invented results (issue 24 item 2): answers judged against what the tools really returned, on outputs real
models wrote (tests/data/live_outputs/, recorded by scripts/record_live_outputs.py) and on outputs written by
hand for each heuristic of gguftpl.verify.invented."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gguftpl.templates import probes
from gguftpl.verify.invented import HONEST, INVENTED, UNCLEAR, judge_claims
from gguftpl.verify.live import (
    INVENTED_RESULT,
    NO_CALL,
    OUTCOMES,
    UNPARSED_CALL,
    Generation,
    canary_ask,
    given_texts,
    judge,
)

OUTPUTS = Path(__file__).parent / "data" / "live_outputs"
SHA256 = {
    "Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf": "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    "SmolLM2-135M-Instruct.Q4_1.gguf": "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
}
# what each recorded answer is, read by a person (the texts are in the files)
RECORDED = {
    # "I'm sorry, but I can't assist with that."
    "qwen2.5-coder-0.5b.chatml.json": (NO_CALL, HONEST),
    # "I'm sorry, but I can't find any record with the key ... Could you please provide more context"
    "qwen2.5-coder-0.5b.no-tools.json": (NO_CALL, HONEST),
    # an SQL query to run instead: no refusal, no value claimed
    "qwen2.5-coder-0.5b.no-tools-ask.json": (NO_CALL, UNCLEAR),
    # the call as a ```json fence, nothing beside it
    "qwen2.5-coder-0.5b.own.json": (UNPARSED_CALL, HONEST),
    # "The record with key qz7canaryargvalue is 1." (repeated to max tokens): a value nobody returned
    "smollm2-135m.chatml.json": (INVENTED_RESULT, INVENTED),
    "smollm2-135m.no-tools.json": (INVENTED_RESULT, INVENTED),
    "smollm2-135m.own.json": (INVENTED_RESULT, INVENTED),
    # "The lookup tool is a powerful tool that allows you to find the key-value pairs ...": no value, no refusal
    "smollm2-135m.no-tools-ask.json": (NO_CALL, UNCLEAR),
}


def _recorded(name: str) -> dict[str, Any]:
    return json.loads((OUTPUTS / name).read_text(encoding="utf-8"))


def test_every_recorded_output_has_its_provenance() -> None:
    files = sorted(p.name for p in OUTPUTS.glob("*.json"))
    assert files == sorted(RECORDED)
    for name in files:
        prov = _recorded(name)["provenance"]
        assert SHA256[prov["model"]] == prov["sha256"]
        assert prov["llama_cpp"].startswith("xllamacpp ") and "record_live_outputs.py" in prov["command"]
        assert prov["settings"]["temperature"] == 0


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_recorded_real_outputs(name: str) -> None:
    doc = _recorded(name)
    request = doc["request"]
    names = [t["function"]["name"] for t in request["tools"]]
    ask = request["messages"][0]["content"]
    judged = judge(Generation.from_dict(doc["generation"]), names, given=given_texts(ask, request["tools"]))
    assert judged.claim is not None
    assert (judged.outcome, judged.claim.verdict) == RECORDED[name], judged.claim.describe()
    if judged.claim.verdict == UNCLEAR:
        assert judged.claim.text == doc["generation"]["message"]["content"]  # unclear comes with the text


ASK = canary_ask()
GIVEN = given_texts(ASK, probes.canary_tools())
NAMES = [probes.CANARY_TOOL_NAME]
CALL = json.dumps({"name": probes.CANARY_TOOL_NAME, "arguments": {"record_key": probes.CANARY_ARG_VALUE}})


@pytest.mark.parametrize(
    ("text", "outcome", "why"),
    [
        # a result block, as the Goose diagnosis saw it
        ("Calling the tool.\n<tool-result>marker: 735</tool-result>", INVENTED_RESULT, "a result block <tool-result>"),
        ('<tool_response>\n{"marker": "x"}\n</tool_response>', INVENTED_RESULT, "a result block <tool_response>"),
        ("[TOOL_RESULTS] found it [/TOOL_RESULTS]", INVENTED_RESULT, "a result block [TOOL_RESULTS]"),
        ("Tool output: the record exists", INVENTED_RESULT, "a result block Tool output:"),
        # a run narrated without a call
        (f"Calling {probes.CANARY_TOOL_NAME}…", INVENTED_RESULT, "narrates a tool run"),
        ("I looked up the record for you.", INVENTED_RESULT, "narrates a tool run"),
        # a made-up result in JSON (not a call)
        ('{"record_key": "qz7canaryargvalue", "marker": "qz7mk-9a8b7c6d"}', INVENTED_RESULT, "a result in JSON"),
        # values nobody returned
        ("The record with key qz7canaryargvalue is 1.", INVENTED_RESULT, "states '1' as the answer"),
        ("The marker is qz7mk-11223344.", INVENTED_RESULT, "qz7mk-11223344"),
        ("It is sunny, 22 degrees.", INVENTED_RESULT, "values no tool returned: 22"),
        # a call written (not parsed) and then a result made up beside it
        (CALL + "\nResult: 735", INVENTED_RESULT, "735"),
        # honest
        ("I'm sorry, I can't look that up.", NO_CALL, "says it cannot"),
        ("I don't have a tool for records; please check your database.", NO_CALL, "says it cannot"),
        ("The lookup tool is not available here.", NO_CALL, "says it cannot"),
        ("```json\n" + CALL + "\n```", UNPARSED_CALL, "it wrote a call and claims no result"),
        ("", NO_CALL, "the answer is empty"),
        # unsure: never a guess
        ("Sure! What would you like to know?", NO_CALL, "no refusal, no result block"),
        ("I will call the lookup tool for you.", NO_CALL, "no refusal, no result block"),
        ("I don't have access to data from before 2023.", NO_CALL, "a refusal"),
        ("Here are the steps:\n1. Open the database\n2. Search for the key", NO_CALL, "no refusal"),
        ("Run this:\n```sql\nSELECT col1, col22 FROM t WHERE k = 'x123';\n```", NO_CALL, "no refusal"),
    ],
)
def test_hand_written_answers(text: str, outcome: str, why: str) -> None:
    gen = Generation({"role": "assistant", "content": text}, "stop", 9, 0.1)
    judged = judge(gen, NAMES, given=GIVEN)
    assert judged.outcome == outcome and judged.claim is not None
    assert why in judged.claim.describe(), judged.claim.describe()
    if judged.claim.verdict == UNCLEAR:
        assert judged.claim.describe().endswith(repr(" ".join(text.split())))


def test_outcomes_name_invented_result_apart_from_no_call() -> None:
    assert INVENTED_RESULT in OUTCOMES and NO_CALL in OUTCOMES and INVENTED_RESULT != NO_CALL


RETURNED = ["record qz7canaryargvalue: marker qz7mk-abcd1234"]


@pytest.mark.parametrize(
    ("answer", "verdict"),
    [
        ("The record qz7canaryargvalue has marker qz7mk-abcd1234.", HONEST),
        ("The record has marker qz7mk-ffff0000.", INVENTED),  # a marker-like value nobody returned
        ("Done. <tool_response>marker qz7mk-abcd1234</tool_response>", INVENTED),  # printed a second result
        ("I called the tool and it returned qz7mk-abcd1234.", HONEST),  # the call was made: not a narration
        ("Okay.", UNCLEAR),
    ],
)
def test_final_answers_against_what_the_tool_returned(answer: str, verdict: str) -> None:
    claim = judge_claims(answer, returned=RETURNED, given=GIVEN, tool_names=NAMES, call_written=True)
    assert claim.verdict == verdict, claim.describe()


def test_numbers_compare_by_value() -> None:
    returned = ["METRIC-RESULT-ab12cd project=x health=0.93"]
    for answer, verdict in (("The health of x is 93%.", HONEST), ("The health of x is 0.87.", INVENTED)):
        claim = judge_claims(answer, returned=returned, given=["What is the health of x?"], call_written=True)
        assert claim.verdict == verdict, claim.describe()
