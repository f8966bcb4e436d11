"""Patch every GGUF of a converter's output folder at once (``gguftpl patch DIR… --in-place | -o OUTDIR``).

One plan for every file: the upstream is resolved once (a Hub repo is fetched once; a catalog entry is
matched once per conversion), a ``--tools-in-default`` proof is rendered once per conversion, and the audits
share one in-memory cache. Each file then goes through the one-file pipeline (``gguftpl.patching``): the
gate before writing, an atomic write with its byte proof (a reflink where the filesystem has them), the
read-back and the audit after. The writes run in ``jobs`` threads (they wait on the disk); planning and the
audits stay in the calling thread.

A split set (``NAME-00001-of-0000N.gguf``) is patched as a set: the shard that carries the metadata is
rewritten, the others are proven unchanged (``--in-place``: the same inode, size and mtime after as before;
``-o``: copied, shared or compared byte for byte). A file that fails is reported and the others still get
done; a file that already has the planned templates is skipped ("already patched"), so a run interrupted
part way is finished by running it again. Last, the folder-level checks (GT55x) run on the result.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gguftpl.errors import GGUFFormatError, GGUFTplError, UsageError
from gguftpl.gguf.shards import shard_info
from gguftpl.patching import PatchOptions

if TYPE_CHECKING:
    from gguftpl.findings import Finding
    from gguftpl.patching import PatchResult
    from gguftpl.patchplan import PatchPlan
    from gguftpl.upstream.resolve import UpstreamSource

__all__ = ["FolderFile", "FolderPatch", "default_jobs", "patch_folder"]

PATCHED = "patched"
ALREADY = "already patched"
UNCHANGED = "unchanged"
"""A later shard of a set patched in place: not written, proven by its inode, size and mtime."""
COPIED = "copied"
"""A file written unchanged to OUTDIR: a later shard, or one already patched, proven identical."""
FAILED = "failed"

FileDone = Callable[["FolderFile"], None]


def default_jobs() -> int:
    """Writes in flight: one per core, at most 4 (more only queue on the same disk)."""
    return max(1, min(4, os.cpu_count() or 1))


@dataclass(frozen=True)
class FolderFile:
    """What the folder patch did to one file."""

    path: str
    """The input file."""
    name: str
    """Its path under the folder given (how the table names it)."""
    status: str
    """``patched``, ``already patched``, ``unchanged`` (a later shard, in place), ``copied`` or ``failed``."""
    output: str | None = None
    """The file written (None when nothing was)."""
    changes: tuple[str, ...] = ()
    """``add tool_use``, ``replace default``: the template changes written."""
    proof: str = ""
    """How the output was proven (``reflink (FICLONERANGE), shared extents``; ``not written: …``)."""
    before: dict[str, int] | None = None
    """Findings of the input by severity (None when not audited)."""
    after: dict[str, int] | None = None
    """Findings of the output by severity."""
    error: str | None = None
    """Why it failed."""
    set_of: str | None = None
    """The first shard's name, for a file of a split set."""
    result: PatchResult | None = field(default=None, repr=False, compare=False)
    """The one-file pipeline's result, for a file patched."""

    @property
    def ok(self) -> bool:
        return self.status != FAILED


@dataclass
class FolderPatch:
    """The result of ``patch_folder``: one entry per GGUF found, then the folder checks on the result."""

    folders: tuple[str, ...]
    output_folders: tuple[str, ...]
    """Where the result is: the folders themselves (in place) or under OUTDIR."""
    files: list[FolderFile] = field(default_factory=list)
    checks: list[Finding] = field(default_factory=list)
    """GT55x findings of the result (``audit --repo-check`` on each output folder)."""
    how_found: str = ""
    """How the upstream was chosen (empty for ``--template``)."""
    warnings: list[str] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for f in self.files if f.status == status)

    @property
    def failed(self) -> list[FolderFile]:
        return [f for f in self.files if f.status == FAILED]

    @property
    def nothing_changed(self) -> bool:
        return not any(f.status == PATCHED for f in self.files)

    def exit_code(self) -> int:
        """1 when a file failed or the folder checks found an error, else 0."""
        from gguftpl.findings import Severity

        return int(bool(self.failed) or any(f.severity is Severity.ERROR for f in self.checks))


@dataclass
class _Unit:
    """One file to patch (a whole file, or a set's metadata shard) and the other shards of its set."""

    path: str
    name: str
    out: str
    shards: list[tuple[str, str, str]] = field(default_factory=list)
    """(path, name, output) of the other files of its split set."""


# --------------------------------------------------------------------------------------------- finding files


