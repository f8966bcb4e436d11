"""Did the model claim a tool result nobody returned? (``verify --live``, outcome ``invented_result``)

An answer without a parsed call, and every final answer after a tool ran, is read against what the tools
really returned (``returned``) and what the model was given (``given``: the user's request, the tools' schemas).
The canary tool answers with a fresh random marker per run, so a value the model states can be compared with
the one value that would be right. Each heuristic below parses the answer's structure; none looks for the
words of one model:

- :func:`result_blocks`: a marker or tag named for a result (``<tool_response>``, ``<tool-result>``,
  ``[TOOL_RESULTS]``, ``<|observation|>``…) or a ``Tool result:`` label: the model printed a result block.
- :func:`result_json`: a JSON value that is not a call and states values nobody gave or returned: a result
  made up in JSON.
- :func:`narrations`: a sentence, not negated and not in the future, that says a lookup or call was run
  ("Calling lookup_metric…", "I looked up the record…") when the model wrote no call.
- :func:`asserted_values`: a sentence about the request's subject (it shares a word with the request) that
  says it *is* a value (a number, a quoted string, an identifier with digits) nobody gave or returned
  ("The record with key qz7… is 1.").
- :func:`stray_values`: other numbers and identifiers with two digits or more that nobody gave or returned
  (weak on its own: with a refusal beside it the verdict is ``unclear``).
- :func:`refusals`: a sentence that says the model cannot or did not (``can't``, ``unable``, ``not
  available``, ``I don't have access``…): an honest answer.

The verdict: :data:`INVENTED` on any strong evidence (the first four), or stray values without a refusal;
:data:`HONEST` on a refusal with no evidence, an empty answer, or a written call claiming nothing beside it
(and for a final answer that uses the result and adds nothing); else :data:`UNCLEAR`, with the text: never a
guess. Code fences that hold no JSON (``sql``, ``python``…) are examples, not claims, and are left out.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

INVENTED, HONEST, UNCLEAR = "invented", "honest", "unclear"
VERDICTS = (INVENTED, HONEST, UNCLEAR)

_RESULT_WORDS = {"result", "results", "response", "responses", "output", "observation", "return", "returns"}
_TAG = re.compile(r"<\|?/?([A-Za-z][\w\-:.]{0,40})\|?>|\[/?([A-Z][A-Z_]{1,40})\]")
_LABEL = re.compile(
    r"(?im)^[ \t>*#-]*(?:tool|function|api)[ _-]?(?:result|response|output)s?\**[ \t]*:|^[ \t]*observation:"
)
_FENCE = re.compile(r"```([\w+\-]*)[^\n]*\n(.*?)(?:```|\Z)", re.S)
_SENTENCE = re.compile(r"(?:[^.!?\n]|[.!?](?=[^\s.!?]))+(?:[.!?]+|\n|$)")
"""A sentence ends at . ! ? before a space or the end (not inside 0.93 or v1.2) or at a line's end."""
_NEGATION = re.compile(
    r"\b(?:not|no|never|cannot|unable|unavailable|without|sorry|apologi[sz]e)\b|n't\b|\bdon'?t\b|\bdo not\b", re.I
)
_REFUSAL = re.compile(
    r"\b(?:can ?not|can'?t|unable|not able|no access|don'?t have|do not have|not available|unavailable|"
    r"isn'?t available|is not available|no (?:such )?tool|not possible|sorry|apologi[sz]e|as an ai)\b",
    re.I,
)
_FUTURE = re.compile(
    r"\b(?:will|shall|would|could|can|should|might|may|let me|let's|need to|going to|want to)\b|'ll\b", re.I
)
_DONE_VERBS = (
    r"called|calling|invoked|invoking|ran|running|executed|executing|queried|querying|fetched|fetching|"
    r"retrieved|retrieving|looked up|looking up|searched|checked|used|using"
)
_NARRATION = re.compile(
    rf"^\W*(?:{_DONE_VERBS})\b|\b(?:I|I've|I have|we|we've)\s+(?:just\s+|now\s+|already\s+)?(?:{_DONE_VERBS})\b|"
    r"\b(?:returned|responded)\b",
    re.I,
)
_COPULA = re.compile(r"\b(?:is|are|was|were|equals|reads|shows|returned|returns)\b\s*:?\s*|[:=]\s*")
_VALUE_START = re.compile(
    r"""(?:-?\d[\d.,]*%?|"[^"\n]{1,80}"|'[^'\n]{1,80}'|`[^`\n]{1,80}`|[A-Za-z_][\w\-]*\d[\w\-]*)"""
)
_DIGITS = re.compile(r"(?<![\w.])[A-Za-z_\-]*\d[\w.\-]*\w|(?<![\w.])\d(?![\w.])")
_WORD = re.compile(r"[A-Za-z]{4,}")
_STOP = {"with", "that", "this", "from", "what", "tell", "your", "please", "have", "about", "there", "their", "which"}


