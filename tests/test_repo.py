"""Repo-level checks: every quant of a Hub repo (headers read remotely from tests/hubserver.py) or of a
local folder, compared with each other and with upstream."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gguftpl.audit import AuditOptions
from gguftpl.errors import HubError
from gguftpl.gguf.reader import read_header
from gguftpl.repo.audit import RepoAudit, audit_hub_repo, audit_local_dir, bench_remote_audit
from gguftpl.repo.facts import RepoFacts, UpstreamFacts, check_repo
from tests.conftest import CHATML
from tests.hubserver import HubServer

TOOL_USE = (
    "{% if tools %}<|im_start|>system\nTools: <tools>{{ tools | tojson }}</tools><|im_end|>\n{% endif %}" + CHATML
)
QUANTS = ["Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0"]


@pytest.fixture
def quant_dir(tmp_path: Path, make_gguf: Callable[..., Path]) -> Callable[..., Path]:
    """Build a folder of quants: ``quant_dir({"Q4_K_M": {...build_gguf kwargs...}, ...})``."""

    def build(spec: dict[str, dict[str, Any]], folder: str = "out") -> Path:
        out = tmp_path / folder
        out.mkdir(exist_ok=True)
        for q, kwargs in spec.items():
            kwargs.setdefault("tensors", False)
            make_gguf(f"{folder}/model-{q}.gguf", **kwargs)
        return out

    return build


def publish(hub: HubServer, repo: str, folder: Path) -> str:
    sha = ""
    for p in sorted(folder.rglob("*.gguf")):
        sha = hub.add_file(repo, p.relative_to(folder).as_posix(), p)
    return sha


def codes(ra: RepoAudit, prefix: str = "GT55") -> list[tuple[str, str]]:
    return sorted((f.code, f.location.file) for f in ra.findings if f.code.startswith(prefix))


def both_templates() -> dict[str, str]:
    return {"default": CHATML, "tool_use": TOOL_USE}


# ------------------------------------------------------------------------------------------ hub repos


def test_hub_repo_quant_missing_tool_use(hub: HubServer, quant_dir: Callable[..., Path]) -> None:
    folder = quant_dir({q: {"templates": both_templates() if q != "Q6_K" else {"default": CHATML}} for q in QUANTS})
    sha = publish(hub, "conv/Model-GGUF", folder)
    ra = audit_hub_repo("conv/Model-GGUF", upstream=False)

    assert ra.revision == sha and ra.target == f"hf://conv/Model-GGUF@{sha}"
    odd = f"hf://conv/Model-GGUF/model-Q6_K.gguf@{sha}"
    assert codes(ra) == [("GT550", odd)]
    (f,) = ra.findings
    assert f.template == "tool_use" and f.location.key == "tokenizer.chat_template.tool_use"
    assert f.extra["carried_by"] == [f"model-{q}.gguf" for q in QUANTS if q != "Q6_K"]
    # the finding is in that file's audit, and the run has one entry per file plus the repo itself
    paths = [fa.path for fa in ra.run.files]
    assert paths == [f"hf://conv/Model-GGUF/model-{q}.gguf@{sha}" for q in sorted(QUANTS)] + [ra.target]
    by_path = {fa.path: fa for fa in ra.run.files}
    assert "GT550" in [x.code for x in by_path[odd].findings]
    assert ra.exit_code("error") == 1

    # bytes and requests per file are what the server log says was sent for that file
    for e in ra.entries:
        served = [r for r in hub.log if r.path.endswith("/" + e.name)]
        assert e.remote is not None
        assert e.remote["bytes_fetched"] == sum(r.bytes_sent for r in served)
        assert e.remote["requests"] == len(served)
        assert e.remote["revision"] == sha
    api = [r.path for r in hub.log if r.path.startswith("/api/")]
    # two listing calls: resolve the revision, then the tree at that commit (so all headers share it)
    assert [p.split("?")[0] for p in api] == [
        "/api/models/conv/Model-GGUF/revision/main",
        f"/api/models/conv/Model-GGUF/tree/{sha}",
    ]

    report = ra.to_dict()
    json.dumps(report)  # serialisable
    assert report["repo"]["files"][0]["remote"]["bytes_fetched"] > 0
    assert report["repo"]["bytes_fetched"] == sum(r.bytes_sent for r in hub.log if "/resolve/" in r.path)
    assert {fd["path"]: fd.get("remote", {}).get("revision") for fd in report["files"]}[odd] == sha


def test_consistent_repo_has_no_repo_findings(hub: HubServer, quant_dir: Callable[..., Path]) -> None:
    publish(hub, "conv/Ok-GGUF", quant_dir({q: {"templates": both_templates()} for q in QUANTS}))
    ra = audit_hub_repo("conv/Ok-GGUF", upstream=False)
    assert codes(ra) == []
    assert len(ra.entries) == 4 and all(e.group == ra.entries[0].group for e in ra.entries)


def test_concurrency_gives_the_same_report(hub: HubServer, quant_dir: Callable[..., Path]) -> None:
    spec = {f"Q{i}": {"templates": both_templates() if i % 3 else {"default": CHATML}} for i in range(8)}
    publish(hub, "conv/Many-GGUF", quant_dir(spec))
    seen: list[tuple[int, int, str]] = []
    serial = audit_hub_repo("conv/Many-GGUF", jobs=1, upstream=False)
    parallel = audit_hub_repo("conv/Many-GGUF", jobs=4, upstream=False, progress=lambda d, t, n: seen.append((d, t, n)))
    assert [(f.code, f.message) for f in serial.findings] == [(f.code, f.message) for f in parallel.findings]
    assert len(codes(parallel)) == 3  # Q0, Q3, Q6 lack tool_use
    assert [d for d, _, _ in seen] == list(range(1, 9)) and {t for _, t, _ in seen} == {8}
    assert parallel.jobs == 4 and serial.requests == parallel.requests


def test_template_and_special_token_drift(hub: HubServer, quant_dir: Callable[..., Path]) -> None:
    changed = CHATML.replace("'\\n'", "'\\n\\n'")
    assert changed != CHATML
    spec: dict[str, dict[str, Any]] = {q: {"templates": both_templates()} for q in QUANTS}
    spec["Q8_0"] = {"templates": {"default": changed, "tool_use": TOOL_USE}}
    spec["Q4_K_M"] = {"templates": both_templates(), "eos": "<tool_call>"}
    sha = publish(hub, "conv/Drift-GGUF", quant_dir(spec))
    ra = audit_hub_repo("conv/Drift-GGUF", upstream=False)
    assert codes(ra) == [
        ("GT551", f"hf://conv/Drift-GGUF/model-Q8_0.gguf@{sha}"),
        ("GT552", f"hf://conv/Drift-GGUF/model-Q4_K_M.gguf@{sha}"),
    ]
    differs = next(f for f in ra.findings if f.code == "GT551")
    assert differs.template == "default"
    assert "-" in differs.evidence and "+" in differs.evidence and "model-Q8_0.gguf" in differs.evidence
    special = next(f for f in ra.findings if f.code == "GT552")
    assert "eos" in special.message and "<tool_call>" in special.message and "<|im_end|>" in special.message


def test_server_ignoring_range_in_a_repo(hub: HubServer, quant_dir: Callable[..., Path]) -> None:
    spec = {q: {"templates": both_templates() if q != "Q5_K_M" else {"default": CHATML}} for q in QUANTS}
    sha = publish(hub, "conv/NoRange-GGUF", quant_dir(spec))
    hub.ignore_range = True
    ra = audit_hub_repo("conv/NoRange-GGUF", upstream=False)
    assert codes(ra) == [("GT550", f"hf://conv/NoRange-GGUF/model-Q5_K_M.gguf@{sha}")]
    assert all(e.remote and e.remote["range_ignored"] for e in ra.entries)


def test_split_sets_read_first_shard_and_report_missing_shards(hub: HubServer, make_gguf: Any) -> None:
    first = make_gguf("big-00001-of-00003.gguf", templates=both_templates(), extra_kv={"split.count": 3})
    third = make_gguf("big-00003-of-00003.gguf", extra_kv={"split.no": 2, "split.count": 3})
    whole = make_gguf("small.gguf", templates=both_templates())
    for p in (first, third, whole):
        sha = hub.add_file("conv/Split-GGUF", p.name, p)
    ra = audit_hub_repo("conv/Split-GGUF", upstream=False)
    assert codes(ra) == [("GT555", f"hf://conv/Split-GGUF@{sha}")]
    (f,) = ra.findings
    assert f.extra["missing"] == [2]
    read = {r.path.rsplit("/", 1)[-1] for r in hub.log if "/resolve/" in r.path}
    assert read == {first.name, whole.name}  # the metadata-less later shard is never fetched
    skipped = [e for e in ra.entries if e.skipped]
    assert [e.name for e in skipped] == [third.name]


def test_other_models_are_grouped_apart(hub: HubServer, quant_dir: Callable[..., Path], make_gguf: Any) -> None:
    folder = quant_dir({q: {"templates": both_templates()} for q in ("Q4_K_M", "Q8_0")})
    make_gguf("out/mmproj-model-f16.gguf", tensors=False, extra_kv={"general.architecture": "clip"})
    sha = publish(hub, "conv/Vision-GGUF", folder)
    ra = audit_hub_repo("conv/Vision-GGUF", upstream=False)
    # the projector carries no template, and is not a quant of the chat model: no GT550 for it
    assert codes(ra) == [("GT556", f"hf://conv/Vision-GGUF@{sha}")]
    groups = ra.repo_dict()["groups"]
    assert sorted(groups.values()) == [1, 2]


def test_hub_errors(hub: HubServer, quant_dir: Callable[..., Path], monkeypatch: pytest.MonkeyPatch) -> None:
    publish(hub, "conv/E-GGUF", quant_dir({"Q4_0": {"templates": {"default": CHATML}}}))
    with pytest.raises(HubError, match="repository conv/Nope not found"):
        audit_hub_repo("conv/Nope")
    with pytest.raises(HubError, match="revision 'v7' not found"):
        audit_hub_repo("conv/E-GGUF@v7")
    hub.set_gated("conv/E-GGUF")
    with pytest.raises(HubError, match="gated"):
        audit_hub_repo("conv/E-GGUF")
    hub.set_gated("conv/E-GGUF", False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    hub.clear_log()
    with pytest.raises(HubError, match="HF_HUB_OFFLINE"):
        audit_hub_repo("conv/E-GGUF")
    assert hub.log == []


def test_a_file_dropping_mid_repo_fails_the_run(hub: HubServer, quant_dir: Callable[..., Path]) -> None:
    publish(hub, "conv/D-GGUF", quant_dir({q: {"templates": both_templates()} for q in QUANTS}))
    hub.drop_after_bytes = 64
    with pytest.raises(HubError, match="connection dropped"):
        audit_hub_repo("conv/D-GGUF", upstream=False, retries=0)


# ------------------------------------------------------------------------------------------ upstream


def test_upstream_drift_when_all_quants_lost_tool_use(
    hub: HubServer, quant_dir: Callable[..., Path], tmp_path: Path
) -> None:
    config = {"chat_template": [{"name": "default", "template": CHATML}, {"name": "tool_use", "template": TOOL_USE}]}
    base_sha = hub.add_repo("org/Base", {"tokenizer_config.json": json.dumps(config)})
    prov = {"general.source.huggingface.repository": "org/Base"}
    spec = {q: {"templates": {"default": CHATML}, "extra_kv": dict(prov)} for q in QUANTS}
    sha = publish(hub, "conv/Base-GGUF", quant_dir(spec))
    ra = audit_hub_repo("conv/Base-GGUF", cache_dir=tmp_path / "hf-cache")
    assert codes(ra) == [("GT553", f"hf://conv/Base-GGUF@{sha}")]
    (f,) = ra.findings
    assert f.extra["missing"] == ["tool_use"] and f.extra["differing"] == []
    assert f.severity.value == "error"  # upstream ships tool_use and no quant has it: the Hermes failure
    assert f.extra["upstream"] == "org/Base" and f.extra["upstream_revision"] == base_sha
    assert ra.upstream is not None
    assert [g["status"] for g in ra.upstream["groups"].values()] == ["checked"]


def test_upstream_prefers_upstream_version_on_a_tie(quant_dir: Callable[..., Path]) -> None:
    changed = CHATML + "{# edited #}"
    folder = quant_dir({"A": {"templates": {"default": changed}}, "B": {"templates": {"default": CHATML}}})
    ra = audit_local_dir(folder, upstream=False)
    # without upstream a tie goes to the first file, so B is the odd one
    assert [f.location.file for f in ra.findings if f.code == "GT551"] == [str(folder / "model-B.gguf")]
    from gguftpl.repo.facts import QuantEntry

    entries = [e for e in ra.entries]
    assert all(isinstance(e, QuantEntry) for e in entries)
    group = entries[0].group
    assert group is not None
    upstream = UpstreamFacts("org/Base", "given with --upstream", "checked", templates={"default": CHATML})
    found = check_repo(RepoFacts(str(folder), tuple(entries), {group: upstream}))
    assert [f.location.file for f in found if f.code == "GT551"] == [str(folder / "model-A.gguf")]


def test_unreachable_upstream_is_an_info_note(hub: HubServer, quant_dir: Callable[..., Path], tmp_path: Path) -> None:
    prov = {"general.source.huggingface.repository": "org/Gone"}
    spec = {q: {"templates": {"default": CHATML}, "extra_kv": dict(prov)} for q in ("Q4_0", "Q8_0")}
    sha = publish(hub, "conv/Gone-GGUF", quant_dir(spec))
    ra = audit_hub_repo("conv/Gone-GGUF", cache_dir=tmp_path / "hf-cache")
    assert codes(ra) == [("GT554", f"hf://conv/Gone-GGUF@{sha}")]
    assert ra.findings[0].severity.value == "info" and "org/Gone" in ra.findings[0].message


# ------------------------------------------------------------------------------------------ local folders


def test_local_folder_gets_the_same_checks(quant_dir: Callable[..., Path]) -> None:
    spec = {q: {"templates": both_templates() if q != "Q8_0" else {"default": CHATML}} for q in QUANTS}
    folder = quant_dir(spec)
    ra = audit_local_dir(folder, upstream=False)
    assert codes(ra) == [("GT550", str(folder / "model-Q8_0.gguf"))]
    assert ra.kind == "dir" and ra.target == str(folder) and ra.bytes_fetched == 0
    # same verdict through the Hub path for the same files
    assert [e.name for e in ra.entries] == [f"model-{q}.gguf" for q in sorted(QUANTS)]


def test_local_folder_unreadable_file_is_reported_not_fatal(quant_dir: Callable[..., Path]) -> None:
    folder = quant_dir({q: {"templates": both_templates()} for q in ("Q4_0", "Q8_0")})
    (folder / "broken.gguf").write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 8)
    ra = audit_local_dir(folder, upstream=False)
    by_path = {fa.path: fa for fa in ra.run.files}
    assert [f.code for f in by_path[str(folder / "broken.gguf")].findings] == ["GT001"]
    assert codes(ra) == []


def test_select_and_ignore_apply_to_repo_rules(quant_dir: Callable[..., Path]) -> None:
    folder = quant_dir({"A": {"templates": both_templates()}, "B": {"templates": {"default": CHATML}}})
    assert codes(audit_local_dir(folder, upstream=False, options=AuditOptions(ignore="GT550"))) == []
    ra = audit_local_dir(folder, upstream=False, options=AuditOptions(select="GT55"))
    assert codes(ra) == [("GT550", str(folder / "model-B.gguf"))]
    assert all(f.code.startswith("GT55") for f in ra.run.findings)


# ------------------------------------------------------------------------------------------ bench helper


def test_bench_remote_audit_counts_match_the_server(hub: HubServer, make_gguf: Any) -> None:
    p = make_gguf("m.gguf", templates=both_templates())
    hub.add_file("org/m", "m.gguf", p)
    nbytes, nreq = bench_remote_audit("hf://org/m/m.gguf")
    served = [r for r in hub.log if "/resolve/" in r.path]
    assert (nbytes, nreq) == (sum(r.bytes_sent for r in served), len(served))
    assert nbytes == p.stat().st_size  # a tiny file is read whole in the first range
    assert read_header(p).tensor_info_end <= nbytes


# ------------------------------------------------------------------------------------------ one report


def test_audit_targets_mixes_local_remote_and_repo(
    hub: HubServer, quant_dir: Callable[..., Path], make_gguf: Any
) -> None:
    import jsonschema

    from gguftpl.cli.output import StderrProgress
    from gguftpl.repo.audit import audit_targets

    spec = {q: {"templates": both_templates() if q != "Q6_K" else {"default": CHATML}} for q in QUANTS}
    sha = publish(hub, "conv/Mix-GGUF", quant_dir(spec))
    single = make_gguf("single.gguf", templates={"default": CHATML})
    hub.add_file("org/one", "one.gguf", single)
    ta = audit_targets(
        [str(single), "hf://org/one/one.gguf"],
        repos=["conv/Mix-GGUF"],
        upstream=False,
        progress=StderrProgress("audit"),
    )
    labels = [fa.path for fa in ta.run.files]
    one_sha = hub.commit_sha("org/one")
    assert labels[:2] == [str(single), f"hf://org/one/one.gguf@{one_sha}"]
    assert labels[-1] == f"hf://conv/Mix-GGUF@{sha}"
    assert len(labels) == 2 + len(QUANTS) + 1

    report = json.loads(ta.format("json"))
    files = {fd["path"]: fd for fd in report["files"]}
    assert "remote" not in files[str(single)]
    assert files[f"hf://org/one/one.gguf@{one_sha}"]["remote"]["revision"] == one_sha
    assert [r["target"] for r in report["repos"]] == [f"hf://conv/Mix-GGUF@{sha}"]
    assert report["remote"]["files"] == 1 + len(QUANTS)
    assert report["remote"]["bytes_fetched"] == sum(r.bytes_sent for r in hub.log if "/resolve/" in r.path)
    gt550 = [f for fd in report["files"] for f in fd["findings"] if f["code"] == "GT550"]
    assert [f["location"]["file"] for f in gt550] == [f"hf://conv/Mix-GGUF/model-Q6_K.gguf@{sha}"]

    schema = json.loads((Path(__file__).parent / "data" / "sarif-schema-2.1.0.json").read_text())
    sarif = json.loads(ta.format("sarif"))
    jsonschema.validators.validator_for(schema)(schema).validate(sarif)
    rule_ids = {r["ruleId"] for r in sarif["runs"][0]["results"]}
    assert "GT550" in rule_ids
    text = ta.format("text")
    assert "GT550" in text and f"remote: {1 + len(QUANTS)} header(s) read over HTTP" in text


def test_audit_targets_repo_check_on_a_folder(quant_dir: Callable[..., Path]) -> None:
    from gguftpl.repo.audit import audit_targets

    folder = quant_dir({"A": {"templates": both_templates()}, "B": {"templates": {"default": CHATML}}})
    plain = audit_targets([str(folder)], upstream=False)
    checked = audit_targets([str(folder)], repo_check=True, upstream=False)
    assert not [f for f in plain.run.findings if f.code.startswith("GT55")]
    assert [(f.code, f.location.file) for f in checked.run.findings if f.code.startswith("GT55")] == [
        ("GT550", str(folder / "model-B.gguf"))
    ]
    assert checked.exit_code("error") == 1


def test_terminal_progress_only_on_a_tty(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bar (tqdm) with the current file when stderr is a terminal, not a byte otherwise (the real-pty
    version of this, through the CLI: tests/test_progress.py)."""
    import io

    from gguftpl.cli.output import StderrProgress

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    quiet, tty = io.StringIO(), Tty()
    for stream in (quiet, tty):
        monkeypatch.setattr(sys, "stderr", stream)
        with StderrProgress("audit") as p:
            for i in range(1, 4):
                p(i, 3, f"q{i}.gguf")
    assert quiet.getvalue() == ""
    out = tty.getvalue()
    assert "3/3" in out and "q3.gguf" in out and out.count("\r") >= 4


