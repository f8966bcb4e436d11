"""Template facts shared across the files of an audit, and kept between runs.

Quants of one model carry the same templates: their facts are gathered once per distinct template text and
vocabulary, and a second quant whose metadata bytes match (per-quant keys aside) skips even building its
template set. With ``AnalysisCache.on_disk()`` the facts persist in the user's cache folder
(``templates.factstore``), so auditing a template seen before costs a header read.
"""

from __future__ import annotations

import functools
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gguftpl.analysis import SetFacts, gather_set
from gguftpl.errors import GGUFTplError
from gguftpl.templates.facts import VocabFacts, vocab_facts
from gguftpl.templates.factstore import FactsStore


@dataclass(frozen=True)
class _Loaded:
    """One file's template set and the facts the rules read, shared by files with the same metadata."""

    tset: Any
    upstream_repo: str | None
    upstream_how: str
    facts: SetFacts
    vocab: VocabFacts


class AnalysisCache:
    """Template facts shared across files and calls (e.g. a long-running process), so a template is rendered
    once however many files carry it; the rules, which are cheap, run for every file with its own name.

    Three levels: ``_facts`` maps (template text, special tokens, llama.cpp asked) to its facts; ``_sets`` counts
    the template sets analysed; ``_last`` holds everything loaded for the last file (its template set and
    vocabulary too) under a hash of its raw metadata bytes (minus keys that differ between quants and that
    template sets never read), so the next quant of a model skips even decoding its vocabulary. One file's
    worth only: the folder's quants come one after another, and memory stays bounded by the largest file
    however many files a folder holds (issue 27: 100 files of 262k tokens held 4.6 GB when every file's was
    kept). ``on_disk()`` keeps the facts between runs too (``templates.factstore``)."""

    @classmethod
    def on_disk(cls, *, read_disk: bool = True) -> AnalysisCache:
        """A cache whose template facts persist in the user's cache folder (what the CLI uses); with
        ``read_disk=False`` it only writes there, and every fact it answers with was gathered by this process."""
        from gguftpl.templates.factstore import open_store

        return cls(open_store(read_disk=read_disk))

    def __init__(self, store: FactsStore | None = None) -> None:
        self._facts = store if store is not None else FactsStore()
        self._sets: set[str] = set()
        self._last: tuple[str, _Loaded] | None = None
        self._file_memo: dict[str, tuple[str | None, str, int | None]] = {}
        """``_file_facts`` gathered by this process, under the file's raw metadata (a few strings each)."""
        self.hits = 0
        """Files whose template set was analysed before (either level)."""
        self.misses = 0
        """Template sets analysed."""
        self.header_hits = 0
        """Files answered from the raw-metadata level, without building a template set."""
        self.parse_checks = 0
        """Distinct template texts this cache asked llama.cpp about."""
        self.parse_skipped = ""
        """Why the llama.cpp parse check did not run (xllamacpp not installed), once it was wanted."""
        self.engines: tuple[str, ...] | None = None
        """The other Jinja engines to ask (``hfjs``, ``minijinja/tgi``, ...): None for every one, () for none. Only
        the installed ones are asked; a runtime whose engine is missing says so in the runtime view."""

    @property
    def disk_use(self) -> str:
        """How facts kept beside the store (Ollama's Go facts) may use the folder: as the store does."""
        return self._facts.disk_use

    @property
    def gathered(self) -> int:
        """Templates whose facts were gathered (rendered) afresh, not read from memory or the disk."""
        return self._facts.gathered

    def _other_engines(self, engine: str) -> tuple[tuple[str, str], ...]:
        """(engine id, version) of the installed other engines this audit asks (none with ``--engine hf-only``)."""
        if engine == "hf-only":
            return ()
        from gguftpl.engines import registry

        wanted = registry.OTHER_ENGINES if self.engines is None else self.engines
        out = []
        for eid in wanted:
            available = registry.availability(eid)
            if available.installed:
                out.append((eid, available.version))
        return tuple(out)

    def load(self, header: Any, engine: str) -> tuple[_Loaded, bool]:
        """Everything the rules read about ``header``'s file, and whether its template set was seen before."""
        from gguftpl.gguf.templateset import load_templateset

        others = self._other_engines(engine)
        engine = f"{engine}|{','.join(f'{e}={v}' for e, v in others)}" if others else engine
        header_key = _header_key(header, engine)
        if header_key and self._last is not None and self._last[0] == header_key:
            self.hits += 1
            self.header_hits += 1
            return self._last[1], True
        self._last = None  # the previous file's vocabulary goes before this one's is decoded
        tset = load_templateset(header)
        names = self._llamacpp_names(engine)
        self._prestart(tset, names, others)  # the workers start while this process fingerprints the vocabulary
        facts, (repo, how, invalid_utf8) = self._both(tset, header_key, names, others)
        vocab = vocab_facts(tset, facts.templates, invalid_utf8=invalid_utf8)
        set_key = _set_key(tset, header, engine)
        seen = set_key in self._sets
        if seen:
            self.hits += 1
        else:
            self.misses += 1
            self._sets.add(set_key)
        self.parse_checks += facts.llamacpp_asked
        loaded = _Loaded(tset, repo, how, facts, vocab)
        if header_key:
            self._last = (header_key, loaded)
        return loaded, seen

    def _both(
        self, tset: Any, header_key: str | None, names: tuple[str, ...], others: tuple[tuple[str, str], ...]
    ) -> tuple[Any, tuple[str | None, str, int | None]]:
        """The template facts and the file's own facts, side by side: the file's (the vocabulary's fingerprint
        and UTF-8 walk, ~0.3 s for 262k tokens) in a thread while this one waits on the engine workers' renders.
        Both only read the header, whose bytes are all in memory once it is parsed."""
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="gguftpl-file-facts") as pool:
            file_facts = pool.submit(self._file_facts, tset, header_key)
            try:
                facts = gather_set(tset, llamacpp_names=names, memo=self._facts, engines=others)
            finally:
                found = file_facts.result()  # its errors are raised here, as they were inline
        return facts, found

    def _file_facts(self, tset: Any, header_key: str | None) -> tuple[str | None, str, int | None]:
        """The facts of a file that depend on its metadata alone: the upstream discovery (metadata, templates,
        then the tokenizer's fingerprint, which decodes the whole vocabulary) and the first invalid UTF-8 byte
        of the vocabulary (a walk over every token): 0.1-0.4 s each for a 262k-token file. Kept on disk
        beside the template facts, under the file's raw metadata and the catalog it was matched against; and in
        memory, so the quants of one conversion (their metadata equal but for the per-quant keys) and the audits
        of one file before and after a patch walk each vocabulary once, not once per audit. An upstream answer
        read from disk is found again where that is cheap (``_confirmed``): a fix line never comes from the cache
        alone."""
        if header_key is None:
            return (*_find_upstream(tset), tset.invalid_token_utf8())
        key = _file_key(header_key)
        found = self._file_memo.get(key)
        if found is None and self._facts.folder is not None:
            found = _confirmed(tset, self._facts.read_file_facts(key))
            if found is None:
                self._facts.remove_file_facts(key)
        if found is not None:
            return found
        repo, how = _find_upstream(tset)
        invalid = tset.invalid_token_utf8()
        if not how.startswith("discovery failed"):  # a failure is not a fact about the file
            self._file_memo[key] = (repo, how, invalid)
            if self._facts.folder is not None:
                self._facts.write_file_facts(key, (repo, how, invalid))
        return repo, how, invalid

    def _prestart(self, tset: Any, names: tuple[str, ...], others: tuple[tuple[str, str], ...] = ()) -> None:
        """Start every worker the facts need (the render and llama.cpp workers, those of the ``others`` engines) at
        once when some template of ``tset`` has no facts yet, before the file's own facts (the fingerprint) are
        gathered: each starts while this process works (a warm run starts none)."""
        from gguftpl.gguf.templateset import special_token_text, template_special_tokens
        from gguftpl.templates.factstore import facts_key

        bos, eos = special_token_text(tset, "bos"), special_token_text(tset, "eos")
        specials = template_special_tokens(tset)
        from gguftpl.analysis import ENGINE_TEMPLATES

        keys = [
            facts_key(t.sha256, bos, eos, n in names, specials, others if n in ENGINE_TEMPLATES else ())
            for n, t in tset.templates.items()
        ]
        if all(self._facts.get(k) is not None for k in keys):
            return
        from gguftpl.engines.transformers import get_worker

        get_worker().prestart()
        if names:
            from gguftpl.engines.llamacpp import parse_check_prestart

            parse_check_prestart()
        if others:
            from gguftpl.engines import registry

            for eid, _version in others:
                prestart = getattr(registry.get(eid), "prestart", None)
                if callable(prestart):
                    prestart()

    def _llamacpp_names(self, engine: str) -> tuple[str, ...]:
        """The templates llama.cpp is asked to load: those it reads, when xllamacpp is installed.
        ``--engine llamacpp`` loads the file itself, which reports a refused default, so only ``tool_use``
        is asked then (llama.cpp drops one it cannot parse silently)."""
        if engine == "hf-only" or self.parse_skipped:
            return ()
        from gguftpl.engines.llamacpp_env import llamacpp_available

        if not llamacpp_available():  # not installed: the audit goes on without llama.cpp
            from gguftpl.engines.llamacpp_env import NOT_INSTALLED

            self.parse_skipped = NOT_INSTALLED
            return ()
        from gguftpl.engines.llamacpp_choice import LOADED

        return LOADED if engine != "llamacpp" else LOADED[1:]

    def __len__(self) -> int:
        return len(self._sets)