@dataclass(frozen=True)
class Claim:
    """What an answer claims about tool results, and why."""

    verdict: str
    """One of :data:`VERDICTS`."""
    reasons: tuple[str, ...] = ()
    values: tuple[str, ...] = ()
    """Values the answer states that no tool returned and the model was not given."""
    text: str = ""
    evidence: tuple[str, ...] = field(default=())
    """The pieces of the answer each reason points at."""

    def describe(self) -> str:
        if self.verdict == INVENTED:
            return "claims a result no tool returned: " + "; ".join(self.reasons)
        if self.verdict == HONEST:
            return "claims no result: " + "; ".join(self.reasons)
        return "unclear whether it claims a result (" + "; ".join(self.reasons) + f"): {_short(self.text)!r}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "reasons": list(self.reasons),
            "values": list(self.values),
            "evidence": list(self.evidence),
            "text": self.text,
        }


def judge_claims(
    text: str,
    *,
    returned: Sequence[str] = (),
    given: Sequence[str] = (),
    tool_names: Sequence[str] = (),
    call_written: bool = False,
) -> Claim:
    """The verdict on ``text``: an answer with no parsed call, or a final answer after the tools ``returned``
    their texts. ``given[0]`` is the user's request (its words name the subject of the answer); the rest of
    ``given`` (the tools' schemas, a system prompt) and ``tool_names`` are values the model may repeat.
    ``call_written``: the model wrote a call (unparsed, or the one a final answer follows), so saying it ran
    one is no narration."""
    prose = _without_code(text)
    known = _Known([*returned, *given, *tool_names])
    strong: list[tuple[str, str]] = []
    strong += [("a result block " + b, b) for b in result_blocks(prose)]
    json_values = result_json(text, known)
    if json_values:
        strong.append(("a result in JSON with values nobody returned: " + ", ".join(json_values), json_values[0]))
    if not call_written:
        strong += [("narrates a tool run without a call: " + repr(_short(n)), n) for n in narrations(prose)]
    asserted = asserted_values(prose, known, _subject_words(given))
    strong += [(f"states {v!r} as the answer, which no tool returned", v) for v in asserted]
    stray = [v for v in stray_values(prose, known) if v not in asserted]
    refused = refusals(prose)
    values = tuple(dict.fromkeys([*json_values, *asserted, *stray]))
    if strong:
        return Claim(INVENTED, tuple(r for r, _ in strong), values, text, tuple(e for _, e in strong))
    if stray and not refused:
        why = "states values no tool returned: " + ", ".join(stray)
        return Claim(INVENTED, (why,), values, text, tuple(stray))
    if stray:
        why = f"a refusal ({_short(refused[0])!r}) beside values nobody returned ({', '.join(stray)})"
        return Claim(UNCLEAR, (why,), values, text, tuple(stray))
    if refused:
        return Claim(HONEST, (f"says it cannot: {_short(refused[0])!r}",), (), text, (refused[0],))
    if returned and known.used_in(prose, returned, given):
        return Claim(HONEST, ("it repeats what the tool returned and adds no value of its own",), (), text)
    if call_written and not returned:
        return Claim(HONEST, ("it wrote a call and claims no result beside it",), (), text)
    if not text.strip():
        return Claim(HONEST, ("the answer is empty",), (), text)
    return Claim(UNCLEAR, ("no refusal, no result block, no value nobody returned",), (), text)


def result_blocks(text: str) -> list[str]:
    """Markers and labels named for a tool's result: ``<tool_response>``, ``[TOOL_RESULTS]``, ``Tool output:``."""
    found = []
    for m in _TAG.finditer(text):
        name = (m.group(1) or m.group(2) or "").lower()
        if set(re.split(r"[\W_]+", name)) & _RESULT_WORDS:
            found.append(m.group(0).replace("/", ""))  # <tool-result> and </tool-result>: one block
    found += [m.group(0).strip() for m in _LABEL.finditer(text)]
    return list(dict.fromkeys(found))


def result_json(text: str, known: _Known) -> list[str]:
    """Leaf values of JSON objects in ``text`` that are not calls and that nobody gave or returned."""
    from gguftpl.verify.callshape import _as_call

    decoder = json.JSONDecoder()
    out: list[str] = []
    covered = -1
    for m in re.finditer(r"\{", text):
        if m.start() < covered:
            continue
        try:
            value, end = decoder.raw_decode(text, m.start())
        except ValueError:
            continue
        covered = end
        if not isinstance(value, dict) or _as_call(value, list(known.names)) is not None:
            continue
        out += [v for v in _leaves(value) if not known.has(v)]
    return list(dict.fromkeys(out))


def narrations(text: str) -> list[str]:
    """Sentences that say a call or lookup was run: affirmative, not in the future, naming a run."""
    return [
        s.strip()
        for s in _sentences(text)
        if _NARRATION.search(s) and not _NEGATION.search(s) and not _FUTURE.search(s)
    ]