def test_a_final_newline_is_not_a_different_template(quant_dir: Callable[..., Path]) -> None:
    folder = quant_dir(
        {
            "A": {"templates": {"default": CHATML}},
            "B": {"templates": {"default": CHATML + "\n"}},  # as read from a chat_template.jinja file
            "C": {"templates": {"default": " " + CHATML}},  # a leading space is rendered: a real difference
        }
    )
    ra = audit_local_dir(folder, upstream=False)
    assert codes(ra) == [("GT551", str(folder / "model-C.gguf"))]


def test_repo_file_specs_for_inspect(hub: HubServer, make_gguf: Any) -> None:
    from gguftpl.gguf.remote import repo_file_specs

    files = {
        "a-00001-of-00002.gguf": make_gguf("a1.gguf", extra_kv={"split.count": 2}),
        "a-00002-of-00002.gguf": make_gguf("a2.gguf", extra_kv={"split.no": 1, "split.count": 2}),
        "sub/b.gguf": make_gguf("b.gguf"),
    }
    for rel, p in files.items():
        sha = hub.add_file("org/r", rel, p)
    hub.add_repo("org/r", {"README.md": "not a gguf"}, revision="v2")
    assert repo_file_specs("org/r") == [f"hf://org/r/a-00001-of-00002.gguf@{sha}", f"hf://org/r/sub/b.gguf@{sha}"]
    assert repo_file_specs("org/r@v2") == []


