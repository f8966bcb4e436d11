"""``verify --live --counterfactual``, ``--record DIR`` and ``--replay DIR``: the options, and the thin calls of
:mod:`gguftpl.verify.counterfactual` and :mod:`gguftpl.verify.record` behind them."""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Callable
from dataclasses import replace
from typing import Any, NoReturn

import click

from gguftpl.cli.output import echo, echo_json, output_width
from gguftpl.errors import UsageError

KEYS = (
    "counterfactual",
    "cf_templates",
    "from_hub",
    "revision",
    "from_catalog",
    "only",
    "no_fallback",
    "accept_family",
    "server_log",
    "record",
    "record_overwrite",
    "replay",
)
_REPAIR_KEYS = ("cf_templates", "from_hub", "revision", "from_catalog", "only", "no_fallback", "accept_family")


def evidence_options(f: Callable[..., Any]) -> Callable[..., Any]:
    from gguftpl.cli.patch_cmd import upstream_options

    opts = [
        click.option(
            "--counterfactual",
            is_flag=True,
            help="--live: make the repaired copy as `patch` would (--from-hub, --from-catalog or --template; a "
            "temporary copy, removed after), run the same live conversation on both files and show one table, "
            "stage by stage, before | after.",
        ),
        click.option(
            "--template",
            "cf_templates",
            multiple=True,
            metavar="NAME=PATH",
            help="--counterfactual: the repair sets template NAME from a file.",
        ),
    ]
    tail = [
        click.option(
            "--server-log",
            metavar="FILE",
            help="--live with --mcp: a file your tool server appends its own record of calls to; the lines each "
            "run adds are shown (and recorded) as the server's own record.",
        ),
        click.option(
            "--record",
            metavar="DIR",
            help="--live: write the evidence (prompts, raw outputs, parser results, tool calls, versions, model "
            "sha256, command line) to DIR, a new or empty folder.",
        ),
        click.option("--record-overwrite", is_flag=True, help="--record: replace a DIR that is not empty."),
        click.option(
            "--replay",
            metavar="DIR",
            help="Judge a --record folder again without the model (no FILE) and print the same report.",
        ),
    ]
    for opt in reversed(tail):
        f = opt(f)
    f = upstream_options(f)
    for opt in reversed(opts):
        f = opt(f)
    return f