def _discover(folders: Sequence[str], out_dir: str | None) -> tuple[list[_Unit], list[str]]:
    """Every GGUF under the folders, split sets grouped (the shard that carries the metadata first); and the
    output folders."""
    names = [os.path.basename(os.path.normpath(f)) for f in folders]
    if out_dir is not None and len(set(names)) < len(names):
        raise UsageError("-o OUTDIR: two folders of the same name would write to one place; patch them apart")
    units: list[_Unit] = []
    outs: list[str] = []
    skip = os.path.realpath(out_dir) if out_dir is not None else None
    for folder, base in zip(folders, names, strict=True):
        if not os.path.isdir(folder):
            raise UsageError(f"not a directory: {folder}")
        target = folder if out_dir is None else (out_dir if len(folders) == 1 else os.path.join(out_dir, base))
        outs.append(target)
        found = _ggufs(folder, skip)
        if not found:
            raise UsageError(f"no GGUF files (*.gguf) in {folder}")
        units += _group(folder, target, found)
    return units, outs


def _ggufs(folder: str, skip: str | None) -> list[str]:
    out: list[str] = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if os.path.realpath(os.path.join(root, d)) != skip)
        out += [os.path.relpath(os.path.join(root, f), folder) for f in sorted(files) if f.lower().endswith(".gguf")]
    return sorted(out)


def _group(folder: str, target: str, rels: list[str]) -> list[_Unit]:
    sets: dict[str, list[str]] = {}
    for rel in rels:
        info = shard_info(rel.replace(os.sep, "/"))
        sets.setdefault(info.first if info is not None else rel, []).append(rel)
    units = []
    for members in sets.values():
        carrier = _carrier(folder, members)
        others = [m for m in members if m != carrier]
        units.append(
            _Unit(
                os.path.join(folder, carrier),
                carrier,
                os.path.join(target, carrier),
                [(os.path.join(folder, m), m, os.path.join(target, m)) for m in others],
            )
        )
    return units


def _carrier(folder: str, members: list[str]) -> str:
    """The shard that carries the templates and the tokenizer (shard 1 as gguf-split writes them); the
    first readable one that has ``tokenizer.*`` keys, else the first."""
    if len(members) == 1:
        return members[0]
    from gguftpl.gguf.reader import read_header

    for m in members:
        try:
            with read_header(os.path.join(folder, m)) as h:
                if any(k.startswith("tokenizer.") for k in h.kv):
                    return m
        except (GGUFFormatError, OSError):
            continue
    return members[0]


# --------------------------------------------------------------------------------------------- planning


class _Planner:
    """Plans each file against one source: the upstream resolved once (per conversion for a catalog match,
    whose family check reads the file's vocabulary), ``--tools-in-default`` proven once per conversion."""

    def __init__(
        self,
        source: UpstreamSource | None,
        texts: Mapping[str, str],
        remove: Sequence[str],
        template_files: Mapping[str, str] | None,
        only: Sequence[str] | None,
        tools_in_default: bool,
        accept_differences: bool,
        provenance: bool,
    ) -> None:
        self.source, self.texts, self.remove, self.files = source, dict(texts), list(remove), template_files
        self.only, self.tools, self.accept, self.provenance = only, tools_in_default, accept_differences, provenance
        self.resolved: dict[Any, Any] = {}
        self.made: dict[Any, Any] = {}
        self.how_found = ""
        self.warnings: list[str] = []

    def resolve(self, tset: Any, source: UpstreamSource) -> Any:
        from dataclasses import replace

        from gguftpl.upstream.resolve import resolve_upstream

        key: Any = "hub" if source.repo else tset.path  # the Hub once; the catalog is local and checks the file
        if source.catalog is not None:
            key = _conversion_of(tset)
        up = self.resolved.get(key) if key is not None else None
        if up is None:
            up = resolve_upstream(tset, source)
            if key is not None:
                self.resolved[key] = up
            for w in up.warnings:
                if w not in self.warnings:
                    self.warnings.append(w)
        self.how_found = self.how_found or up.how
        # each plan appends its own warnings (a kept template): a copy per file
        return replace(up, config=replace(up.config, warnings=list(up.config.warnings)))

    def upstreams(self) -> dict[str, Any]:
        """repo id -> the templates read for it (``UpstreamConfig``), for the folder checks to compare with
        rather than read the Hub again; a repo resolved to two different sets of templates is left out."""
        out: dict[str, Any] = {}
        clash: set[str] = set()
        for up in self.resolved.values():
            cfg = up.config
            if not cfg.repo_id:
                continue
            seen = out.setdefault(cfg.repo_id, cfg)
            if seen is not cfg and (seen.templates, seen.commit_sha) != (cfg.templates, cfg.commit_sha):
                clash.add(cfg.repo_id)
        return {k: v for k, v in out.items() if k not in clash}

    def plan(self, path: str) -> tuple[PatchPlan, Any]:
        from gguftpl.patching import plan_tools_in_default, plan_upstream_patch
        from gguftpl.patchplan import plan_from_files

        if self.tools:
            from gguftpl.runtimes.toolsdefault import refuse_unless_accepted

            plan, made = plan_tools_in_default(
                path, self.source, only=self.only, provenance=self.provenance, resolve=self.resolve, made=self.made
            )
            if made is not None and plan.changes:
                refuse_unless_accepted(made, self.accept)
            return plan, made
        if self.source is not None:
            plan = plan_upstream_patch(
                path, self.source, only=self.only, remove=self.remove, provenance=self.provenance, resolve=self.resolve
            )
            return plan, None
        plan = plan_from_files(path, self.texts, self.remove, template_files=self.files, provenance=self.provenance)
        return plan, None


