"""``verify --live --record DIR`` and ``verify --replay DIR``: the evidence of a live run, as files a person can
read and gguftpl can judge again without the model.

A record is a folder::

    record.json                what ran: kind (live | counterfactual), command line, versions (gguftpl,
                               xllamacpp and its llama.cpp build, Python), each model's path, size and sha256,
                               the tools offered, the repair (counterfactual)
    SIDE/result.json           the whole verify report of that run, every stage's data included
    SIDE/exchanges.json        every request the live stage sent the model, and llama.cpp's answer
    SIDE/prompts/NN.txt        the exact prompt llama.cpp rendered for request NN
    SIDE/outputs/NN.txt        the model's raw output for request NN
    SIDE/tool_calls.json       the calls gguftpl dispatched (with --mcp), with their results
    SIDE/server_log.txt        the lines the tool server's own log gained during the run (--server-log)

SIDE is ``live`` for one run, ``before`` and ``after`` for a counterfactual. The folder is written beside DIR
and renamed into place whole (a half-written record never appears), and a non-empty DIR is refused unless
``overwrite``. :func:`replay` reads it back, every file bounded and checked (a hostile or truncated record is
one :class:`gguftpl.errors.RecordError`), and runs :func:`gguftpl.verify.live.judge` again on the recorded
generations: the verdicts must be the recorded ones.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from gguftpl.errors import RecordError
from gguftpl.verify.result import FAIL, PASS, SKIP, WARN, Stage, VerifyResult

FORMAT = "gguftpl-verify-record"
VERSION = 1
LIVE_SIDE = "live"
KINDS = {"live": (LIVE_SIDE,), "counterfactual": ("before", "after")}
"""Kind -> its sides, the only folder names a record may have."""
FILE_LIMIT = 64 << 20
"""Bytes any one file of a record may hold (a prompt of a long conversation is well under a MiB)."""
EXCHANGE_LIMIT = 64
"""Requests one side may record (a live stage sends at most a few)."""


# ---------------------------------------------------------------------------------------------- capture


@contextmanager
def tap(s: Any, sink: list[dict[str, Any]] | None) -> Iterator[None]:
    """While the block runs, every ``s.chat_completion(body)`` is appended to ``sink`` with the prompt llama.cpp
    renders for its messages and tools and the answer (or its error). None: nothing is tapped."""
    if sink is None:
        yield
        return
    real = s.chat_completion

    def chat_completion(body: dict[str, Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
        from gguftpl.errors import LlamaCppError

        entry: dict[str, Any] = {"request": body}
        try:
            entry["prompt"] = s.apply_template(list(body.get("messages") or []), body.get("tools") or None)
        except LlamaCppError as exc:
            entry["prompt_error"] = str(exc)
        sink.append(entry)
        t0 = time.perf_counter()
        try:
            res = real(body, *args, **kwargs)
        except LlamaCppError as exc:
            entry["error"] = str(exc)
            raise
        finally:
            entry["seconds"] = round(time.perf_counter() - t0, 2)
        entry["response"] = res
        return res

    s.chat_completion = chat_completion
    try:
        yield
    finally:
        del s.chat_completion  # the class's own method again


def versions() -> dict[str, Any]:
    """What produced the evidence: gguftpl, xllamacpp and the llama.cpp build it carries, Python."""
    import platform
    from importlib import metadata

    from gguftpl import __version__

    out: dict[str, Any] = {"gguftpl": __version__, "python": platform.python_version(), "platform": sys.platform}
    try:
        out["xllamacpp"] = metadata.version("xllamacpp")
    except metadata.PackageNotFoundError:
        out["xllamacpp"] = None
    try:
        import xllamacpp

        out["llama.cpp"] = dict(getattr(xllamacpp, "BUILD_INFO", {}) or {})
    except ImportError:
        out["llama.cpp"] = None
    return out


def model_info(path: str) -> dict[str, Any]:
    """The model file's path, size and sha256 (read once, in blocks)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return {"path": path, "size": os.path.getsize(path), "sha256": h.hexdigest()}