def test_hub_repo_with_a_broken_quant(hub: HubServer, quant_dir: Callable[..., Path]) -> None:
    folder = quant_dir({q: {"templates": both_templates()} for q in ("Q4_0", "Q8_0")})
    (folder / "model-Q2_K.gguf").write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 16)
    sha = publish(hub, "conv/Broken-GGUF", folder)
    ra = audit_hub_repo("conv/Broken-GGUF", upstream=False)
    broken = f"hf://conv/Broken-GGUF/model-Q2_K.gguf@{sha}"
    by_path = {fa.path: fa for fa in ra.run.files}
    assert [f.code for f in by_path[broken].findings] == ["GT001"]
    assert codes(ra) == []  # the two readable quants agree; the broken one is not "missing" anything
    assert ra.exit_code("error") == 2  # the broken quant is bad input: the others are reported, then exit 2


def test_read_ahead_is_bounded() -> None:
    import threading

    from gguftpl.repo.audit import _ahead
    from gguftpl.repo.facts import QuantEntry

    started: list[int] = []
    consumed: list[int] = []
    gate = threading.Event()
    lock = threading.Lock()

    def fn(e: QuantEntry) -> int:
        n = int(e.name)
        with lock:
            started.append(n)
        if n == 0:
            gate.wait(10)  # the first file is slow: the others must not all start meanwhile
        return n

    items = [QuantEntry(label=str(i), name=str(i)) for i in range(20)]
    most_ahead = 0
    for e, fut in _ahead(fn, items, jobs=3):
        if e.name == "0":
            gate.set()
        consumed.append(fut.result())
        with lock:
            most_ahead = max(most_ahead, len(started) - len(consumed))
    assert consumed == list(range(20))  # in order
    assert most_ahead <= 2 * 3


def test_auditing_a_later_shard_reads_the_first(hub: HubServer, make_gguf: Any) -> None:
    from gguftpl.repo.audit import audit_targets

    first = make_gguf("s-00001-of-00002.gguf", templates={"default": CHATML}, extra_kv={"split.count": 2})
    second = make_gguf("s-00002-of-00002.gguf", extra_kv={"split.no": 1, "split.count": 2})
    for p in (first, second):
        sha = hub.add_file("org/s", p.name, p)
    ta = audit_targets(["hf://org/s/s-00002-of-00002.gguf"])
    (fa,) = ta.run.files
    assert fa.path == f"hf://org/s/{first.name}@{sha}"
    (info,) = ta.remote.values()
    assert info["shard"] == {"number": 2, "count": 2, "first": first.name}
    text = ta.format("text")
    assert f"note: {fa.path}: s-00002-of-00002.gguf is shard 2 of 2" in text and "first shard" in text
    assert {r.path.rsplit("/", 1)[-1] for r in hub.log if "/resolve/" in r.path} == {first.name}