def _conversion_of(tset: Any) -> str | None:
    from gguftpl.gguf.conversion import conversion_key
    from gguftpl.gguf.reader import read_header

    with read_header(tset.path) as h:
        return conversion_key(h)


# --------------------------------------------------------------------------------------------- running


def patch_folder(
    folders: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    out_dir: str | os.PathLike[str] | None = None,
    *,
    in_place: bool = False,
    repo: str | None = None,
    revision: str | None = None,
    catalog: str | None = None,
    source: UpstreamSource | None = None,
    templates: Mapping[str, str] | None = None,
    remove: Sequence[str] = (),
    template_files: Mapping[str, str] | None = None,
    only: Sequence[str] | None = None,
    tools_in_default: bool = False,
    accept_differences: bool = False,
    options: PatchOptions | None = None,
    jobs: int | None = None,
    checks: bool = True,
    on_file: FileDone | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> FolderPatch:
    """Patch every GGUF under ``folders`` with one plan, writing to ``out_dir`` (the same layout) or over each
    file (``in_place``); see the module doc. The templates come from ``repo`` (the Hub, at ``revision``),
    ``catalog`` (an entry, or ``"auto"``), a ready ``source``, or ``templates`` (name -> text) and ``remove``;
    ``tools_in_default`` as in ``patch_tools_in_default``. ``options`` are the one-file options (``in_place``
    is taken from here); ``jobs`` writes run at once (default ``default_jobs()``); ``on_file`` is called as
    each file is done, and ``progress(done, total, name)`` as each of the ``total`` files (a split model's
    shards count as one) is (a bar, :class:`gguftpl.cli.output.StderrProgress`). Per-file failures are
    results (``FolderFile.status == "failed"``), never raised."""
    from dataclasses import replace

    from gguftpl.auditcache import AnalysisCache
    from gguftpl.upstream.resolve import UpstreamSource

    roots = [os.fspath(f) for f in ([folders] if isinstance(folders, (str, os.PathLike)) else folders)]
    if not roots:
        raise UsageError("give at least one folder")
    if in_place == (out_dir is not None):
        raise UsageError("give -o OUTDIR, or --in-place to replace the files")
    jobs = default_jobs() if jobs is None else jobs
    if jobs < 1:
        raise UsageError("--jobs must be at least 1")
    if source is None and (repo or catalog):
        source = UpstreamSource(repo=repo, revision=revision, catalog=catalog, labels=("repo", "folder", "catalog"))
    if source is None and not templates and not remove and not tools_in_default:
        raise UsageError("nothing to do: name the upstream or give templates")
    opts = replace(options or PatchOptions(), in_place=in_place)
    out_s = os.fspath(out_dir) if out_dir is not None else None
    if out_s is not None:
        parent = os.path.dirname(os.path.abspath(out_s))
        if not os.path.isdir(parent):
            raise UsageError(f"-o: the folder {parent} does not exist")
        os.makedirs(out_s, exist_ok=True)
    units, outs = _discover(roots, out_s)
    planner = _Planner(
        source, templates or {}, remove, template_files, only, tools_in_default, accept_differences, opts.provenance
    )
    result = FolderPatch(tuple(roots), tuple(outs))
    cache = AnalysisCache.on_disk(read_disk=False)
    result.files = _run(units, planner, opts, jobs, on_file, cache, progress)
    result.how_found, result.warnings = planner.how_found, planner.warnings
    if checks:
        result.checks = _folder_checks(outs, jobs, cache, planner.upstreams())
    return result


def _run(
    units: list[_Unit],
    planner: _Planner,
    opts: PatchOptions,
    jobs: int,
    on_file: FileDone | None,
    cache: Any,
    progress: Callable[[int, int, str], None] | None = None,
) -> list[FolderFile]:
    """Plan and gate each file here, write in the pool (at most ``2 * jobs`` waiting), audit each output here
    as its write ends. An interrupt cancels the writes not started; those under way end (atomically)."""
    done: list[FolderFile] = []

    finished = [0]

    def report(files: list[FolderFile]) -> None:
        done.extend(files)
        for f in files:
            if on_file is not None:
                on_file(f)
        finished[0] += 1  # one unit: a file, or a split model's shards
        if progress is not None and files:
            progress(finished[0], len(units), files[0].name)

    pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="gguftpl-patch")
    pending: deque[tuple[_Unit, Any, Future[Any]]] = deque()
    try:
        for unit in units:
            ready = _prepare(unit, planner, opts, cache)
            if isinstance(ready, list):
                report(ready)
                continue
            pending.append((unit, ready, pool.submit(_write, unit, ready, opts)))
            while pending and (len(pending) >= 2 * jobs or pending[0][2].done()):
                report(_finish(*pending.popleft(), opts, cache))
        while pending:
            report(_finish(*pending.popleft(), opts, cache))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return sorted(done, key=lambda f: f.path)


