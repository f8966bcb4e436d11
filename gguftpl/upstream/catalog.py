"""The bundled catalog of known-good upstream chat templates, and matching a GGUF against it.

One copy on disk: the top-level ``upstream_templates/`` folder of the source tree (index.json +
``<org>/<repo>/<name>.jinja``, provenance per template, README and licence beside them). A built wheel carries
that same folder as ``gguftpl/upstream_templates/`` (pyproject.toml maps the package name onto the folder),
so an installed gguftpl finds it inside the package, and a source checkout or editable install finds it
beside the package. ``GGUFTPL_CATALOG`` overrides both, for tests and experiments.

Every template is checked against the sha256 in index.json when it is read, so a damaged catalog is an
error, never a silently different template. ``tokenizers.json`` beside the index holds tokenizer fingerprints
of model families (:mod:`gguftpl.upstream.fingerprint`); an entry's ``family`` links it to one, so a GGUF whose
name and templates match nothing is still led to its family's templates by its vocabulary.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gguftpl.errors import HubError

STATUSES = ("EXACT", "CORROBORATED", "PROXY")
PROVEN = {
    "EXACT": "byte-verified: a byte copy of the fetched upstream file",
    "CORROBORATED": "not byte-verified: text several independent copies agree on",
    "PROXY": "not byte-verified: stand-in text for a file that could not be fetched",
}
"""What each catalog status proves, in the words patch, diff and inspect print."""


def proven(status: str) -> str:
    """``PROXY (not byte-verified: …)``: a catalog status and what it proves."""
    return f"{status} ({PROVEN.get(status, 'unknown status')})"


CATALOG_FOLDER = "upstream_templates"


def catalog_dir() -> Path:
    """Where the catalog is: ``GGUFTPL_CATALOG``, else inside the installed package, else beside it."""
    env = os.environ.get("GGUFTPL_CATALOG")
    if env:
        return Path(env)
    package = Path(__file__).resolve().parent.parent
    looked = (package / CATALOG_FOLDER, package.parent / CATALOG_FOLDER)  # wheel; source tree or editable
    for root in looked:
        if (root / "index.json").is_file():
            return root
    raise HubError(f"the bundled template catalog is missing (looked in {looked[0]} and {looked[1]})")


@dataclass(frozen=True)
class CatalogTemplate:
    name: str
    file: str
    sha256: str
    length: int
    status: str
    source: str
    note: str = ""
    git_blob_sha1: str = ""
    """``git hash-object`` of the file: finds it in llama.cpp's (or any) git history."""


@dataclass
class CatalogEntry:
    repo_id: str
    revision: str | None
    """HF commit the templates were taken from, when known."""
    revision_note: str
    complete: bool
    """True when the entry lists every template the repo ships."""
    status: str
    """Weakest status of its templates."""
    model_license: str
    templates: dict[str, CatalogTemplate]
    notes: str = ""
    root: Path = field(default_factory=Path, repr=False)
    family: str = ""
    """The model family whose templates these are (``Qwen2.5``); a tokenizer fingerprint may lead to it."""

    @property
    def label(self) -> str:
        """How a match names the entry: the family first, so a 0.5B Coder is not said to be a 7B repo."""
        return f"the {self.family} family's catalog entry {self.repo_id}" if self.family else self.repo_id

    def text(self, name: str) -> str:
        t = self.templates[name]
        path = self.root / t.file
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise HubError(f"catalog file {t.file} cannot be read: {exc.strerror or exc}") from None
        digest = hashlib.sha256(data).hexdigest()
        if digest != t.sha256:
            raise HubError(f"catalog file {t.file} is damaged: sha256 {digest[:12]}… != index {t.sha256[:12]}…")
        return data.decode("utf-8")

    def to_upstream(self) -> Any:
        from gguftpl.upstream.config import UpstreamConfig, UpstreamSpecial

        order = sorted(self.templates, key=lambda n: (n != "default", n))
        warnings = []
        for n in order:
            t = self.templates[n]
            if t.status == "PROXY":
                warnings.append(
                    f"catalog template {self.repo_id}:{n} is a PROXY: stand-in text, not byte-verified against "
                    "the repo (see the note in upstream_templates/index.json)"
                )
            elif t.status != "EXACT":
                warnings.append(f"catalog template {self.repo_id}:{n} is {t.status}, not a byte copy of the HF file")
        return UpstreamConfig(
            repo_id=self.repo_id,
            revision_requested=self.revision,
            commit_sha=self.revision,
            templates={n: self.text(n) for n in order},
            special=UpstreamSpecial(),
            sources={n: f"catalog:{self.templates[n].file}" for n in order},
            origin="catalog",
            location=str(self.root),
            warnings=warnings,
            files=[self.templates[n].file for n in order],
            complete=self.complete,
            statuses={n: self.templates[n].status for n in order},
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "repo_id": self.repo_id,
            "revision": self.revision,
            "revision_note": self.revision_note,
            "complete": self.complete,
            "status": self.status,
            "model_license": self.model_license,
            "templates": {
                n: {"sha256": t.sha256, "length": t.length, "status": t.status, "source": t.source, "note": t.note}
                for n, t in self.templates.items()
            },
            "notes": self.notes,
            "family": self.family,
        }


