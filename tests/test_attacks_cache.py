"""Issue 27, the facts cache: an optimisation, never an authority. Every attack runs the real command line in
a real process, on a real cache folder, and compares with ``--no-cache``.

(a) special and damaged entries (a FIFO, a symlink to /dev/zero, a 2 GiB sparse file, ``"sha256": 7``, deep
    nesting, every field given a wrong type) are a miss: they never hang, grow memory or change a verdict;
(b) an entry copied over another (a good template's facts over the ChatML default's) is a miss;
(c) a folder others can write into, or entries planted by another uid, are ignored with one warning;
(d) no ``HOME`` and no passwd entry: the audit works, with one notice;
(e) the patch gate never takes its safety decision from the cache, even from an entry whose tag verifies.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CHATML
from tests.procwatch import Watched, run_watched

MakeGGUF = Callable[..., Path]
SAMPLE = Path(__file__).parent.parent / "samples" / "hermes-2-pro-mistral-7b.chatml.gguf"
GOOD = Path(__file__).parent.parent / "samples" / "hermes-2-pro-mistral-7b.upstream.gguf"
MAGIC = b"gguftpl-cache-"
OTHER_UID = 54321
EVIL = "{{ ''.__class__.__mro__[1].__subclasses__() }}{% for m in messages %}{{ m.content }}{% endfor %}"


def run(cache: Path | None, *args: str | Path, timeout: float = 120.0, **kw: Any) -> Watched:
    env = {"GGUFTPL_CACHE_DIR": str(cache)} if cache is not None else {}
    return run_watched(*args, env={**env, **kw.pop("env", {})}, timeout=timeout, kill_above=1 << 30, **kw)


Verdict = tuple[int | None, list[list[tuple[str, str, str]]]]


def verdict(w: Watched) -> Verdict:
    """The exit code and, per file, every finding's code, message and fix line, and the sha256 of each
    template shown (the whole verdict)."""
    assert w.killed is None, (w.killed, w.stderr[-2000:])
    return w.returncode, findings(w.stdout)


def findings(stdout: str) -> list[list[tuple[str, str, str]]]:
    doc = json.loads(stdout)
    return [
        sorted((f["code"], f["message"], json.dumps(f.get("fix"), sort_keys=True)) for f in fa["findings"])
        + [("template", str(t.get("sha256")), json.dumps(t, sort_keys=True)) for t in fa.get("templates") or ()]
        for fa in doc["files"]
    ]


def no_cache(path: Path) -> Verdict:
    return verdict(run(None, "audit", "--no-cache", "--format", "json", path))


def entries(cache: Path, kind: str) -> list[Path]:
    """The entries of one kind: ``files`` (per-file facts) or ``templates`` (template facts)."""
    found = [p for p in cache.rglob("*.json") if not p.name.startswith(".")]
    return sorted(p for p in found if ("files" in p.relative_to(cache).parts) == (kind == "files"))


def read_entry(path: Path) -> Any:
    raw = path.read_bytes()
    if raw.startswith(MAGIC):
        return json.loads(raw.partition(b"\n")[2])["data"]
    return json.loads(raw)


def sealed_write(path: Path, data: Any) -> None:
    """Rewrite an entry with a tag that verifies: what an entry written by a buggy gguftpl, or by someone who
    holds the secret, looks like. Plain JSON where the cache had no tags."""
    raw = path.read_bytes()
    if not raw.startswith(MAGIC):
        path.write_text(json.dumps(data), encoding="utf-8")
        return
    from gguftpl.templates.cachedisk import CacheFolder

    root = next(p for p in path.parents if (p / "secret").is_file())
    key = json.loads(raw.partition(b"\n")[2])["key"]
    body = json.dumps({"key": key, "data": data}, separators=(",", ":")).encode()
    path.write_bytes(CacheFolder(root).seal(path.name, body) + b"\n" + body)


@pytest.fixture
def warm(tmp_path: Path) -> Path:
    """A cache folder that has seen the ChatML sample once."""
    cache = tmp_path / "cache"
    first = run(cache, "audit", "--format", "json", SAMPLE)
    assert verdict(first) == no_cache(SAMPLE)
    assert entries(cache, "templates") and entries(cache, "files")
    return cache


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path, 0o600)


def _zero(path: Path) -> None:
    path.unlink()
    path.symlink_to("/dev/zero")


def _sparse(path: Path) -> None:
    with open(path, "r+b") as fh:
        fh.truncate(2 << 30)


def _deep(path: Path) -> None:
    path.write_text("[" * 200_000 + "]" * 200_000, encoding="utf-8")


def _sha7(path: Path) -> None:
    data = read_entry(path)
    if "sha256" in data:
        data["sha256"] = 7
    else:
        data["how"] = 7
    path.write_text(json.dumps(data), encoding="utf-8")


def _sha7_sealed(path: Path) -> None:
    data = read_entry(path)
    data["sha256" if "sha256" in data else "how"] = 7
    sealed_write(path, data)


def _deep_sealed(path: Path) -> None:
    data = read_entry(path)
    data["head" if "head" in data else "how"] = json.loads("[" * 500 + "]" * 500)
    sealed_write(path, data)


DAMAGE = {
    "fifo": _fifo,
    "symlink-to-dev-zero": _zero,
    "sparse-2GiB": _sparse,
    "deep-nesting": _deep,
    "sha256-7": _sha7,
    "sha256-7-sealed": _sha7_sealed,
    "deep-nesting-sealed": _deep_sealed,
}


@pytest.mark.parametrize("kind", ["templates", "files"])
@pytest.mark.parametrize("damage", list(DAMAGE), ids=list(DAMAGE))
def test_a_damaged_or_special_entry_is_a_miss(warm: Path, damage: str, kind: str) -> None:
    for path in entries(warm, kind):
        DAMAGE[damage](path)
    res = run(warm, "audit", "--format", "json", SAMPLE, timeout=20)
    assert res.killed is None, f"{damage}: {res.killed} after {res.seconds:.0f}s, {res.peak_main >> 20} MB"
    assert res.peak_main < 400 << 20, res.peak_main
    assert verdict(res) == no_cache(SAMPLE)
    for path in entries(warm, kind):  # a bad regular file was removed, and the audit wrote a good one
        assert path.is_file() and not path.is_symlink() and path.stat().st_size < 1 << 20


def _wrong(value: Any) -> Any:
    if isinstance(value, str):
        return 7
    if isinstance(value, bool | int | float):
        return "7"
    if value is None:
        return {"bad": [7]}
    return 7


def test_every_field_of_the_wrong_type_is_a_miss(warm: Path) -> None:
    """A tagged entry whose JSON is well-formed but not facts (each field in turn given a wrong type): a miss, so
    the facts are gathered again; never an error, never another verdict."""
    from gguftpl.templates.facts import TemplateFacts
    from gguftpl.templates.factstore import FactsStore

    (path,) = entries(warm, "templates")
    original, good = path.read_bytes(), read_entry(path)
    base = TemplateFacts.from_dict(good)
    (key,) = _keys_of(FactsStore(warm / "facts"), base)
    assert FactsStore(warm / "facts").get(key) == base
    for field in sorted(good):
        if field == "tools_static":
            continue  # derived, not read back
        path.write_bytes(original)
        sealed_write(path, {**good, field: _wrong(good[field])})
        store = FactsStore(warm / "facts")
        assert store.get(key) is None, f"{field}: {good[field]!r} -> {_wrong(good[field])!r} was read back"
        assert not path.exists()  # removed: the next audit writes a good one


def _keys_of(store: Any, facts: Any) -> list[Any]:
    """The key the sample's default template was stored under (the one entry in the folder)."""
    from gguftpl.auditcache import AnalysisCache
    from gguftpl.gguf.reader import read_header
    from gguftpl.gguf.templateset import load_templateset, special_token_text, template_special_tokens
    from gguftpl.templates.factstore import facts_key

    tset = load_templateset(read_header(SAMPLE))
    bos, eos = special_token_text(tset, "bos"), special_token_text(tset, "eos")
    specials = template_special_tokens(tset)
    for asked in (False, True):
        for others in ((), AnalysisCache()._other_engines("hf")):
            key = facts_key(facts.sha256, bos, eos, asked, specials, others)
            if _stored(store, key):
                return [key]
    raise AssertionError("no entry for the sample's default")