@dataclass
class _Ready:
    plan: PatchPlan
    made: Any
    input_audit: Any
    out: str


def _prepare(unit: _Unit, planner: _Planner, opts: PatchOptions, cache: Any) -> _Ready | list[FolderFile]:
    """The plan and the gate, or the unit's final entries (failed, already patched)."""
    from gguftpl.patching import gate_patch
    from gguftpl.patchoutput import resolve_output

    try:
        plan, made = planner.plan(unit.path)
        if not plan.changes:
            return _already(unit, opts)
        if not opts.in_place and os.path.lexists(unit.out) and _has_plan(unit.out, plan):
            return [_entry(unit, ALREADY, output=unit.out, proof="output already has these templates")] + [
                _entry_shard(unit, s, ALREADY, output=s[2], proof="beside its patched first shard") for s in unit.shards
            ]
        out = resolve_output(unit.path, None if opts.in_place else unit.out, in_place=opts.in_place, force=opts.force)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        return _Ready(plan, made, gate_patch(plan, out, opts, cache), out)
    except (GGUFTplError, OSError) as exc:
        return _failed(unit, exc)


def _write(unit: _Unit, ready: _Ready, opts: PatchOptions) -> Any:
    """In a pool thread: the write and read-back, then the set's other shards (stat before, and after)."""
    from gguftpl.patching import write_planned

    stats = {p: _stat(p) for p, _, _ in unit.shards} if opts.in_place else {}
    if opts.in_place:
        from gguftpl.gguf.inplace import locked_in_place

        with locked_in_place(ready.out, ready.plan.planned_from):  # as one file's --in-place: no change lost
            proof, readback = write_planned(ready.plan, ready.out, opts)
    else:
        proof, readback = write_planned(ready.plan, ready.out, opts)
    shards = [_shard_after(unit, s, stats, opts) for s in unit.shards]
    return proof, readback, shards


def _finish(unit: _Unit, ready: _Ready, fut: Future[Any], opts: PatchOptions, cache: Any) -> list[FolderFile]:
    from gguftpl.patching import patch_result

    try:
        proof, readback, shards = fut.result()
        res = patch_result(ready.plan, ready.out, proof, readback, ready.input_audit, opts, cache, ready.made)
    except (GGUFTplError, OSError) as exc:
        return _failed(unit, exc)
    summary = res.summary
    entry = _entry(
        unit,
        PATCHED,
        output=ready.out,
        changes=tuple(f"{it.action} {it.name}" for it in ready.plan.changes),
        proof=_proof_text(proof),
        before=dict(summary.counts_before) if summary else None,
        after=dict(summary.counts_after) if summary else None,
        result=res,
    )
    return [entry, *shards]


def _already(unit: _Unit, opts: PatchOptions) -> list[FolderFile]:
    """Nothing to change; with -o the file (and its set) is copied so OUTDIR is whole."""
    if opts.in_place:
        return [_entry(unit, ALREADY, proof="not written")] + [
            _entry_shard(unit, s, UNCHANGED, proof="not written") for s in unit.shards
        ]
    out: list[FolderFile] = []
    for path, name, dst in [(unit.path, unit.name, unit.out), *unit.shards]:
        status = ALREADY if path == unit.path else COPIED
        try:
            out.append(_copy_entry(unit, path, name, dst, status, opts))
        except (GGUFTplError, OSError) as exc:
            out.append(FolderFile(path, name, FAILED, error=str(exc), set_of=_set_of(unit)))
    return out


