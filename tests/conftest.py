"""Shared fixtures: GGUFs generated in code, the committed samples, and the real corpus.

The real corpus (SmolLM2 and llama.cpp's vocab-only GGUFs) is fetched by scripts/fetch_corpus.py, which the
test command runs first; a test that needs a file that is not there is skipped with the reason, so a run
without the corpus is visible as skips, never as silent passes.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"
DATA = Path(__file__).resolve().parent / "data"


def _compile_checkout() -> None:
    """The checkout's bytecode, written once (and again for a changed file): where PYTHONDONTWRITEBYTECODE is set
    (this machine's environment sets it), no process writes it, and every child the suite starts (the CLI, the
    render and llama.cpp workers, the MCP servers; hundreds) compiled the gguftpl modules it imports afresh: an
    audit 1.10 -> 0.84 s of CPU; compiling the 312 files costs 1.2 s once. An installed gguftpl has its bytecode from
    pip; Python reads a .pyc under the variable, it only writes none."""
    import compileall

    if sys.flags.dont_write_bytecode:
        for folder in ("gguftpl", "tests", "scripts"):
            compileall.compile_dir(ROOT / folder, quiet=2)


_compile_checkout()

sys.path.insert(0, str(ROOT / "scripts"))
from fetch_corpus import FILES as CORPUS_FILES  # noqa: E402
from fetch_corpus import corpus_path  # noqa: E402

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
# huggingface_hub reads these at import and, on first use, fetches {ENDPOINT}/api/agent-harnesses on its own:
# point every request a test does not aim itself at 127.0.0.1 (the discard port), never at the internet,
# and keep its cache out of the user's home.
os.environ["HF_ENDPOINT"] = "http://127.0.0.1:9"
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ["HF_HOME"] = tempfile.mkdtemp(prefix="gguftpl-tests-hf-")
atexit.register(shutil.rmtree, os.environ["HF_HOME"], ignore_errors=True)  # one per run, not one left per run
# gguftpl's own cache of template facts: one per run too, never the user's
os.environ["GGUFTPL_CACHE_DIR"] = tempfile.mkdtemp(prefix="gguftpl-tests-cache-")
atexit.register(shutil.rmtree, os.environ["GGUFTPL_CACHE_DIR"], ignore_errors=True)

CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
    "'\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def build_gguf(
    path: Path,
    *,
    templates: dict[str, str] | None = None,
    list_names: bool = True,
    specials: tuple[str, ...] = ("<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>"),
    bos: str | None = "<|im_start|>",
    eos: str | None = "<|im_end|>",
    add_bos: bool = False,
    tensors: bool = True,
    seed: int | None = 1,
    extra_kv: dict[str, Any] | None = None,
    context_length: int = 4096,
) -> Path:
    """A small, llama.cpp-loadable GGUF: byte-level BPE vocab + ``specials`` as CONTROL tokens,
    one-block llama body (unless ``tensors=False``), and the given chat templates (name -> text;
    ``default`` goes to tokenizer.chat_template)."""
    from gguftpl.gguf.reader import ValueType
    from gguftpl.gguf.tinymodel import byte_level_vocab, tiny_llama_kv, tiny_llama_tensors, tokenizer_kv
    from gguftpl.gguf.writer import Typed, write_gguf

    toks, types, merges = byte_level_vocab(specials)
    kv: dict[str, Any] = {**tiny_llama_kv(context_length=context_length), "general.name": path.stem}
    kv.update(tokenizer_kv(toks, types, merges, bos=bos, eos=eos, add_bos=add_bos))
    templates = dict(templates or {})
    if "default" in templates:
        kv["tokenizer.chat_template"] = templates.pop("default")
    for name, text in sorted(templates.items()):
        kv[f"tokenizer.chat_template.{name}"] = text
    if templates and list_names:
        kv["tokenizer.chat_templates"] = Typed(ValueType.ARRAY, sorted(templates), ValueType.STRING)
    kv.update(extra_kv or {})
    write_gguf(path, kv, tiny_llama_tensors(len(toks), seed=seed) if tensors else [])
    return path


@pytest.fixture
def make_gguf(tmp_path: Path) -> Callable[..., Path]:
    """``make_gguf("name.gguf", templates={"default": CHATML}, **options)`` -> path (see build_gguf)."""

    def make(name: str = "model.gguf", **kwargs: Any) -> Path:
        return build_gguf(tmp_path / name, **kwargs)

    return make


@pytest.fixture(scope="session")
def corpus_file() -> Callable[[str], Path]:
    """``corpus_file("SmolLM2-135M-Instruct.Q4_1.gguf")`` -> path in the fetched corpus (skip if absent)."""

    def get(name: str) -> Path:
        if name not in CORPUS_FILES:
            raise KeyError(f"{name} is not a corpus file")
        path = corpus_path(name)
        if not path.exists():
            pytest.skip(f"corpus file {name} not fetched: run scripts/fetch_corpus.py")
        return path

    return get


@pytest.fixture(scope="session")
def samples_dir() -> Path:
    return SAMPLES


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A local Hub (tests/hubserver.py) that huggingface_hub reaches through HF_ENDPOINT, its log cleared."""
    from gguftpl.hubenv import headers as hub_headers
    from tests.hubserver import HubServer

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    with HubServer(tmp_path / "hub") as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        # huggingface_hub fetches its agent registry once per process on the first request headers;
        # get that over with so the request log holds only what the code under test asked for
        hub_headers()
        server.clear_log()
        yield server