def pop_evidence_options(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {k: kwargs.pop(k) for k in KEYS}


def check_options(ev: dict[str, Any], live: bool, file: str | None) -> None:
    """Refuse combinations that make no sense, before any work."""
    if ev["replay"] is not None:
        if file is not None or live or ev["counterfactual"] or ev["record"]:
            raise UsageError("--replay DIR judges a record again: give no FILE, --live, --counterfactual or --record")
        return
    if file is None:
        raise UsageError("give FILE (or --replay DIR)")
    given = [k for k in _REPAIR_KEYS if ev[k]]
    if given and not ev["counterfactual"]:
        raise UsageError(
            f"--{given[0].replace('cf_templates', 'template').replace('_', '-')} goes with --counterfactual"
        )
    for key in ("counterfactual", "record", "server_log"):
        if ev[key] and not live:
            raise UsageError(f"--{key.replace('_', '-')} goes with --live")
    if ev["record_overwrite"] and not ev["record"]:
        raise UsageError("--record-overwrite goes with --record DIR")
    if ev["record"]:
        from gguftpl.verify.record import check_target

        check_target(ev["record"], ev["record_overwrite"])  # refused before minutes of work, not after


def repair_spec(ev: dict[str, Any]) -> Any:
    from gguftpl.cli.patch_cmd import upstream_source
    from gguftpl.cli.template_args import parse_template_args
    from gguftpl.verify.counterfactual import RepairSpec

    source = upstream_source(
        ev["from_hub"], ev["revision"], ev["from_catalog"], ev["no_fallback"], ev["cf_templates"], ev["accept_family"]
    )
    if source is None and ev["only"]:
        raise UsageError("--only goes with --from-hub/--from-catalog")
    return RepairSpec(source, parse_template_args(ev["cf_templates"]), tuple(ev["only"]))


def command_line() -> dict[str, Any]:
    """The command line, rebuilt from the options as parsed (every option not at its default), and as typed when
    this process is gguftpl's own."""
    ctx = click.get_current_context(silent=True)
    out: dict[str, Any] = {}
    if ctx is not None:
        out["argv"] = shlex.join(["gguftpl", ctx.info_name or "verify", *_given(ctx)])
    main = sys.argv[0] if sys.argv else ""
    if os.path.basename(main) == "gguftpl" or os.path.basename(os.path.dirname(main)) == "gguftpl":
        out["typed"] = shlex.join(["gguftpl", *sys.argv[1:]])
    return out


def _given(ctx: click.Context) -> list[str]:
    args: list[str] = []
    for p in ctx.command.params:
        value = ctx.params.get(p.name or "")
        if value in (None, False, ()) or value == p.default or p.expose_value is False:
            continue
        if isinstance(p, click.Argument):
            args.append(str(value))
            continue
        opt = max(p.opts, key=len)
        if isinstance(value, tuple | list):
            for v in value:
                args += [opt, str(v)]
        elif value is True:
            args.append(opt)
        else:
            args += [opt, str(value)]
    return args


def _logging(live: Any, sink: list[dict[str, Any]]) -> Any:
    from gguftpl.verify.counterfactual import _logged

    return replace(live, dispatch=_logged(live.dispatch, sink) if live.dispatch else None, exchanges=[])


# ---------------------------------------------------------------------------------------------- a live run


def recording_live(live: Any, ev: dict[str, Any]) -> tuple[Any, list[dict[str, Any]], int]:
    """``live`` with its requests and calls kept, for ``--record``; the calls' list and the server log's size."""
    from gguftpl.verify.counterfactual import _log_size

    calls: list[dict[str, Any]] = []
    return _logging(live, calls), calls, _log_size(ev["server_log"])


def record_live(file: str, live: Any, calls: list[dict[str, Any]], mark: int, result: Any, ev: dict[str, Any]) -> str:
    """Write the record of one live run; the folder."""
    from gguftpl.verify.counterfactual import _log_lines, tool_entries
    from gguftpl.verify.record import LIVE_SIDE, Record, Side, model_info, versions, write_record

    log = _log_lines(ev["server_log"], mark) if ev["server_log"] else None
    side = Side(result, list(live.exchanges or []), calls, log, model_info(file))
    record = Record("live", {LIVE_SIDE: side}, command_line(), versions(), tool_entries(ev.get("_tools")))
    return write_record(ev["record"], record, overwrite=ev["record_overwrite"])


# ---------------------------------------------------------------------------------------------- counterfactual


def run_counterfactual(file: str, live: Any, tools: Any, ev: dict[str, Any], fmt: str) -> NoReturn:
    from gguftpl.verify.counterfactual import AFTER, BEFORE, run_counterfactual, tool_entries
    from gguftpl.verify.record import Record, Side, model_info, versions, write_record

    spec = repair_spec(ev)
    recording = ev["record"] is not None
    models: dict[str, dict[str, Any]] = {}

    def on_side(side: str, _result: Any, path: str) -> None:
        if recording:  # hashed while the repaired copy still exists
            models[side] = model_info(path)
            if path != file:
                models[side]["note"] = "the temporary repaired copy, removed after the run"

    res = run_counterfactual(
        file,
        spec,
        live,
        tools=tools,
        workdir=_workdir(file),
        server_log=ev["server_log"],
        keep_exchanges=recording,
        on_side=on_side,
    )
    where = None
    if recording:
        results = {BEFORE: res.before, AFTER: res.after}
        sides = {
            k: Side(r, res.exchanges.get(k, []), res.calls.get(k, []), res.server_log.get(k), models.get(k, {}))
            for k, r in results.items()
        }
        repair = res.to_dict()["repair"] | {"input_unchanged": res.input_unchanged}
        record = Record("counterfactual", sides, command_line(), versions(), tool_entries(tools), repair)
        where = write_record(ev["record"], record, overwrite=ev["record_overwrite"])
    if fmt == "json":
        echo_json(res.to_dict() | ({"record": where} if where else {}))
    else:
        echo(counterfactual_text(res) + (f"\nrecorded: {where}" if where else ""), color=None)
    raise SystemExit(0 if res.ok else 1)


def _workdir(file: str) -> str | None:
    """TMPDIR for a model in a store (its folders are never written), else None: beside the input."""
    import tempfile

    from gguftpl.cli.modelarg import store_model

    return tempfile.gettempdir() if store_model(file) is not None else None


def counterfactual_text(res: Any) -> str:
    from gguftpl.safeio import printable

    head = f"{printable(res.path)}: the same weights before and after the repair (llama.cpp, real weights)"
    return "\n".join([head, *_table_lines(res.rows, res.to_dict()["repair"], res.input_unchanged)])


def _table_lines(rows: Any, repair: dict[str, Any], unchanged: Any) -> list[str]:
    """The repair, the table, the input's state and the verdict: the live run's and its replay's alike."""
    from gguftpl.safeio import printable
    from gguftpl.verify.cftable import table_text

    how = printable(str(repair.get("how") or "from the template files given"))
    changed = ", ".join(str(x) for x in repair.get("changed") or [])
    state = "unchanged" if unchanged else "CHANGED during the run"
    return [
        f"repair: {how}; sets {changed} in a temporary copy ({repair.get('copy_method')}; tensor data "
        f"{repair.get('proof_method')}), removed after",
        table_text(rows, output_width()),
        f"input: {state} (its stat before and after)",
        verdict_line(rows),
    ]


def verdict_line(rows: Any) -> str:
    by = {r.stage: r for r in rows}

    def side(k: str) -> str:
        schema = getattr(by["schema in prompt"], k).text
        outcome = getattr(by["outcome"], k).text
        shape = getattr(by["call shape"], k).text
        return f"schema {schema}, {outcome} ({shape})"

    return f"verdict: before: {side('before')}; after: {side('after')}"


# ---------------------------------------------------------------------------------------------- replay


def run_replay(folder: str, fmt: str, stages_text: Callable[[Any], str]) -> NoReturn:
    from gguftpl.verify.counterfactual import BEFORE, compare, schemas_of
    from gguftpl.verify.record import replay

    rep = replay(folder)
    rec = rep.record
    if fmt == "json":
        echo_json(rep.to_dict())
        raise SystemExit(0 if rep.same and all(r.ok for r in rep.results.values()) else 1)
    v = rec.versions
    head = (
        f"replay of {folder}: recorded {rec.created or '?'} by gguftpl {v.get('gguftpl', '?')}, xllamacpp "
        f"{v.get('xllamacpp', '?')}; judged again without the model"
    )
    lines = [head]
    if rec.kind == "counterfactual":
        calls = {k: s.calls for k, s in rec.sides.items()}
        logs = {k: s.server_log or [] for k, s in rec.sides.items()}
        with_log = any(s.server_log is not None for s in rec.sides.values())
        rows = compare(
            rep.results[BEFORE], rep.results["after"], schemas_of(rec.tools), calls, logs if with_log else None
        )
        repair = rec.repair or {}
        lines += _table_lines(rows, repair, repair.get("input_unchanged"))
        ok = rep.results["after"].ok
    else:
        (result,) = rep.results.values()
        lines.append(stages_text(result))
        ok = result.ok
    same = [f"{x.side} {x.answer}: {x.replayed}" for x in rep.verdicts if x.same]
    differ = [f"{x.side} {x.answer}: recorded {x.recorded}, replayed {x.replayed}" for x in rep.verdicts if not x.same]
    if differ:
        lines.append("replay: the verdicts DIFFER from the recorded ones: " + "; ".join(differ))
    else:
        lines.append("replay: every verdict is the recorded one (" + "; ".join(same) + ")")
    echo("\n".join(lines), color=None)
    raise SystemExit(0 if ok and not differ else 1)