def _stored(store: Any, key: Any) -> bool:
    path = store.path_of(key) if hasattr(store, "path_of") else store._path(key)
    return path is not None and bool(path.exists())


# ------------------------------------------------------------------------------------------------ (b)


def test_good_facts_copied_over_the_chatml_default_are_a_miss(tmp_path: Path) -> None:
    """Issue 27 item 1 and 4: the facts of a good template (and the per-file entry of a good file) copied over
    the ChatML default's; the next audit still reports GT201 with the real sha256 and the real fix line."""
    cache = tmp_path / "cache"
    run(cache, "audit", "--format", "json", GOOD)
    good_templates = {read_entry(p)["name"]: p for p in entries(cache, "templates")}
    good_files = entries(cache, "files")
    run(cache, "audit", "--format", "json", SAMPLE)
    (chatml,) = [p for p in entries(cache, "templates") if p not in good_templates.values()]
    (chatml_file,) = [p for p in entries(cache, "files") if p not in good_files]
    shutil.copyfile(good_templates["default"], chatml)
    shutil.copyfile(good_files[0], chatml_file)
    res = run(cache, "audit", "--format", "json", SAMPLE)
    expected = no_cache(SAMPLE)
    assert verdict(res) == expected and expected[0] == 1
    assert "GT201" in [code for code, _, _ in expected[1][0]]
    shown = [sha for what, sha, _ in verdict(res)[1][0] if what == "template"]
    assert shown == [hashlib.sha256(_default_text().encode()).hexdigest()]