def _has_plan(out: str, plan: PatchPlan) -> bool:
    """An existing output already carries every template as planned (a run interrupted after writing it)."""
    from gguftpl.gguf.reader import read_header
    from gguftpl.gguf.templateset import load_templateset
    from gguftpl.patchplan import REMOVE

    try:
        with read_header(out) as h:
            have = load_templateset(h).templates
    except (GGUFTplError, OSError):
        return False
    return all(
        (it.name not in have) if it.action == REMOVE else (it.name in have and have[it.name].text == it.new_text)
        for it in plan.items
    )


def _shard_after(unit: _Unit, shard: tuple[str, str, str], stats: dict[str, Any], opts: PatchOptions) -> FolderFile:
    path = shard[0]
    if opts.in_place:
        same = stats.get(path) is not None and stats[path] == _stat(path)
        if not same:
            return _entry_shard(unit, shard, FAILED, error="changed while its set was patched")
        return _entry_shard(unit, shard, UNCHANGED, proof="not written: same inode, size and mtime before and after")
    try:
        return _copy_entry(unit, path, shard[1], shard[2], COPIED, opts)
    except (GGUFTplError, OSError) as exc:
        return _entry_shard(unit, shard, FAILED, error=str(exc))


def _copy_entry(unit: _Unit, path: str, name: str, dst: str, status: str, opts: PatchOptions) -> FolderFile:
    from gguftpl.gguf.filecopy import copy_proven
    from gguftpl.patchoutput import output_permissions

    os.makedirs(os.path.dirname(dst), exist_ok=True)
    if os.path.lexists(dst) and _same_content(path, dst):
        return FolderFile(path, name, status, output=dst, proof="output already there", set_of=_set_of(unit))
    cp = copy_proven(path, dst, overwrite=opts.force, permissions=output_permissions(path, in_place=False))
    proof = f"{cp.copy_method}, {_short_proof(cp.proof_method)}"
    return FolderFile(path, name, status, output=dst, proof=proof, set_of=_set_of(unit))


def _same_content(a: str, b: str) -> bool:
    from gguftpl.gguf.regioncopy import same_bytes

    if os.path.getsize(a) != os.path.getsize(b):
        return False
    fa, fb = os.open(a, os.O_RDONLY), os.open(b, os.O_RDONLY)
    try:
        return same_bytes(fa, 0, fb, 0, os.path.getsize(a))
    finally:
        os.close(fa)
        os.close(fb)


def _stat(path: str) -> tuple[int, int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def _proof_text(proof: Any) -> str:
    return f"{proof.copy_method}, {_short_proof(proof.proof_method)}" + (
        "" if proof.data_identical and proof.tensor_infos_identical else ": DIFFERENT"
    )


def _short_proof(method: str) -> str:
    from gguftpl.gguf.rewrite import SHARED_PROOF

    return "shared extents" if method == SHARED_PROOF else "byte for byte"


def _set_of(unit: _Unit) -> str | None:
    return unit.name if unit.shards else None


def _entry(unit: _Unit, status: str, **kw: Any) -> FolderFile:
    return FolderFile(unit.path, unit.name, status, set_of=_set_of(unit), **kw)


def _entry_shard(unit: _Unit, shard: tuple[str, str, str], status: str, **kw: Any) -> FolderFile:
    return FolderFile(shard[0], shard[1], status, set_of=unit.name, **kw)


def _failed(unit: _Unit, exc: BaseException) -> list[FolderFile]:
    why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return [_entry(unit, FAILED, error=why)] + [
        _entry_shard(unit, s, FAILED, error=f"not patched: {unit.name} failed") for s in unit.shards
    ]


def _folder_checks(outs: Sequence[str], jobs: int, cache: Any, known: Mapping[str, Any]) -> list[Finding]:
    """GT55x on each output folder, as ``audit --repo-check`` reports them; compared with the upstream this
    patch resolved (``known``: read once, here as in the plans), any other one the files name read as there."""
    from gguftpl.repo.audit import audit_local_dir

    found: list[Finding] = []
    for folder in outs:
        ra = audit_local_dir(folder, jobs=jobs, cache=cache, known_upstreams=known)
        found += [f for f in ra.findings if f.code.startswith("GT55")]
    return found