def _set_key(tset: Any, header: Any, engine: str) -> str:
    """One analysis: the template names and texts, the special tokens passed to templates, the engine, and the
    vocabulary (equal templates over another vocabulary are another analysis: the token rules read it)."""
    from gguftpl.gguf.templateset import special_token_text, template_special_tokens

    h = hashlib.sha256(f"engine={engine}\n".encode())
    for role in ("bos", "eos"):
        h.update(f"{role}={special_token_text(tset, role)!r}\n".encode("utf-8", "surrogatepass"))
    h.update(f"specials={sorted(template_special_tokens(tset).items())!r}\n".encode("utf-8", "surrogatepass"))
    for name, tpl in tset.templates.items():
        h.update(f"{name}={tpl.sha256}\n".encode("utf-8", "surrogatepass"))
    for key in _VOCAB_KEYS:
        h.update(_raw_value(header, key))
    return h.hexdigest()


# The arrays the token rules read through the template set, hashed as stored (never decoded for this).
_VOCAB_KEYS = ("tokenizer.ggml.tokens", "tokenizer.ggml.token_type")


def _raw_value(header: Any, key: str) -> bytes:
    from gguftpl.gguf.reader import LazyArray

    kv = getattr(header, "kv", {}).get(key)
    value = getattr(kv, "value", None)
    if isinstance(value, LazyArray):
        try:
            return hashlib.sha256(value.raw()).digest()
        except (OSError, GGUFTplError):
            return b"unreadable"
    return repr(value).encode("utf-8", "surrogatepass")