def _default_text() -> str:
    from gguftpl.gguf.reader import read_header
    from gguftpl.gguf.templateset import load_templateset

    return str(load_templateset(read_header(SAMPLE)).templates["default"].text)


# ------------------------------------------------------------------------------------------------ (c)


def _warnings(res: Watched) -> list[str]:
    return [line for line in res.stderr_lines if "cache" in line]


def _poison(cache: Path) -> None:
    """The ChatML default's facts replaced with the upstream default's, tag and all (what a forger holding the
    secret, or the other user's own gguftpl, would write)."""
    run(cache, "audit", "--format", "json", GOOD)
    good = {read_entry(p)["name"]: read_entry(p) for p in entries(cache, "templates")}["default"]
    sha = hashlib.sha256(_default_text().encode()).hexdigest()
    for path in entries(cache, "templates"):
        if read_entry(path)["sha256"] == sha:
            sealed_write(path, {**good, "sha256": sha, "key": read_entry(path)["key"]})


def test_a_folder_others_can_write_into_is_ignored_with_one_warning(warm: Path) -> None:
    _poison(warm)
    warm.chmod(0o777)
    res = run(warm, "audit", "--format", "json", SAMPLE, GOOD)
    assert verdict(res) == verdict(run(None, "audit", "--no-cache", "--format", "json", SAMPLE, GOOD))
    (line,) = _warnings(res)
    assert "writable by others" in line and str(warm) in line, res.stderr


@pytest.fixture
def other_user() -> Iterator[tuple[int, int]]:
    """(uid, gid) of a real user made with ``useradd`` for this test (no home, no shell), removed after: the
    other user of a shared CI runner."""
    import pwd

    if os.geteuid() != 0 or shutil.which("useradd") is None:
        pytest.skip("another user needs root and useradd")
    name = f"gguftpl-t{os.getpid()}"
    made = subprocess.run(
        ["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", "--user-group", name],
        capture_output=True,
        text=True,
    )
    assert made.returncode == 0 or "already exists" in made.stderr, made.stderr
    try:
        pw = pwd.getpwnam(name)
        assert pw.pw_uid not in (0, os.geteuid())
        yield pw.pw_uid, pw.pw_gid
    finally:
        subprocess.run(["userdel", name], capture_output=True)