@dataclass
class Catalog:
    root: Path
    entries: list[CatalogEntry]
    families: list[Any] = field(default_factory=list)
    """:class:`gguftpl.upstream.fingerprint.TokenizerFamily` records (``tokenizers.json``)."""
    tool_facts: dict[str, tuple[bool, tuple[str, ...]]] = field(default_factory=dict)
    """Template sha256 -> (its AST puts the tool schemas in the prompt, the control markers it writes), measured
    once for every catalog template (``tool_templates.json``, checked by ``tests/test_upstream_catalog.py``): the
    repair of a file (``gguftpl.repair``) needs no Jinja parser for them."""

    def by_family(self, family: str) -> list[CatalogEntry]:
        return [e for e in self.entries if e.family and e.family == family]

    def get(self, repo_id: str) -> CatalogEntry | None:
        low = repo_id.lower()
        for e in self.entries:
            if e.repo_id.lower() == low:
                return e
        return None

    def by_sha256(self, sha256: str) -> list[tuple[CatalogEntry, str]]:
        return [(e, n) for e in self.entries for n, t in e.templates.items() if t.sha256 == sha256]

    def by_name(self, name: str) -> list[CatalogEntry]:
        """Entries whose repo name matches a model name (case and punctuation ignored)."""
        key = _norm(name)
        if not key:
            return []
        return [e for e in self.entries if _norm(e.repo_id.split("/", 1)[1]) == key]


def _norm(s: str) -> str:
    return "".join(c for c in s.lower() if c.isalnum())


_CACHE: dict[Path, Catalog] = {}