# Metadata that differs between quants of one model and that a template set never reads (a test checks
# that load_templateset gives equal template sets for files that differ only here).
_QUANT_KEYS = ("general.file_type", "general.quantization_version")
_QUANT_PREFIXES = ("quantize.", "split.")


def _header_key(header: Any, engine: str) -> str | None:
    """sha256 of the raw bytes of every metadata pair except the per-quant ones; None when the bytes
    cannot be re-read. Headers that kept their source (remote reads: the bytes stay in its buffer) are
    re-read from it, local files from their path."""
    path = getattr(header, "path", None)
    kvs = getattr(header, "kv", None)
    start, end = getattr(header, "kv_start", None), getattr(header, "kv_end", None)
    if not (isinstance(kvs, dict) and isinstance(start, int) and isinstance(end, int)):
        return None
    raw = _raw_metadata(getattr(header, "_source", None), path, start, end)
    if raw is None or len(raw) != end - start:
        return None
    h = hashlib.sha256(f"engine={engine}\nbyteorder={getattr(header, 'byteorder', '')}\n".encode())
    for kv in kvs.values():
        if kv.key in _QUANT_KEYS or kv.key.startswith(_QUANT_PREFIXES):
            continue
        h.update(raw[kv.offset - start : kv.end - start])
    return h.hexdigest()


def _raw_metadata(source: Any, path: Any, start: int, end: int) -> bytes | None:
    read_range = getattr(source, "read_range", None)
    if callable(read_range):
        try:
            data = read_range(start, end)
        except (OSError, GGUFTplError):
            data = None
        if isinstance(data, bytes):
            return data
    if not isinstance(path, str):
        return None
    try:
        if not os.path.isfile(path):
            return None
        with open(path, "rb") as fh:
            fh.seek(start)
            return fh.read(end - start)
    except OSError:
        return None


def _file_key(header_key: str) -> str:
    """The file's raw metadata (``_header_key``), the code and the catalog it is matched against."""
    from gguftpl.templates.factstore import code_identity
    from gguftpl.upstream.catalog import catalog_dir

    try:
        catalog = _catalog_identity(str(catalog_dir()))
    except GGUFTplError:  # no catalog found: discovery says so, and that answer is keyed as such
        catalog = "catalog=missing"
    key = "\n".join((code_identity(), catalog, header_key))
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


@functools.lru_cache(maxsize=4)
def _catalog_identity(root: str) -> str:
    """A digest of the catalog's files (names and content, never mtimes): once per process, not once per file."""
    from gguftpl.templates.factstore import source_digest

    try:
        return f"catalog={source_digest(Path(root), None)}"
    except OSError:
        return "catalog=unreadable"


FileFacts = tuple[str | None, str, int | None]
"""A file's upstream repo, how it was found, and its first invalid UTF-8 byte."""


def _confirmed(tset: Any, found: FileFacts | None) -> FileFacts | None:
    """A file's cached facts with the upstream answer found again where that is cheap (``confirm_upstream``):
    the fix line never comes from the cache alone. None: no entry, or one whose upstream cannot be right."""
    if found is None:
        return None
    try:
        from gguftpl.upstream.discover import confirm_upstream
    except ImportError:  # no discovery here: no upstream, as _find_upstream says
        return None, "", found[2]
    try:
        upstream = confirm_upstream(tset, found[0], found[1])
    except GGUFTplError:  # no catalog: discovery says so when it runs again
        return None
    return None if upstream is None else (*upstream, found[2])


def _find_upstream(tset: Any) -> tuple[str | None, str]:
    """Ask the hub helper's discovery (metadata and bundled catalog only, no network) if it is installed."""
    try:
        from gguftpl.upstream.discover import find_upstream_repo
    except ImportError:
        return None, ""
    try:
        repo, how = find_upstream_repo(tset)
    except GGUFTplError as exc:
        return None, f"discovery failed: {exc}"
    return repo, how