def _as_user(user: tuple[int, int], folder: Path, act: Callable[[int], None]) -> None:
    """``act(folder_fd)`` in a real process of ``user`` (forked, then setgid/setuid); the folder is opened
    first (the parents of tmp_path are root's, mode 0700)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
            os.setgroups([])
            os.setgid(user[1])
            os.setuid(user[0])
            act(fd)
            os._exit(0)
        except BaseException:
            os._exit(1)
    assert os.waitpid(pid, 0)[1] == 0


def _write_as_other_user(path: Path, data: bytes, user: tuple[int, int] = (OTHER_UID, OTHER_UID)) -> None:
    """A real process of another uid writes ``path``."""

    def write(folder: int) -> None:
        fd = os.open(path.name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=folder)
        os.write(fd, data)
        os.close(fd)

    _as_user(user, path.parent, write)


def _shared(cache: Path) -> list[tuple[Path, bytes]]:
    """The poisoned folder made a shared one (every folder mode 1777, as /tmp) and its template entries taken
    out, for another user to plant: (path, the entry's bytes)."""
    _poison(cache)
    planted = []
    for path in entries(cache, "templates"):
        data = path.read_bytes()
        path.unlink()
        planted.append((path, data))
    for folder in [cache, *(p for p in cache.rglob("*") if p.is_dir())]:
        folder.chmod(0o1777)
    return planted


@pytest.mark.skipif(os.geteuid() != 0, reason="planting as another uid needs root")
def test_an_entry_planted_by_another_uid_is_ignored(warm: Path) -> None:
    """Another uid (a real process, setuid to a uid nobody uses) plants poisoned facts in a shared folder."""
    for path, data in _shared(warm):
        _write_as_other_user(path, data)
        assert path.stat().st_uid == OTHER_UID
    res = run(warm, "audit", "--format", "json", SAMPLE)
    assert verdict(res) == no_cache(SAMPLE)
    assert len(_warnings(res)) == 1, res.stderr


def test_entries_and_fifos_planted_by_a_real_other_user_are_ignored(warm: Path, other_user: tuple[int, int]) -> None:
    """Issue 27 items 2 and 6 on a shared runner: a user made with useradd plants poisoned entries (tag and all)
    and FIFOs in place of entries and of the secret: the audit neither hangs nor trusts them, and says why once;
    the patch gate refuses what it refused."""
    planted = _shared(warm)
    for path, data in planted[:1]:
        _write_as_other_user(path, data, other_user)
    for path, _ in planted[1:]:
        _as_user(other_user, path.parent, lambda fd, name=path.name: os.mkfifo(name, 0o666, dir_fd=fd))
    secret = warm / "facts" / "secret"
    secret.unlink()
    _as_user(other_user, secret.parent, lambda fd: os.mkfifo("secret", 0o666, dir_fd=fd))
    assert {p.stat().st_uid for p, _ in planted} | {secret.stat().st_uid} == {other_user[0]}
    res = run(warm, "audit", "--format", "json", SAMPLE, timeout=60)
    assert res.killed is None and verdict(res) == no_cache(SAMPLE), res.stderr
    (line,) = _warnings(res)
    assert "writable by others" in line or "not to you" in line, line


# ------------------------------------------------------------------------------------------------ (d)


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None, reason="a uid without a passwd entry needs root and unshare"
)
@pytest.mark.parametrize("command", ["audit", "patch", "verify", "cache"])
def test_no_home_and_no_passwd_entry(tmp_path: Path, command: str) -> None:
    """Issue 27 item 7: ``HOME`` unset, a uid unknown to /etc/passwd, no cache variables: ``audit``, ``patch``
    and ``verify`` (each said "unexpected RuntimeError: Could not determine home directory", exit 2)."""
    env = {k: v for k, v in os.environ.items() if k not in ("HOME", "GGUFTPL_CACHE_DIR", "XDG_CACHE_HOME")}
    env["PYTHONPATH"] = str(Path(__file__).parent.parent)
    args = ["audit", "--format", "json", str(SAMPLE)]
    if command == "patch":
        tpl = tmp_path / "tool_use.jinja"
        tpl.write_text(CHATML, encoding="utf-8")
        args = ["patch", str(SAMPLE), "--template", f"tool_use={tpl}", "-o", str(tmp_path / "out.gguf")]
    if command == "verify":  # llama.cpp's trace of the sample: it drops the tools (exit 1), as with a home
        args = ["verify", "--format", "json", str(SAMPLE)]
    if command == "cache":
        args = ["cache", "info"]
    as_other = ["unshare", "--user", f"--map-user={OTHER_UID}", f"--map-group={OTHER_UID}"]
    proc = subprocess.run(
        [*as_other, sys.executable, "-m", "gguftpl", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert "Traceback" not in proc.stderr and "unexpected" not in proc.stderr, proc.stderr
    if command == "cache":  # says the cache is off, on stdout, and makes nothing
        assert proc.returncode == 0 and proc.stdout.startswith("cache: off (no home directory"), proc.stdout
        assert not proc.stderr and list(tmp_path.iterdir()) == [], proc.stderr
        return
    assert proc.returncode == (0 if command == "patch" else 1), proc.stderr
    notices = [line for line in proc.stderr.splitlines() if "cache" in line]
    assert len(notices) == 1 and "no home directory" in notices[0], proc.stderr
    if command == "audit":
        assert no_cache(SAMPLE)[1] == findings(proc.stdout)
    if command == "patch":
        assert (tmp_path / "out.gguf").is_file()
    if command == "verify":
        with_home = run(tmp_path / "cache", "verify", "--format", "json", SAMPLE)
        assert with_home.returncode == 1, with_home.stderr
        assert _stages(proc.stdout) == _stages(with_home.stdout)


def _stages(stdout: str) -> list[tuple[str, str]]:
    """Each stage of a ``verify --format json`` report: its name and outcome."""
    doc = json.loads(stdout)
    files = doc["files"] if isinstance(doc, dict) and "files" in doc else [doc]
    return [(str(s.get("name")), str(s.get("status"))) for f in files for s in f["stages"]]


# ------------------------------------------------------------------------------------------------ (e)


def test_the_patch_gate_never_trusts_the_cache(tmp_path: Path, make_gguf: MakeGGUF) -> None:
    """Issue 27 item 3: the cached facts of a sandbox-escape ``tool_use`` made to look clean (tag and all):
    the patch is still refused, and nothing is written."""
    cache = tmp_path / "cache"
    src = make_gguf("m.gguf", templates={"default": CHATML})
    evil = tmp_path / "evil.jinja"
    evil.write_text(EVIL, encoding="utf-8")
    out = tmp_path / "out.gguf"
    args = ("patch", src, "--template", f"tool_use={evil}", "-o", out)
    first = run(cache, *args)
    assert first.returncode == 2 and "refusing" in first.stderr and not out.exists(), first.stderr
    sha = hashlib.sha256(EVIL.encode()).hexdigest()
    clean = next(read_entry(p) for p in entries(cache, "templates") if read_entry(p)["sha256"] != sha)
    poisoned = 0
    for path in entries(cache, "templates"):
        data = read_entry(path)
        if data["sha256"] == sha:
            sealed_write(path, {**clean, "name": data["name"], "key": data["key"], "sha256": sha, "size": data["size"]})
            poisoned += 1
    assert poisoned
    again = run(cache, *args)
    assert again.returncode == 2 and "refusing" in again.stderr and "GT4" in again.stderr, again.stderr
    assert not out.exists()


# ------------------------------------------------------------------------------------------------ (f)


def test_cache_info_and_clear(warm: Path, tmp_path: Path) -> None:
    """``gguftpl cache info|clear`` on a real folder: clear removes our entries and the secret, and never what a
    symlink planted in the folder points to, nor a FIFO or another user's file."""
    facts = warm / "facts"
    info = run(warm, "cache", "info", "--format", "json")
    assert info.returncode == 0, info.stderr
    doc = json.loads(info.stdout)
    assert doc["folder"] == str(facts) and doc["trusted"] == "yes"
    assert doc["entries"] == len(entries(warm, "templates")) + len(entries(warm, "files")) > 0
    assert doc["size"] == sum(p.stat().st_size for p in facts.rglob("*.json"))
    outside = tmp_path / "outside"
    (outside / "ab").mkdir(parents=True)
    victim = outside / "ab" / f"{'0' * 64}.json"
    victim.write_text("{}", encoding="utf-8")
    (facts / "templates" / "zz").symlink_to(outside / "ab")  # a sub-folder swapped for a link
    (facts / "elsewhere").symlink_to(outside)  # a kind swapped for a link
    os.mkfifo(facts / "templates" / next(iter(os.listdir(facts / "templates"))) / f"{'1' * 64}.json")
    cleared = run(warm, "cache", "clear")
    assert cleared.returncode == 0 and f"removed {doc['entries']} entries" in cleared.stdout, cleared.stderr
    assert victim.read_text(encoding="utf-8") == "{}"
    assert not (facts / "secret").exists() and not entries(warm, "files")
    assert json.loads(run(warm, "cache", "info", "--format", "json").stdout)["entries"] == 0
    again = run(warm, "audit", "--format", "json", SAMPLE)  # a new secret, a fresh start, the same verdict
    assert verdict(again) == no_cache(SAMPLE) and (facts / "secret").stat().st_mode & 0o077 == 0


def test_cache_info_says_why_a_folder_is_ignored(warm: Path) -> None:
    warm.chmod(0o777)
    text = run(warm, "cache", "info")
    assert text.returncode == 0 and "trusted: " in text.stdout and "writable by others" in text.stdout, text.stdout


def test_cache_info_creates_nothing(tmp_path: Path) -> None:
    cache = tmp_path / "never"
    res = run(cache, "cache", "info")
    assert res.returncode == 0 and "entries: 0" in res.stdout, res.stderr
    assert not cache.exists()


def test_the_size_cap_evicts_the_least_recently_used(tmp_path: Path, make_gguf: MakeGGUF) -> None:
    """``GGUFTPL_CACHE_MAX``: a folder of many distinct templates stays under the cap, and the entries kept
    are the newest (a rebuilt venv or 1,000 files never grow the folder past it)."""
    cache = tmp_path / "cache"
    files = [make_gguf(f"m{i}.gguf", templates={"default": CHATML + "{# " + str(i) * 40 + " #}"}) for i in range(8)]
    first = run(cache, "audit", "--format", "json", *files[:4], env={"GGUFTPL_CACHE_MAX": "1M"})
    assert first.killed is None and first.returncode in (0, 1), first.stderr
    one = max(p.stat().st_size for p in (cache / "facts").rglob("*.json"))
    cap = 6 * one
    res = run(cache, "audit", "--format", "json", *files[4:], env={"GGUFTPL_CACHE_MAX": str(cap)})
    assert verdict(res) == verdict(run(None, "audit", "--no-cache", "--format", "json", *files[4:]))
    kept = sum(p.stat().st_size for p in (cache / "facts").rglob("*.json"))
    assert 0 < kept <= cap
    uncapped = tmp_path / "uncapped"  # the same audits without a cap keep more
    run(uncapped, "audit", "--format", "json", *files)
    assert len(list((cache / "facts").rglob("*.json"))) < len(list((uncapped / "facts").rglob("*.json")))
    info = json.loads(run(cache, "cache", "info", "--format", "json", env={"GGUFTPL_CACHE_MAX": str(cap)}).stdout)
    assert info["cap"] == cap and info["size"] == kept


def test_a_relative_cache_dir_is_refused_with_one_line(tmp_path: Path) -> None:
    """A relative ``GGUFTPL_CACHE_DIR`` would follow the current folder (a hook run from elsewhere, a cache inside
    a cloned repository that brings its own secret): one line, exit 2, nothing created; ``--no-cache`` works."""
    res = run(None, "audit", SAMPLE, env={"GGUFTPL_CACHE_DIR": "rel-cache"}, cwd=str(tmp_path))
    assert res.returncode == 2 and len(res.stderr_lines) == 1 and "absolute" in res.stderr, res.stderr
    assert not res.stdout and list(tmp_path.iterdir()) == []
    ok = run(None, "audit", "--no-cache", SAMPLE, env={"GGUFTPL_CACHE_DIR": "rel-cache"}, cwd=str(tmp_path))
    assert ok.returncode == 1 and list(tmp_path.iterdir()) == [], ok.stderr


def _copy_tree(dest: Path, hours: int, edit: bool = False) -> Path:
    """gguftpl and its catalog copied as a rebuilt venv has them: new files, new mtimes, the same bytes (or one
    byte more in a comment with ``edit``)."""
    root = Path(__file__).parent.parent
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(root / "gguftpl", dest / "gguftpl", ignore=ignore, copy_function=shutil.copyfile)
    shutil.copytree(root / "upstream_templates", dest / "upstream_templates", copy_function=shutil.copyfile)
    later = os.stat(root / "gguftpl" / "__init__.py").st_mtime + 3600 * hours
    for path in dest.rglob("*"):
        os.utime(path, (later, later))
    if edit:
        with open(dest / "gguftpl" / "rules" / "__init__.py", "a", encoding="utf-8") as fh:
            fh.write("#\n")
    return dest


def test_a_rebuilt_venv_keeps_hitting_and_a_changed_source_misses(tmp_path: Path) -> None:
    """Issue 27 item 8: the code identity is made of the package's content (version and sources) and the
    catalog's, never mtimes. The same code copied afresh finds every entry; one changed byte finds none."""
    cache = tmp_path / "cache"
    names: list[set[str]] = []
    for i, edit in enumerate((False, False, True)):
        tree = _copy_tree(tmp_path / f"venv{i}", i + 1, edit=edit)
        res = run(cache, "audit", "--format", "json", SAMPLE, env={"PYTHONPATH": str(tree)}, cwd=str(tree))
        assert verdict(res) == no_cache(SAMPLE)
        names.append({p.name for p in (cache / "facts").rglob("*.json")})
    assert names[0] and names[1] == names[0]
    assert names[2] > names[1] and len(names[2]) == 2 * len(names[0])
