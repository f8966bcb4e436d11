"""``verify --live --counterfactual``: the same weights before and after the repair, stage by stage.

The repaired file is made as ``patch`` makes it (:func:`gguftpl.patching.run_patch`: the plan from upstream or
from template files, the gate on new errors, the rewrite whose tensor bytes are reflinked or streamed and
proven): a temporary copy in a private folder beside the input (else in TMPDIR), removed after, also on an
error or a Ctrl-C. The input is only read; its stat is compared after. Then the same live conversation runs on
both files (same options, the same seed and temperature 0 in :func:`gguftpl.verify.live.generate`), and
:func:`compare` lays the two reports side by side: one :class:`Row` per stage, before | after.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from gguftpl.errors import UsageError
from gguftpl.verify.result import STAGE_RESULT, STAGE_SCHEMA, STAGE_SELECTION, Stage, VerifyResult

if TYPE_CHECKING:
    from gguftpl.upstream.resolve import UpstreamSource
    from gguftpl.verify.stages import LiveRun

BEFORE, AFTER = "before", "after"
SIDES = (BEFORE, AFTER)
ROWS = (
    "template chosen",
    "schema in prompt",
    "outcome",
    "raw output",
    "call shape",
    "parsed call",
    "valid arguments",
    "dispatched call",
    "server's own record",
    "tool result rendered",
    "final answer uses result",
)
"""The stages of the table, in the order a request goes through them."""
WORKDIR_PREFIX = ".gguftpl-counterfactual-"


@dataclass(frozen=True)
class RepairSpec:
    """How the repaired copy is made: from upstream (``--from-hub``/``--from-catalog``) or from template files
    (``--template NAME=PATH``: name -> path), exactly one of them."""

    upstream: UpstreamSource | None = None
    template_files: Mapping[str, str] = field(default_factory=dict)
    only: Sequence[str] = ()
    """With ``upstream``: copy only these templates (``--only``)."""

    def __post_init__(self) -> None:
        if (self.upstream is None) == (not self.template_files):
            raise UsageError("--counterfactual needs the repair: --from-hub REPO, --from-catalog [ID] or --template")


@dataclass(frozen=True)
class RepairedCopy:
    path: str
    how: str
    """How the templates were found (``matched by tokenizer: …``, the template files)."""
    changed: tuple[str, ...]
    """The template names the repair sets or removes."""
    copy_method: str
    proof_method: str


@dataclass(frozen=True)
class Cell:
    status: str
    """``pass``, ``fail`` or ``skip`` (not reached)."""
    text: str


@dataclass(frozen=True)
class Row:
    stage: str
    before: Cell
    after: Cell

    def to_dict(self) -> dict[str, Any]:
        return {"stage": self.stage, **{k: vars(getattr(self, k)) for k in SIDES}}


@dataclass
class CounterfactualResult:
    """Both runs whole and the table that compares them."""

    path: str
    repair: RepairedCopy
    before: VerifyResult
    after: VerifyResult
    rows: list[Row]
    input_unchanged: bool
    calls: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Side -> the tool calls gguftpl dispatched in that run (name, arguments, result)."""
    server_log: dict[str, list[str]] = field(default_factory=dict)
    """Side -> the lines the tool server's own log gained during that run (``server_log=``)."""
    exchanges: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Side -> every request sent to the model, its prompt and the answer (``keep_exchanges=True``)."""

    @property
    def ok(self) -> bool:
        return self.after.ok

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "repair": vars(self.repair) | {"changed": list(self.repair.changed)},
            "input_unchanged": self.input_unchanged,
            "rows": [r.to_dict() for r in self.rows],
            BEFORE: self.before.to_dict(with_data=True),
            AFTER: self.after.to_dict(with_data=True),
            "calls": self.calls,
            "server_log": self.server_log,
            "ok": self.ok,
        }


# ---------------------------------------------------------------------------------------------- the copy


@contextmanager
def repaired_copy(path: str, spec: RepairSpec, workdir: str | None = None) -> Iterator[RepairedCopy]:
    """The input repaired as ``patch`` would, in a private folder (in ``workdir``, else beside the input, else in
    TMPDIR) that is removed when the block ends, however it ends."""
    from gguftpl.patching import PatchOptions, run_patch

    plan = _plan(path, spec)
    folder = _private_folder(path, workdir)
    try:
        out = os.path.join(folder, os.path.basename(path))
        result = run_patch(plan, out, PatchOptions(audit=False))
        if not result.written or result.proof is None:
            raise UsageError(
                f"nothing to compare: the repair changes no template of {path} ({plan.how_found or 'as given'})"
            )
        changed = tuple(i.name for i in plan.changes)
        proof = result.proof
        yield RepairedCopy(out, plan.how_found or "", changed, proof.copy_method, proof.proof_method)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _plan(path: str, spec: RepairSpec) -> Any:
    from gguftpl.errors import PatchError
    from gguftpl.patching import NOTHING_TO_CHANGE, plan_upstream_patch
    from gguftpl.patchplan import plan_from_files

    if spec.upstream is not None:
        plan = plan_upstream_patch(path, spec.upstream, only=list(spec.only) or None)
    else:
        from gguftpl.safeio import read_text_bounded

        files = dict(spec.template_files)
        texts = {n: read_text_bounded(p, what="template file") for n, p in files.items()}
        plan = plan_from_files(path, texts, (), template_files=files)
        if plan.writes_nothing:
            raise PatchError(NOTHING_TO_CHANGE)
    return plan


def _private_folder(path: str, workdir: str | None) -> str:
    """A new folder only this process uses (mode 0700): beside the input first (a reflink needs the same
    filesystem), TMPDIR when the input's folder cannot be written."""
    places = [workdir] if workdir is not None else [os.path.dirname(os.path.abspath(path)), tempfile.gettempdir()]
    last: OSError | None = None
    for place in places:
        try:
            return tempfile.mkdtemp(prefix=WORKDIR_PREFIX, dir=place)
        except OSError as exc:
            last = exc
    raise UsageError(f"cannot make a folder for the repaired copy: {last}")