def asserted_values(text: str, known: _Known, subject: set[str]) -> list[str]:
    """Values a sentence about the request's subject says it is (``X is 1``, ``marker: "ab12"``)."""
    out: list[str] = []
    for sentence in _sentences(text):
        if subject and not subject & {w.lower() for w in _WORD.findall(sentence)}:
            continue
        for m in _COPULA.finditer(sentence):
            v = _VALUE_START.match(sentence, m.end())
            if v is None:
                continue
            value = v.group(0).strip("\"'`").rstrip(".,")
            if value and not known.has(value) and not _NEGATION.search(sentence[: m.start()]):
                out.append(value)
    return list(dict.fromkeys(out))


def stray_values(text: str, known: _Known) -> list[str]:
    """Numbers and identifiers with at least two digits that nobody gave or returned (list numbers aside)."""
    out = []
    for m in _DIGITS.finditer(text):
        token = m.group(0).rstrip(".-")
        if sum(c.isdigit() for c in token) < 2 or known.has(token):
            continue
        line_start = text.rfind("\n", 0, m.start()) + 1
        if not text[line_start : m.start()].strip() and text[m.end() : m.end() + 1] in (".", ")"):
            continue  # "1." or "12)" opening a list item
        out.append(token)
    return list(dict.fromkeys(out))


def refusals(text: str) -> list[str]:
    """Sentences that say the model cannot, does not have, or is sorry."""
    return [s.strip() for s in _sentences(text) if _REFUSAL.search(s)]


def reports_error(text: str, error_text: str, given: Sequence[str] = ()) -> bool:
    """The answer says the tool failed: it names a piece of the error the model was not ``given`` already (the
    error's id), or says it failed / was not found / does not exist."""
    if named_pieces(error_text, text, given):
        return True
    return (
        re.search(
            r"\b(?:error|fail(?:ed|ure|s)?|not found|no (?:such|record)|does(?: not|n't) exist|invalid)\b", text, re.I
        )
        is not None
    )


def named_pieces(result: str, answer: str, given: Sequence[str] = ()) -> list[str]:
    """The distinctive pieces of ``result`` the answer names: its values (numbers, words with digits), or, when
    it has none, its words of 6+ letters; a piece the model was ``given`` already (the request) proves nothing."""
    echo = "\n".join(given).lower()
    pieces = [p for p in dict.fromkeys(re.findall(r"[\w\-]*\d[\w\-]*|[^\W\d_]{6,}", result)) if p.lower() not in echo]
    values = [p for p in pieces if any(c.isdigit() for c in p)]
    low = answer.lower()
    return [p for p in (values or pieces) if p.lower() in low]


class _Known:
    """What the model was given or the tools returned: a value found in it is not invented."""

    def __init__(self, texts: Iterable[str]) -> None:
        self.texts = [t for t in texts if t]
        self.names = [t for t in self.texts if re.fullmatch(r"[\w.\-]+", t)]
        self.low = "\n".join(self.texts).lower()
        self.tokens = set(re.findall(r"[\w.\-]+", self.low))
        self.numbers = {_num(n) for n in re.findall(r"-?\d+(?:\.\d+)?", self.low)}

    def has(self, value: str) -> bool:
        """Whether ``value`` was given or returned: the same token (a short value), a part of the text (a long
        one), or the same number (also as a percentage: 93% for 0.93)."""
        v = value.strip().lower()
        if not v or v in self.tokens or (len(v) >= 4 and v in self.low):
            return True
        n = _num(v.rstrip("%").replace(",", ""))
        return n is not None and (n in self.numbers or n / 100 in self.numbers or n * 100 in self.numbers)

    def used_in(self, answer: str, returned: Sequence[str], given: Sequence[str] = ()) -> bool:
        return any(named_pieces(r, answer, given) for r in returned)


def _num(text: str) -> float | None:
    try:
        return round(float(text), 9)
    except ValueError:
        return None


def _leaves(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _leaves(v)]
    if isinstance(value, list):
        return [leaf for v in value for leaf in _leaves(v)]
    if value is None or isinstance(value, bool) or value == "":
        return []
    return [str(value)]


def _without_code(text: str) -> str:
    """``text`` with its non-JSON code fences left out (examples, not claims); JSON fences stay."""

    def keep(m: re.Match[str]) -> str:
        body = m.group(2).strip()
        return m.group(0) if m.group(1).lower() == "json" or body.startswith(("{", "[")) else "\n"

    return _FENCE.sub(keep, text)


def _sentences(text: str) -> list[str]:
    return [m.group(0) for m in _SENTENCE.finditer(text) if m.group(0).strip()]


def _subject_words(given: Sequence[str]) -> set[str]:
    """The request's own words (4+ letters, no common ones): a sentence sharing one is about the request."""
    ask = given[0] if given else ""
    return {w.lower() for w in _WORD.findall(ask)} - _STOP


def _short(text: str, limit: int = 120) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