def load_catalog(path: str | os.PathLike[str] | None = None) -> Catalog:
    root = Path(path) if path is not None else catalog_dir()
    root = root.resolve()
    if root in _CACHE:
        return _CACHE[root]
    try:
        index = json.loads((root / "index.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise HubError(f"catalog index {root / 'index.json'} cannot be read: {exc}") from None
    entries: list[CatalogEntry] = []
    try:
        for e in index["entries"]:
            templates = {
                n: CatalogTemplate(
                    name=n,
                    file=t["file"],
                    sha256=t["sha256"],
                    length=int(t["length"]),
                    status=t["status"],
                    source=t.get("source", ""),
                    note=t.get("note", "") or "",
                    git_blob_sha1=t.get("git_blob_sha1", "") or "",
                )
                for n, t in e["templates"].items()
            }
            entries.append(
                CatalogEntry(
                    repo_id=e["repo_id"],
                    revision=e.get("revision"),
                    revision_note=e.get("revision_note") or "",
                    complete=bool(e.get("complete", True)),
                    status=e["status"],
                    model_license=e.get("model_license", ""),
                    templates=templates,
                    notes=e.get("notes", "") or "",
                    root=root,
                    family=e.get("family", "") or "",
                )
            )
    except (KeyError, TypeError, ValueError) as exc:
        raise HubError(f"catalog index {root / 'index.json'} is malformed: {exc!r}") from None
    from gguftpl.upstream.fingerprint import load_families

    cat = Catalog(root, entries, load_families(root), _load_tool_facts(root))
    _CACHE[root] = cat
    return cat


TOOL_FACTS_FILE = "tool_templates.json"


def _load_tool_facts(root: Path) -> dict[str, tuple[bool, tuple[str, ...]]]:
    """``tool_templates.json`` beside the index (absent or malformed: none, and the repair parses the templates)."""
    try:
        data = json.loads((root / TOOL_FACTS_FILE).read_text(encoding="utf-8"))
        out = {}
        for sha, t in data["templates"].items():
            renders, markers = t["renders_tools"], t["markers"]
            if isinstance(renders, bool) and isinstance(markers, list) and all(isinstance(m, str) for m in markers):
                out[sha] = (renders, tuple(markers))
        return out
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def measure_tool_facts(text: str) -> tuple[bool, tuple[str, ...]]:
    """(the template's AST puts the tool schemas in the prompt, the control markers it writes): what
    ``tool_templates.json`` records. Parsing runs no template code."""
    from gguftpl.gguf.tokens import control_markers
    from gguftpl.templates import static

    ast = static.parse_template(text)
    return bool(static.data_flow(ast, text, "tools").rendered), tuple(control_markers(static.literal_text(ast)))


LIST_HINT = "`gguftpl catalog` lists the ids"
"""Where every error about a catalog id points: the command that lists them."""


def find_entry(repo_id: str, catalog: Catalog | None = None) -> CatalogEntry:
    """The entry ``repo_id`` (any case); a ``HubError`` naming the closest ids and ``gguftpl catalog`` otherwise."""
    import difflib

    cat = catalog if catalog is not None else load_catalog()
    entry = cat.get(repo_id)
    if entry is not None:
        return entry
    ids = {e.repo_id.lower(): e.repo_id for e in cat.entries}
    close = [ids[c] for c in difflib.get_close_matches(repo_id.lower(), list(ids), n=3, cutoff=0.6)]
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    raise HubError(f"{repo_id} is not in the bundled catalog ({hint}{LIST_HINT})")


def entry_summary(entry: CatalogEntry, catalog: Catalog | None = None) -> dict[str, Any]:
    """What ``gguftpl catalog`` shows of an entry: its id, status and provenance (revision, licence, each template's
    status, source and git blob) and whether each template puts the tool schemas in the prompt (``tools``: the
    names that do, from ``tool_templates.json``, measured when a template is not in it)."""
    cat = catalog if catalog is not None else load_catalog()
    templates: dict[str, Any] = {}
    for name, t in sorted(entry.templates.items(), key=lambda kv: (kv[0] != "default", kv[0])):
        facts = cat.tool_facts.get(t.sha256)
        renders = facts[0] if facts is not None else measure_tool_facts(entry.text(name))[0]
        templates[name] = {
            "status": t.status,
            "proven": PROVEN.get(t.status, "unknown status"),
            "renders_tools": renders,
            "sha256": t.sha256,
            "length": t.length,
            "source": t.source,
            "note": t.note,
            "git_blob_sha1": t.git_blob_sha1,
        }
    return {
        "id": entry.repo_id,
        "status": entry.status,
        "family": entry.family or None,
        "revision": entry.revision,
        "revision_note": entry.revision_note,
        "complete": entry.complete,
        "model_license": entry.model_license,
        "templates": templates,
        "tools": [n for n, t in templates.items() if t["renders_tools"]],
        "notes": entry.notes,
    }


def catalog_upstream(repo_id: str | None = None, *, tset: Any = None, accept_family: bool = True) -> Any:
    """``--from-catalog [ID]``: the catalog entry as an UpstreamConfig; without ID, discover it. With ``tset``
    the first warning says what matched (:func:`relate`); a named entry that is a neighbour whose vocabulary or
    special tokens differ from the GGUF's is refused unless ``accept_family``."""
    cat = load_catalog()
    if repo_id is None:
        if tset is None:
            raise HubError("--from-catalog needs a repo id when the GGUF cannot be matched")
        entry, how = match_catalog(tset, cat)
        if entry is None:
            raise HubError(f"no catalog entry matches this GGUF ({how}); name one: --from-catalog ID ({LIST_HINT})")
        cfg = entry.to_upstream()
        family = f" (the {entry.family} family's templates)" if entry.family else ""
        kind = _kind_of(how)
        cfg.warnings.insert(0, f"catalog entry {entry.repo_id}{family} chosen by {how}: {kind}")
        return cfg
    entry = find_entry(repo_id, cat)
    cfg = entry.to_upstream()
    if tset is not None:
        rel = relate(tset, entry, cat)
        if rel.kind == NEIGHBOUR and rel.differs and not accept_family:
            raise HubError(
                f"refusing --from-catalog {entry.repo_id}: a neighbour, not this GGUF's upstream ({rel.how}), and "
                f"{'; '.join(rel.differs)}; --accept-family applies its templates anyway"
            )
        cfg.warnings.insert(0, rel.text())
    return cfg


EXACT_UPSTREAM = "exact upstream"
SAME_FAMILY = "same family"
NEIGHBOUR = "neighbour"


def _kind_of(how: str) -> str:
    """What a match says: the file's own upstream (a template of it or its name) or a family's entry."""
    return SAME_FAMILY if ("tokenizer" in how or "family's catalog entry" in how) else EXACT_UPSTREAM


@dataclass(frozen=True)
class Relation:
    """How a catalog entry relates to a GGUF: ``exact upstream``, ``same family`` or ``neighbour``."""

    entry: CatalogEntry
    kind: str
    how: str
    """What matched (or what the GGUF matches instead)."""
    differs: tuple[str, ...] = ()
    """For a neighbour: how its vocabulary or special tokens differ from the GGUF's (empty: none shown)."""

    def text(self) -> str:
        if self.kind != NEIGHBOUR:
            return f"catalog entry {self.entry.repo_id}: {self.kind} ({self.how})"
        if self.differs:
            differs = "; ".join(self.differs)
            return f"catalog entry {self.entry.repo_id}: a neighbour ({self.how}), applied as asked: {differs}"
        return (
            f"catalog entry {self.entry.repo_id}: a neighbour, not this GGUF's upstream ({self.how}); its "
            "templates' markers are tokens of this vocabulary, and no tokenizer fingerprint tells them apart"
        )


def relate(tset: Any, entry: CatalogEntry, catalog: Catalog) -> Relation:
    """What ``entry`` is to the GGUF of ``tset``: the entry the GGUF matches (by template, name or tokenizer), or
    a neighbour; for a neighbour, what shows its vocabulary or special tokens differ: the GGUF's tokenizer is
    another family's, or the markers its templates write are not tokens of the GGUF's vocabulary."""
    matched, how = match_catalog(tset, catalog)
    if matched is not None and matched.repo_id == entry.repo_id:
        return Relation(entry, _kind_of(how), how)
    found = f"this GGUF matches {matched.repo_id}: {how}" if matched is not None else how
    differs: list[str] = []
    family = _file_family(tset, catalog)
    missing, markers = _missing_markers(tset, entry)
    # an entry without a fingerprint differs in family only for want of evidence: every control marker its
    # templates write being a token of this vocabulary is evidence of the same tokenizer family
    vouched = not entry.family and bool(markers) and not missing
    if family is not None and family != entry.family and not vouched:
        theirs = f"the {entry.family} family's" if entry.family else "of no fingerprinted family"
        differs.append(f"this GGUF's tokenizer is the {family} family's, {entry.repo_id}'s is {theirs}")
    if missing:
        shown = ", ".join(repr(m) for m in missing[:4])
        differs.append(f"its templates write {shown}, not a token of this GGUF's vocabulary")
    return Relation(entry, NEIGHBOUR, found, tuple(differs))


def _file_family(tset: Any, catalog: Catalog) -> str | None:
    from gguftpl.upstream.fingerprint import could_match, fingerprint, match_family

    if not could_match(tset, catalog.families):
        return None
    family, _ = match_family(fingerprint(tset), catalog.families)
    return family.family if family is not None else None


def _missing_markers(tset: Any, entry: CatalogEntry) -> tuple[list[str], list[str]]:
    """Control-shaped markers (``<|…|>``) the entry's templates write that are not tokens of the vocabulary, and
    every such marker they write (none when the file has no vocabulary to look them up in)."""
    if not getattr(tset, "has_vocab", False):
        return [], []
    from gguftpl.gguf.tokens import control_markers
    from gguftpl.templates import static

    texts: list[str] = []
    for name in entry.templates:
        try:
            texts += static.literal_text(static.parse_template(entry.text(name)))
        except Exception:  # noqa: S112 - a catalog template that does not parse writes nothing
            continue
    markers = control_markers(texts)
    return [m for m in markers if tset.token_id(m) is None], markers


def fallback_entry(repo_id: str, revision: str | None) -> Any:
    """A catalog stand-in for an unreachable Hub: only when the entry's revision is known and matches."""
    entry = load_catalog().get(repo_id)
    if entry is None or not entry.revision:
        return None
    if revision not in (None, "main") and revision != entry.revision:
        return None
    return entry.to_upstream()


# --------------------------------------------------------------------------------------------- matching


def match_catalog(tset: Any, catalog: Catalog) -> tuple[CatalogEntry | None, str]:
    """(catalog entry or None, how). A template hash match wins; names break ties and stand alone; last, the
    tokenizer's fingerprint names a family (:func:`match_tokenizer`)."""
    entry, how = match_templates_and_names(tset, catalog)
    if entry is not None or "several" in how:
        return entry, how
    by_tokenizer, why = match_tokenizer(tset, catalog)
    if by_tokenizer is not None:
        return by_tokenizer, why
    return None, f"{how}; {why}" if why else how


def match_tokenizer(tset: Any, catalog: Catalog) -> tuple[CatalogEntry | None, str]:
    """The catalog entry of the family the GGUF's tokenizer belongs to (fingerprinted only when some family
    could match: same tokenizer model and a vocabulary at least as large; else no entry and no word)."""
    from gguftpl.upstream.fingerprint import could_match, fingerprint, match_family

    if not could_match(tset, catalog.families):
        return None, ""  # nothing worth saying: no family has this tokenizer model and size
    family, how = match_family(fingerprint(tset), catalog.families)
    if family is None:
        return None, how
    entries = catalog.by_family(family.family)
    if not entries:
        return None, f"{how}, but the catalog holds no templates for that family"
    if len(entries) > 1:
        names = _model_names(dict(getattr(tset, "provenance", {}) or {}))
        named = [e for name in names for e in catalog.by_name(name) if e in entries]
        if not named:
            return None, f"{how}: several catalog entries: " + ", ".join(e.repo_id for e in entries)
        entries = named[:1]
    return entries[0], f"{how}, catalog entry {entries[0].repo_id}"


def match_templates_and_names(tset: Any, catalog: Catalog) -> tuple[CatalogEntry | None, str]:
    prov: dict[str, Any] = dict(getattr(tset, "provenance", {}) or {})
    names = _model_names(prov)
    by_hash: dict[str, tuple[CatalogEntry, str]] = {}
    for tpl in getattr(tset, "templates", {}).values():
        for entry, tname in catalog.by_sha256(tpl.sha256):
            how = f"catalog match: template {tpl.name} sha256 = {tname} of {entry.label}"
            by_hash.setdefault(entry.repo_id, (entry, how))
    if by_hash:
        if len(by_hash) == 1:
            entry, how = next(iter(by_hash.values()))
            return entry, how
        for name in names:
            for entry in catalog.by_name(name):
                if entry.repo_id in by_hash:
                    return entry, by_hash[entry.repo_id][1] + f" and model name {name!r}"
    for name in names:
        found = catalog.by_name(name)
        if len(found) == 1:
            return found[0], f"catalog match: model name {name!r}"
    if by_hash:
        return None, "templates match several catalog entries: " + ", ".join(sorted(by_hash))
    return None, "no catalog entry matches the templates or the model name"


def _model_names(prov: dict[str, Any]) -> list[str]:
    out: list[str] = []

    def add(v: Any) -> None:
        if isinstance(v, str) and v.strip() and v not in out:
            out.append(v.strip())

    for i in range(8):
        add(prov.get(f"general.base_model.{i}.name"))
    add(prov.get("general.name"))
    base, size, fine = prov.get("general.basename"), prov.get("general.size_label"), prov.get("general.finetune")
    if isinstance(base, str):
        parts = [base] + [p for p in (size, fine) if isinstance(p, str) and p]
        add("-".join(parts))
        add(base)
    # a quantizer's name like "Hermes-2-Pro-Mistral-7B-GGUF" or "... Q4_K_M"
    for v in list(out):
        stripped = re.sub(r"[-_ .](gguf|q\d\w*|iq\d\w*|f16|bf16|f32)$", "", v, flags=re.I)
        add(stripped)
    return out
