"""Which repos a survey audits, and which of their files.

The repos come from the Hub's model listing (``HfApi.list_models`` with the ``gguf`` filter, by author or by
search text, followed page by page through the ``Link`` headers as huggingface_hub does), or from a file of
``ORG/REPO[@REV]`` lines. The listing is one remote operation (``gguftpl.remotebounds``): a page that never ends
or pages that never stop end at its deadline, and an answer that is no list of models is one line, never a
repo id built into a URL.

Of each repo's GGUFs, one per distinct quant family is read by default: the files of one model quantized the
same way (``Q4_K_S``, ``Q4_K_M``, ``Q5_K_M`` are k-quants) come from the same conversion, and each family
stands for its members; ``--all-files`` reads every one. The family is read from the quant type the name
carries, in the names gguf-py gives llama.cpp's types (``gguf.constants``); a name without one is a family of
its own. Later shards of a split set are never read (the first holds the metadata).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from gguftpl import hubenv, limits
from gguftpl.errors import HubError, UsageError

__all__ = ["ListedRepo", "list_gguf_repos", "quant_family", "read_repos_file", "sample_files"]

_SHA = re.compile(r"[0-9a-f]{40}")


@dataclass(frozen=True)
class ListedRepo:
    """One repo to survey: its id, the revision asked for, and the commit the listing named (None: unknown
    until the repo is listed)."""

    repo_id: str
    revision: str | None = None
    sha: str | None = None


def list_gguf_repos(
    *,
    authors: Sequence[str] = (),
    search: str | None = None,
    limit: int | None = None,
    endpoint: str | None = None,
    token: str | bool | None = None,
) -> list[ListedRepo]:
    """The GGUF repos of these authors (or matching ``search``), in the Hub's order, at most ``limit`` (and at
    most ``limits.MAX_SURVEY_REPOS``). ``HubError`` for a Hub that cannot be reached or answers with no list."""
    from gguftpl.remotebounds import run_bounded

    if hubenv.offline():
        raise HubError(f"{hubenv.OFFLINE_IS_SET}: cannot list the Hub's models")
    cap = min(limit or limits.MAX_SURVEY_REPOS, limits.MAX_SURVEY_REPOS)
    queries: list[dict[str, Any]] = [{"author": a} for a in authors] or [{"search": search}]
    if search and authors:
        queries = [{**q, "search": search} for q in queries]
    api = hubenv.hf_api(endpoint, token)
    seen: dict[str, ListedRepo] = {}
    for q in queries:
        what = " ".join(f"{k}={v}" for k, v in q.items())

        def page(q: dict[str, Any] = q) -> list[ListedRepo]:
            items = api.list_models(filter="gguf", expand=["sha"], limit=cap, **q)
            return [_listed(it, n) for n, it in zip(range(cap), items, strict=False)]

        try:
            with _quiet_retries():
                found = run_bounded(f"listing the Hub's GGUF models ({what})", page, max_bytes=_api_bytes)
        except HubError:
            raise
        except Exception as exc:  # noqa: BLE001 - huggingface_hub's errors and a hostile answer, in one line
            raise _listing_error(what, exc) from None
        for r in found:
            seen.setdefault(r.repo_id, r)
            if len(seen) >= cap:
                return list(seen.values())
    return list(seen.values())


@contextmanager
def _quiet_retries() -> Iterator[None]:
    """huggingface_hub's retry warnings (``'timed out' thrown while requesting …``, ``Retrying in 1s``) kept off
    stderr while the listing runs: the listing's one line says how it ended."""
    import logging

    class _NoRetries(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            msg = record.getMessage()
            return "thrown while requesting" not in msg and not msg.startswith("Retrying in")

    log = logging.getLogger("huggingface_hub.utils._http")
    quiet = _NoRetries()
    log.addFilter(quiet)
    try:
        yield
    finally:
        log.removeFilter(quiet)


def _api_bytes(url: str) -> int:
    return limits.MAX_HUB_API_BYTES


def _listed(item: Any, n: int) -> ListedRepo:
    """A listing entry, checked: a repo id that is a repo id, a commit that is a commit."""
    from gguftpl.gguf.hubref import parse_repo_spec

    rid = getattr(item, "id", None)
    if not isinstance(rid, str) or "@" in rid or "://" in rid:
        raise HubError(f"the Hub's model listing is not a list of repos (entry {n + 1}: id {str(rid)[:80]!r})")
    try:
        ref = parse_repo_spec(rid)
    except HubError:
        raise HubError(f"the Hub's model listing names no repo at entry {n + 1}: {rid[:80]!r}") from None
    sha = getattr(item, "sha", None)
    if sha is not None and not (isinstance(sha, str) and _SHA.fullmatch(sha)):
        raise HubError(f"the Hub's model listing gives {ref.repo_id} no commit but {str(sha)[:80]!r}")
    return ListedRepo(ref.repo_id, None, sha)


def _listing_error(what: str, exc: BaseException) -> HubError:
    from huggingface_hub.errors import OfflineModeIsEnabled

    if isinstance(exc, OfflineModeIsEnabled):
        return HubError(f"{hubenv.OFFLINE_IS_SET}: cannot list the Hub's models")
    status = getattr(getattr(exc, "response", None), "status_code", None)
    detail = " ".join(str(exc).split())[:200] or type(exc).__name__
    if status is not None:
        return HubError(f"HTTP {status} while listing the Hub's GGUF models ({what}): {detail}")
    if isinstance(exc, (ValueError, TypeError, KeyError, AttributeError)):
        return HubError(f"the Hub's model listing ({what}) is not a list of models: {detail}")
    return HubError(f"cannot list the Hub's GGUF models ({what}): {detail}")


def read_repos_file(path: str | os.PathLike[str]) -> list[ListedRepo]:
    """``ORG/REPO[@REV]`` per line (blank lines and ``#`` comments skipped), each once, in order."""
    from gguftpl.gguf.hubref import parse_repo_spec

    name = os.fspath(path)
    try:
        with open(name, encoding="utf-8") as fh:
            lines = fh.read(limits.MAX_SURVEY_REPOS * 256).splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--repos {name}: {getattr(exc, 'strerror', None) or exc}") from None
    out: dict[str, ListedRepo] = {}
    for n, line in enumerate(lines, 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        try:
            ref = parse_repo_spec(text)
        except HubError as exc:
            raise UsageError(f"--repos {name}, line {n}: {exc}") from None
        out.setdefault(ref.repo_id, ListedRepo(ref.repo_id, ref.revision))
    if not out:
        raise UsageError(f"--repos {name}: no repo (one ORG/REPO[@REV] per line)")
    return list(out.values())[: limits.MAX_SURVEY_REPOS]


# --------------------------------------------------------------------------------------------- which files


@functools.lru_cache(maxsize=1)
def _quant_types() -> tuple[re.Pattern[str], dict[str, str]]:
    """A pattern of every quant type name gguf-py knows (longest first), and each name's family."""
    from gguf.constants import GGMLQuantizationType, LlamaFileType

    names = {t.name.removeprefix("MOSTLY_") for t in LlamaFileType if t.name.startswith("MOSTLY_")}
    names |= {t.name for t in GGMLQuantizationType}
    family = {n: _family_of(n) for n in names}
    alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    pattern = re.compile(rf"(?<![A-Za-z0-9])({alternatives})(?![A-Za-z0-9])", re.IGNORECASE)
    return pattern, family


def _family_of(name: str) -> str:
    """The family of a quant type from the shape of its name: i-quants, ternary, k-quants, the legacy block
    quants, the MX/NV float formats, plain floats and integers."""
    if name.startswith("IQ"):
        return "i-quant"
    if name.startswith("TQ"):
        return "ternary"
    if re.fullmatch(r"Q\d+_K(_\w+)?", name):
        return "k-quant"
    if name.startswith("Q"):
        return "legacy"
    if name.startswith(("MX", "NV")):
        return "fp4"
    return "float" if name.startswith(("F", "BF")) else "int"


def quant_family(name: str) -> str:
    """``folder/stem-without-the-quant-type|family`` of a GGUF's path in its repo, or the path itself when it
    names no quant type: files with the same key are quants of one model in the same family."""
    pattern, family = _quant_types()
    folder, _, base = name.rpartition("/")
    stem = base[: -len(".gguf")] if base.lower().endswith(".gguf") else base
    found = list(pattern.finditer(stem))
    if not found:
        return name
    m = found[-1]  # the last one: "Q8_0-model-Q4_K_M" is a Q4_K_M of a model named for Q8_0
    rest = (stem[: m.start()] + "\0" + stem[m.end() :]).lower()
    return f"{folder}/{rest}|{family[m.group(1).upper()]}"


def sample_files(
    files: Iterable[tuple[str, int | None]], *, all_files: bool = False
) -> tuple[list[tuple[str, int | None]], int]:
    """(the files to read, how many GGUFs the repo lists): first shards and unsplit files, one per quant family
    unless ``all_files``, in name order."""
    from gguftpl.gguf.shards import shard_info

    listed = sorted(files)
    readable = [(n, s) for n, s in listed if (sh := shard_info(n)) is None or sh.is_first]
    if all_files:
        return readable, len(listed)
    chosen: dict[str, tuple[str, int | None]] = {}
    for n, s in readable:
        chosen.setdefault(quant_family(n), (n, s))
    return sorted(chosen.values()), len(listed)