@dataclass
class Side:
    """One run's evidence."""

    result: VerifyResult
    exchanges: list[dict[str, Any]] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    server_log: list[str] | None = None
    model: dict[str, Any] = field(default_factory=dict)


@dataclass
class Record:
    """A live run (one side) or a counterfactual (before, after), and what produced it."""

    kind: str
    sides: dict[str, Side]
    command: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, Any] = field(default_factory=dict)
    tools: list[dict[str, Any]] = field(default_factory=list)
    """The OpenAI tools of the live conversation (their schemas judge a call's arguments)."""
    repair: dict[str, Any] | None = None
    created: str = ""


# ---------------------------------------------------------------------------------------------- writing


def check_target(folder: str, overwrite: bool = False) -> str:
    """Refuse a record folder before any work: not a folder, or not empty without ``overwrite``."""
    folder = os.path.abspath(folder)
    if os.path.lexists(folder):
        if not os.path.isdir(folder) or os.path.islink(folder):
            raise RecordError(f"--record {folder}: not a folder")
        if os.listdir(folder) and not overwrite:
            raise RecordError(f"--record {folder} is not empty; give an empty or new folder (or --record-overwrite)")
    parent = os.path.dirname(folder)
    if not os.path.isdir(parent):
        raise RecordError(f"--record {folder}: its parent folder {parent} does not exist")
    return folder