def _identity(path: str) -> tuple[int, int, int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


# ---------------------------------------------------------------------------------------------- the runs


def run_counterfactual(
    path: str,
    spec: RepairSpec,
    live: LiveRun,
    *,
    tools: Sequence[Any] | None = None,
    workdir: str | None = None,
    server_log: str | None = None,
    keep_exchanges: bool = False,
    on_side: Callable[[str, VerifyResult, str], None] | None = None,
) -> CounterfactualResult:
    """The live verification of ``path`` and of its repaired copy, with the same ``live`` options and ``tools``.
    ``live.dispatch`` runs the calls of both runs (each side's calls are logged); ``server_log`` names a file the
    tool server appends its own record to: the lines each run added are kept. ``on_side(side, result, file)``
    hears of each run while its file still exists (``--record`` hashes the repaired copy there);
    ``keep_exchanges`` keeps every request and answer of both runs (:func:`gguftpl.verify.record.tap`)."""
    from gguftpl.verify.stages import verify_file

    path = os.fspath(path)
    before_id = _identity(path)
    calls: dict[str, list[dict[str, Any]]] = {}
    logs: dict[str, list[str]] = {}
    exchanges: dict[str, list[dict[str, Any]]] = {}

    def run(side: str, file: str) -> VerifyResult:
        calls[side] = []
        mark = _log_size(server_log)
        kept = exchanges.setdefault(side, []) if keep_exchanges else None
        dispatch = _logged(live.dispatch, calls[side]) if live.dispatch else None
        side_live = replace(live, dispatch=dispatch, exchanges=kept)
        if live.progress is not None:
            live.progress(f"counterfactual: the {side} run…")
        result = verify_file(file, tools=tools, live=side_live)
        if server_log is not None:
            logs[side] = _log_lines(server_log, mark)
        if on_side is not None:
            on_side(side, result, file)
        return result

    # the copy first: a repair that changes nothing (or that the gate refuses) is said before minutes of work
    with repaired_copy(path, spec, workdir) as copy:
        before = run(BEFORE, path)
        after = run(AFTER, copy.path)
    after = replace(after, path=f"{path} (repaired: {', '.join(copy.changed)})")
    schemas = schemas_of(tool_entries(tools))
    rows = compare(before, after, schemas, calls, logs if server_log is not None else None)
    unchanged = _identity(path) == before_id
    return CounterfactualResult(path, copy, before, after, rows, unchanged, calls, logs, exchanges)


def _logged(dispatch: Callable[[str, dict[str, Any]], Any], sink: list[dict[str, Any]]) -> Callable[..., Any]:
    def run(name: str, arguments: dict[str, Any]) -> Any:
        entry: dict[str, Any] = {"tool": name, "arguments": arguments}
        sink.append(entry)
        result = dispatch(name, arguments)
        entry.update(result=str(getattr(result, "text", result)), is_error=bool(getattr(result, "is_error", False)))
        return result

    return run


LOG_TAIL_LIMIT = 1 << 20
"""Bytes of a server log read after a run: its own record of the calls, not a whole history."""


def _log_size(path: str | None) -> int:
    if path is None:
        return 0
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _log_lines(path: str, start: int) -> list[str]:
    """The lines ``path`` gained since it was ``start`` bytes long (a rotated or truncated log: from its start;
    a log not yet made: none)."""
    if not os.path.lexists(path):
        return []
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            end = f.tell()
            f.seek(start if end >= start else 0)
            data = f.read(LOG_TAIL_LIMIT)
    except OSError as exc:
        return [f"(the server log {path} could not be read: {exc.strerror or exc})"]
    return [line for line in data.decode("utf-8", "replace").splitlines() if line.strip()]


def tool_entries(tools: Sequence[Any] | None) -> list[dict[str, Any]]:
    """The OpenAI tools of the live conversation: the user's tools, else the canary's."""
    from gguftpl.templates import probes

    if tools:
        from gguftpl.verify.stages import _tool_specs
        from gguftpl.verify.tools import openai_tools

        return list(openai_tools(_tool_specs(tools)))
    return list(probes.canary_tools())


def schemas_of(entries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Tool name -> its parameters' JSON Schema."""
    out = {}
    for e in entries:
        fn = e.get("function")
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            params = fn.get("parameters")
            out[fn["name"]] = params if isinstance(params, dict) else {}
    return out


# ---------------------------------------------------------------------------------------------- the table


def compare(
    before: VerifyResult,
    after: VerifyResult,
    schemas: Mapping[str, Any],
    calls: Mapping[str, list[dict[str, Any]]] | None = None,
    server_log: Mapping[str, list[str]] | None = None,
) -> list[Row]:
    """One row per stage of :data:`ROWS`, read from the two reports (also from a recorded pair: ``--replay``)."""
    calls = calls or {}
    sides = {
        BEFORE: _cells(before, schemas, calls.get(BEFORE, []), None if server_log is None else server_log.get(BEFORE)),
        AFTER: _cells(after, schemas, calls.get(AFTER, []), None if server_log is None else server_log.get(AFTER)),
    }
    return [Row(name, sides[BEFORE][name], sides[AFTER][name]) for name in ROWS]


def _stage(result: VerifyResult, name: str) -> Stage | None:
    return next((s for s in result.stages if s.name == name), None)


def _cells(
    result: VerifyResult, schemas: Mapping[str, Any], calls: list[dict[str, Any]], log: list[str] | None
) -> dict[str, Cell]:
    from gguftpl.verify.live import STAGE_LIVE

    out: dict[str, Cell] = {}
    sel = _stage(result, STAGE_SELECTION)
    fallback = sel is not None and "fallback_text" in sel.data
    chosen = "built-in ChatML fallback" if fallback else str(result.template)
    out["template chosen"] = Cell(sel.status if sel else "skip", chosen)
    live = _stage(result, STAGE_LIVE)
    data = live.data if live is not None else {}
    schema = _stage(result, STAGE_SCHEMA)
    if live is not None and "tools_in_prompt" in data:
        present = bool(data["tools_in_prompt"])
        out["schema in prompt"] = Cell("pass" if present else "fail", "present" if present else "absent")
    else:
        ok = schema is not None and schema.status == "pass"
        out["schema in prompt"] = Cell(schema.status if schema else "skip", "present" if ok else "absent")
    out.update(_live_cells(data, schemas) if live is not None else _unreached("no live stage"))
    out["dispatched call"], out["server's own record"] = _dispatch_cells(data, calls, log)
    res = _stage(result, STAGE_RESULT)
    rendered = res is not None and res.status == "pass"
    out["tool result rendered"] = Cell(res.status if res else "skip", "yes" if rendered else "no")
    out["final answer uses result"] = _final_cell(data)
    return out


def _unreached(why: str) -> dict[str, Cell]:
    return {
        name: Cell("skip", why) for name in ("outcome", "raw output", "call shape", "parsed call", "valid arguments")
    }


def _one_line(text: str, limit: int = 160) -> str:
    from gguftpl.verify.result import excerpt

    return excerpt(" ".join(text.split()), limit=limit) or "(empty)"


def _live_cells(data: Mapping[str, Any], schemas: Mapping[str, Any]) -> dict[str, Cell]:
    outcome = str(data.get("outcome") or "?")
    ok = "pass" if outcome == "parsed_call" else "fail"
    out = {"outcome": Cell(ok, outcome), "raw output": Cell(ok, repr(_one_line(str(data.get("model_output") or ""))))}
    message = (data.get("generation") or {}).get("message") or {}
    parsed = list(message.get("tool_calls") or [])
    if parsed:
        out["call shape"] = Cell("pass", "tool_calls (parsed by llama.cpp)")
        fn = parsed[0].get("function") or {}
        name, args = str(fn.get("name") or ""), fn.get("arguments")
        out["parsed call"] = Cell("pass", f"{name}({_args_text(args)})")
        out["valid arguments"] = _valid_cell(schemas, name, args)
        return out
    shape = data.get("call_shape")
    out["call shape"] = Cell("fail", f"{shape} (not parsed)" if shape else "no call written")
    required = data.get("tool_choice_required") or {}
    req_calls = list(((required.get("generation") or {}).get("message") or {}).get("tool_calls") or [])
    if req_calls:
        fn = req_calls[0].get("function") or {}
        name, args = str(fn.get("name") or ""), fn.get("arguments")
        out["parsed call"] = Cell("fail", f"none; with tool_choice=required: {name}({_args_text(args)})")
        out["valid arguments"] = _valid_cell(schemas, name, args, "tool_choice=required's call: ")
    else:
        out["parsed call"] = Cell("fail", "none")
        out["valid arguments"] = _unparsed_args(data, schemas)
    return out


def _unparsed_args(data: Mapping[str, Any], schemas: Mapping[str, Any]) -> Cell:
    """The arguments of a call the model wrote but llama.cpp did not parse, judged as a call's would be (the
    call found again by :func:`gguftpl.verify.live.judge` in the recorded answer)."""
    from gguftpl.verify.live import Generation, judge

    gen = data.get("generation")
    message = gen.get("message") if isinstance(gen, dict) else None
    found = judge(Generation(dict(message) if isinstance(message, dict) else {}, None, None, 0.0), list(schemas)).found
    if found is None:
        return Cell("skip", "no call written")
    return _valid_cell(schemas, found.name, found.arguments, "the unparsed call's arguments: ")


def _args_text(args: Any) -> str:
    import json

    text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    return _one_line(text, 120)


def _valid_cell(schemas: Mapping[str, Any], name: str, args: Any, prefix: str = "") -> Cell:
    import json

    from gguftpl.verify.schema import validate_arguments

    if name not in schemas:
        return Cell("fail", f"{prefix}{name!r} is none of the tools offered")
    try:
        value = json.loads(args) if isinstance(args, str) else args
    except ValueError:
        return Cell("fail", f"{prefix}the arguments are not JSON")
    errors = validate_arguments(schemas[name], value)
    if errors:
        return Cell("fail", f"{prefix}invalid: " + "; ".join(errors[:3]))
    return Cell("pass", f"{prefix}valid against {name}'s JSON Schema")


def _dispatch_cells(data: Mapping[str, Any], calls: list[dict[str, Any]], log: list[str] | None) -> tuple[Cell, Cell]:
    if calls:
        first = calls[0]
        shown = f"{first['tool']}({_args_text(first['arguments'])})"
        if "result" in first:
            err = " (an error)" if first.get("is_error") else ""
            shown += f" -> {_one_line(str(first['result']), 100)!r}{err}"
        more = f" (+{len(calls) - 1} more)" if len(calls) > 1 else ""
        dispatched = Cell("pass", shown + more)
    elif data.get("dispatch"):
        dispatched = Cell("pass", f"-> {_one_line(str(data['dispatch'].get('result') or ''), 100)!r}")
    else:
        dispatched = Cell("skip", "no call dispatched" if data else "no live stage")
    if log is None:
        record = Cell("skip", "no server log given (--server-log)")
    elif not log:
        record = Cell("fail" if calls else "skip", "no call in the server's log")
    else:
        n = len(log)
        record = Cell("pass", f"{n} call{'s' if n != 1 else ''}: " + " | ".join(_one_line(x, 100) for x in log[:3]))
    return dispatched, record


def _final_cell(data: Mapping[str, Any]) -> Cell:
    final = data.get("final")
    if not final:
        return Cell("skip", "no second turn (no dispatched call)")
    text = str(((final.get("generation") or {}).get("message") or {}).get("content") or "")
    if final.get("uses_result"):
        return Cell("pass", f"yes: {_one_line(text, 120)!r}")
    return Cell("fail", f"no: {_one_line(text, 120)!r}")