@pytest.fixture(scope="session")
def xfs_dir() -> Iterator[Path]:
    """A folder on a loop-mounted XFS with reflinks (tests/xfsloop.py), one per test session; skipped with
    the reason where it cannot be made (not root, no mkfs.xfs, loop devices refused). Mounted outside pytest's
    temp folders: a run killed before its teardown leaves a mount that pytest's clean-up of old temp folders
    would trip over (EBUSY) and crash the next run with."""
    from tests.xfsloop import Unavailable, xfs_loop

    folder = Path(tempfile.mkdtemp(prefix="gguftpl-test-xfs-"))
    try:
        with xfs_loop(folder) as mnt:
            yield mnt
    except Unavailable as exc:
        pytest.skip(f"no loop-mounted XFS: {exc}")
    finally:
        if not os.path.ismount(folder / "mnt"):
            shutil.rmtree(folder, ignore_errors=True)


class _NumpyReadingIntoMemory:
    """numpy as gguf-py's reader module sees it, except that ``memmap`` reads the whole file into a plain
    array: gguf-py's parser is unchanged and parses the same bytes, without the memmap subclass's
    bookkeeping on each of the two slices it takes per token (3.5x faster on the big vocabularies)."""

    def __getattr__(self, name: str) -> object:
        import numpy as np

        value = getattr(np, name)
        setattr(self, name, value)  # looked up once: gguf-py asks millions of times
        return value

    @staticmethod
    def memmap(path: str, mode: str = "r") -> object:
        import numpy as np

        assert mode == "r"
        return np.fromfile(path, dtype=np.uint8)


def gguf_py_reader(path: Path | str) -> Any:
    """gguf-py's GGUFReader of ``path``, the file read into memory (see _NumpyReadingIntoMemory): the
    independent reader the tests check gguftpl's reader and writer against. Its ``_get`` (count items of a dtype at
    an offset, in the file's byte order) is one slice and one view of a dtype made once per (dtype, order), not
    five numpy calls (an empty array for the item size, a slice, a view, a slice, a byte-order view): the same
    arrays, and every field, string and array is still parsed by gguf-py's own code (262k-token vocabulary
    14.7 -> 8.7 s CPU)."""
    from unittest import mock

    import gguf.gguf_reader
    import numpy as np

    dtypes: dict[tuple[Any, str], Any] = {}

    class Reader(gguf.gguf_reader.GGUFReader):  # type: ignore[misc]
        def _get(self, offset: int, dtype: Any, count: int = 1, override_order: str | None = None) -> Any:
            order = self.byte_order if override_order is None else override_order
            dt = dtypes.get((dtype, order))
            if dt is None:
                dt = dtypes[(dtype, order)] = np.dtype(dtype).newbyteorder(order)
            return self.data[offset : offset + dt.itemsize * int(count)].view(dt)

    with mock.patch.object(gguf.gguf_reader, "np", _NumpyReadingIntoMemory()):
        return Reader(str(path))