def write_record(folder: str, record: Record, *, overwrite: bool = False) -> str:
    """Write ``record`` to ``folder`` (a new or empty folder, or any with ``overwrite``): built beside it, renamed
    into place whole. The folder's path."""
    folder = check_target(folder, overwrite)
    tmp = tempfile.mkdtemp(prefix=".gguftpl-record-", dir=os.path.dirname(folder))
    try:
        _write_files(tmp, record)
        _swap_in(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return folder


def _swap_in(tmp: str, folder: str) -> None:
    os.chmod(tmp, 0o755 & ~_umask())
    if not os.path.lexists(folder):
        os.rename(tmp, folder)
        return
    if not os.listdir(folder):
        os.rmdir(folder)
        os.rename(tmp, folder)
        return
    old = tempfile.mkdtemp(prefix=".gguftpl-record-old-", dir=os.path.dirname(folder))
    os.rmdir(old)
    os.rename(folder, old)
    os.rename(tmp, folder)
    shutil.rmtree(old, ignore_errors=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _dump(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def _json(obj: Any) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False, default=str) + "\n"


def _write_files(top: str, record: Record) -> None:
    head = {
        "format": FORMAT,
        "version": VERSION,
        "kind": record.kind,
        "created": record.created or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": record.command,
        "versions": record.versions,
        "models": {name: side.model for name, side in record.sides.items()},
        "tools": record.tools,
        "repair": record.repair,
        "sides": list(record.sides),
    }
    _dump(os.path.join(top, "record.json"), _json(head))
    for name, side in record.sides.items():
        base = os.path.join(top, name)
        os.makedirs(os.path.join(base, "prompts"))
        os.makedirs(os.path.join(base, "outputs"))
        result = side.result.to_dict(with_data=True) | {"timings": side.result.timings}
        _dump(os.path.join(base, "result.json"), _json(result))
        _dump(os.path.join(base, "exchanges.json"), _json(side.exchanges))
        _dump(os.path.join(base, "tool_calls.json"), _json(side.calls))
        if side.server_log is not None:
            _dump(os.path.join(base, "server_log.txt"), "".join(line + "\n" for line in side.server_log))
        for i, ex in enumerate(side.exchanges, 1):
            _dump(os.path.join(base, "prompts", f"{i:02d}.txt"), str(ex.get("prompt", ex.get("prompt_error", ""))))
            _dump(os.path.join(base, "outputs", f"{i:02d}.txt"), _output_text(ex))


def _output_text(ex: Mapping[str, Any]) -> str:
    if "error" in ex:
        return f"(no answer: {ex['error']})\n"
    try:
        msg = ex["response"]["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        return f"(no message in llama.cpp's answer: {json.dumps(ex.get('response'))[:300]})\n"
    parts = []
    if msg.get("reasoning_content"):
        parts.append(f"[reasoning_content]\n{msg['reasoning_content']}")
    parts.append(str(msg.get("content") or ""))
    if msg.get("tool_calls"):
        parts.append(f"[tool_calls parsed by llama.cpp]\n{json.dumps(msg['tool_calls'], ensure_ascii=False)}")
    return "\n".join(parts) + "\n"


# ---------------------------------------------------------------------------------------------- reading


def read_record(folder: str) -> Record:
    """The record in ``folder``, every file bounded and its shape checked; :class:`RecordError` otherwise."""
    from gguftpl.safeio import read_json_file

    if not os.path.isdir(folder):
        raise RecordError(f"--replay {folder}: not a folder")

    def load(rel: str, want: type) -> Any:
        path = os.path.join(folder, rel)
        value = read_json_file(path, what=f"record file {rel}", error=RecordError, limit=FILE_LIMIT)
        if not isinstance(value, want):
            raise RecordError(f"record {folder}: {rel} is not a JSON {want.__name__}")
        return value

    head = load("record.json", dict)
    if head.get("format") != FORMAT or head.get("version") != VERSION:
        raise RecordError(f"record {folder}: record.json is not a gguftpl verify record (version {VERSION})")
    kind = head.get("kind")
    if kind not in KINDS or head.get("sides") != list(KINDS[kind]):
        raise RecordError(f"record {folder}: record.json names kind {kind!r} with sides {head.get('sides')!r}")
    models = _dict(head.get("models"))
    sides = {}
    for name in KINDS[kind]:
        result = result_from_dict(load(f"{name}/result.json", dict), f"{name}/result.json")
        exchanges = load(f"{name}/exchanges.json", list)[:EXCHANGE_LIMIT]
        calls = load(f"{name}/tool_calls.json", list)
        model = _dict(models.get(name))
        sides[name] = Side(result, exchanges, calls, _server_log(folder, name), model)
    tools = head.get("tools") if isinstance(head.get("tools"), list) else []
    return Record(
        kind,
        sides,
        _dict(head.get("command")),
        _dict(head.get("versions")),
        [t for t in tools if isinstance(t, dict)],
        head.get("repair") if isinstance(head.get("repair"), dict) else None,
        str(head.get("created") or ""),
    )


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _server_log(folder: str, side: str) -> list[str] | None:
    from gguftpl.safeio import read_text_bounded

    path = os.path.join(folder, side, "server_log.txt")
    if not os.path.lexists(path):
        return None
    text = read_text_bounded(path, what=f"record file {side}/server_log.txt", error=RecordError, limit=FILE_LIMIT)
    return [line for line in text.splitlines() if line.strip()]


_STATUSES = (PASS, FAIL, SKIP, WARN)


def result_from_dict(d: Mapping[str, Any], where: str = "result") -> VerifyResult:
    """A :class:`VerifyResult` from its ``to_dict(with_data=True)``; :class:`RecordError` for any other shape."""
    stages_in = d.get("stages")
    if not isinstance(d.get("path"), str) or not isinstance(stages_in, list) or not stages_in:
        raise RecordError(f"record {where}: no path or no stages")
    stages = []
    for i, st in enumerate(stages_in, 1):
        if not isinstance(st, dict):
            raise RecordError(f"record {where}: stage {i} is not an object")
        name, status, evidence = st.get("name"), st.get("status"), st.get("evidence")
        data = st.get("data", {})
        if not (isinstance(name, str) and status in _STATUSES and isinstance(evidence, str) and isinstance(data, dict)):
            raise RecordError(f"record {where}: stage {i} lacks a name, a status, evidence or its data")
        summary = {k: v for k, v in st.items() if k not in ("name", "status", "evidence", "data")}
        stages.append(Stage(name, status, evidence, data, summary))
    template = d.get("template")
    timings = _dict(d.get("timings"))
    return VerifyResult(
        d["path"],
        stages,
        template if isinstance(template, str) else None,
        d.get("standin") if isinstance(d.get("standin"), dict) else None,
        {k: v for k, v in timings.items() if isinstance(v, int | float)},
        bool(d.get("load_weights")),
    )


# ---------------------------------------------------------------------------------------------- replay


@dataclass(frozen=True)
class Verdict:
    side: str
    answer: str
    """``answer`` (the model's first answer), ``tool_choice=required`` (the retry) or ``final`` (the second turn)."""
    recorded: Any
    replayed: Any

    @property
    def same(self) -> bool:
        return self.recorded == self.replayed


@dataclass
class Replayed:
    record: Record
    results: dict[str, VerifyResult]
    """Side -> the recorded report with the live stage's verdict re-judged."""
    verdicts: list[Verdict]

    @property
    def same(self) -> bool:
        return all(v.same for v in self.verdicts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.record.kind,
            "same": self.same,
            "verdicts": [vars(v) | {"same": v.same} for v in self.verdicts],
            "sides": {k: r.to_dict(with_data=True) for k, r in self.results.items()},
        }


def replay(folder: str) -> Replayed:
    """Judge the recorded generations of ``folder`` again (no model): the reports, their verdicts re-judged."""
    record = read_record(folder)
    results: dict[str, VerifyResult] = {}
    verdicts: list[Verdict] = []
    for name, side in record.sides.items():
        results[name], found = _rejudge(name, side.result)
        verdicts += found
    return Replayed(record, results, verdicts)


def _rejudge(side: str, result: VerifyResult) -> tuple[VerifyResult, list[Verdict]]:
    """The live stage's verdicts again through :func:`gguftpl.verify.live.rejudge` (the one place that judges a
    recorded answer), beside the verdicts the record holds."""
    from gguftpl.verify.live import PARSED_CALL, STAGE_LIVE, rejudge

    live = next((s for s in result.stages if s.name == STAGE_LIVE), None)
    if live is None:
        return result, []
    data = live.data
    required, final = data.get("tool_choice_required"), data.get("final")
    later = [x["generation"] for x in (required, final) if isinstance(x, dict) and "generation" in x]
    for d in (data.get("generation"), *later):
        _generation(d, side)  # a generation that is no object is the record's error, named
    try:
        again = rejudge(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise RecordError(f"record {side}/result.json: the live stage's data cannot be judged ({exc!r})") from None
    verdicts = [Verdict(side, "answer", live.summary.get("outcome"), again["outcome"])]
    if "tool_choice_required" in again:
        verdicts.append(
            Verdict(side, "tool_choice=required", (required or {}).get("outcome"), again["tool_choice_required"])
        )
    if "final" in again and isinstance(final, dict):
        verdicts.append(Verdict(side, "final", final.get("uses_result"), again["final"]["uses_result"]))
    summary = dict(live.summary, outcome=again["outcome"])
    if "call_shape" in again:
        summary["call_shape"] = again["call_shape"]
    status = PASS if again["outcome"] == PARSED_CALL else FAIL
    stages = [replace(s, status=status, summary=summary) if s is live else s for s in result.stages]
    return replace(result, stages=stages), verdicts


def _generation(d: Any, side: str) -> Any:
    from gguftpl.verify.live import Generation

    if not isinstance(d, dict) or not isinstance(d.get("message", {}), dict):
        raise RecordError(f"record {side}/result.json: the live stage's generation is not an object with a message")
    tokens = d.get("tokens")
    seconds = d.get("seconds")
    return Generation(
        dict(d.get("message") or {}),
        d.get("finish_reason") if isinstance(d.get("finish_reason"), str) else None,
        tokens if isinstance(tokens, int) else None,
        float(seconds) if isinstance(seconds, int | float) else 0.0,
        str(d["error"]) if d.get("error") is not None else None,
    )


def side_names(kind: str) -> Sequence[str]:
    return KINDS[kind]