@pytest.fixture(autouse=True)
def _wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Text output is fitted to $COLUMNS (gguftpl.textfit): the suite's assertions read whole report lines, so
    each test runs in a wide terminal (pytest's own output keeps the real one); the tests of the width
    (tests/test_width.py) pass --width or set COLUMNS themselves."""
    monkeypatch.setenv("COLUMNS", "10000")


@pytest.fixture(autouse=True)
def _own_hub_cache(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Each test its own huggingface_hub cache (gguftpl.hubenv reads HF_HUB_CACHE when asked): with one per run, a
    repo an earlier test on the same worker fetched from the local Hub answered a later test's offline diff from
    that cache ("Hub", at its commit), so a test's answer depended on the modules run before it on its worker."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path_factory.mktemp("hf-hub-cache")))


@pytest.fixture(autouse=True)
def _no_ollama_service_store(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine with Ollama's Linux service installed has a store in the ``ollama`` user's home, which scans and
    ``ollama://`` references look in (gguftpl.stores.ollama): no test sees it unless it names a user of its own."""
    monkeypatch.setenv("GGUFTPL_OLLAMA_USER", "")


LONG_MODULES = (
    "tests/test_counterfactual_real.py",  # 272 s (16 tests)
    "tests/test_runtime_engines.py",  # 221 s (17)
    "tests/test_liveprobes_real.py",  # 214 s (4)
    "tests/test_attacks_races.py",  # 211 s (4)
    "tests/test_reader.py",  # 330 s before the faster gguf-py reader (26)
    "tests/test_survey.py",  # 190 s (16)
    "tests/test_folderpatch.py",  # 102 s (8)
    "tests/test_live_real.py",  # 91 s (6)
    "tests/test_packaging.py",  # 36 s at load 7 (2)
    "tests/test_reflink.py",  # 28 s (7)
    "tests/test_survey_html.py",  # 26 s at load 7 (2)
    "tests/test_llamacpp_parse_check.py",  # 25 s (7)
    "tests/test_diff_offline_catalog.py",  # 17 s at load 7 (2)
    "tests/test_audit_engine.py",  # 12 s at load 7 (2)
    "tests/test_lint.py",  # 5 s with mypy's cache, 64 s without (2)
)
"""Modules whose tests take long for their number, longest first: pytest --durations, one worker, on this 2-core
machine at load 10-17 (other suites running) unless said."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The modules in the order xdist's ``--dist loadscope`` hands them to the workers (pyproject's addopts turn
    its own reorder off): LONG_MODULES first, then the others by number of tests, most first, as xdist's reorder
    sorts them. By the number of tests alone, the few-test long modules (the wheel build, mypy, the real-weight
    runs, the survey page) were handed out last: one worker ran them while the other had nothing left to do."""
    by_module: dict[str, list[pytest.Item]] = {}
    for item in items:
        by_module.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    rank = {name: i for i, name in enumerate(LONG_MODULES)}
    order = sorted(by_module, key=lambda m: (rank.get(m, len(rank)), -len(by_module[m])))
    items[:] = [item for m in order for item in by_module[m]]


def read_pty(fd: int) -> bytes:
    """Everything a child on a pty wrote, until it closed its end (Linux answers EIO then, not b"")."""
    chunks = []
    while True:
        try:
            got = os.read(fd, 65536)
        except OSError:
            break
        if not got:
            break
        chunks.append(got)
    return b"".join(chunks)
