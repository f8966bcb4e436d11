"""Issue 27, items 11 and 12: file names no output may break on, through the real command line.

11. ``audit --format sarif`` of a folder holding a file whose name is not UTF-8 ended in "unexpected
    UnicodeEncodeError" (exit 2); text, json and github worked. SARIF's artifact URIs are RFC 3986 URI references
    with every other byte percent-encoded, for any name, and the log validates against the SARIF schema with
    its ``uri-reference`` format checked.
12. ``patch -o NAME`` failed for names of 232 bytes or more: the temporary name in the output's folder was NAME
    plus ~24 bytes, past the filesystem's 255.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import urllib.parse
from pathlib import Path

import jsonschema
import pytest

from tests.conftest import CHATML
from tests.procwatch import run_watched

SAMPLE = Path(__file__).parent.parent / "samples" / "hermes-2-pro-mistral-7b.chatml.gguf"
SCHEMA = Path(__file__).parent / "data" / "sarif-schema-2.1.0.json"

# RFC 3986, appendix A: a URI-reference is a URI or a relative reference; both are made of these characters,
# and a relative reference's first segment holds no ":" (it would read as a scheme)
_URI_CHARS = r"(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/?#\[\]]|%[0-9A-Fa-f]{2})*"
_SCHEME = r"[A-Za-z][A-Za-z0-9+.\-]*:"
_RELATIVE = r"(?:[A-Za-z0-9\-._~!$&'()*+,;=@]|%[0-9A-Fa-f]{2})*(?:[/?#]" + _URI_CHARS + ")?"


def is_uri_reference(text: object) -> bool:
    if not isinstance(text, str):
        return True  # the checker judges strings; the schema's "type" judges the rest
    return bool(re.fullmatch(_SCHEME + _URI_CHARS, text) or re.fullmatch(_RELATIVE, text))


def validate_sarif(log: dict) -> None:
    """The SARIF 2.1.0 schema, with its ``format: uri`` and ``uri-reference`` checked (jsonschema checks no
    format unless given a checker, and has none for URIs without an extra package)."""
    checker = jsonschema.FormatChecker()
    checker.checks("uri-reference")(is_uri_reference)
    checker.checks("uri")(lambda t: not isinstance(t, str) or bool(re.fullmatch(_SCHEME + _URI_CHARS, t)))
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.validators.validator_for(schema)(schema, format_checker=checker).validate(log)


NAMES = [
    b"bad\xffname.gguf",  # not UTF-8
    b"\xfe\xfe latin-1 \xe9t\xe9.gguf",
    "été, 模型 #1?.gguf".encode(),  # UTF-8, and characters that mean something in a URI
    b"100% [q4] a:b.gguf",
    b"new\nline\ttab.gguf",
]


@pytest.fixture
def odd_folder(tmp_path: Path) -> Path:
    """A folder of real GGUFs (the bundled ChatML sample) under names of raw bytes, most of them not UTF-8."""
    folder = tmp_path / "models dir"
    folder.mkdir()
    for raw in NAMES:
        shutil.copyfile(SAMPLE, os.path.join(os.fsencode(folder), raw))
    return folder


def _uris(log: dict) -> set[str]:
    return {
        loc["physicalLocation"]["artifactLocation"]["uri"]
        for res in log["runs"][0]["results"]
        for loc in res["locations"]
    }


@pytest.mark.parametrize("absolute", [True, False], ids=["absolute", "relative"])
def test_sarif_of_any_file_name_is_valid_and_names_each_file(odd_folder: Path, absolute: bool) -> None:
    target = str(odd_folder) if absolute else odd_folder.name
    w = run_watched("audit", "--engine", "hf-only", "--format", "sarif", target, cwd=str(odd_folder.parent))
    assert w.returncode == 1, w.stderr  # findings (the ChatML sample drops the tools), not "unexpected ..."
    assert w.stderr == "", w.stderr
    log = json.loads(w.stdout)
    validate_sarif(log)
    uris = _uris(log)
    assert len(uris) == len(NAMES)
    paths = set()
    for uri in uris:
        parts = urllib.parse.urlsplit(uri)
        assert (parts.scheme == "file") is absolute, uri
        paths.add(urllib.parse.unquote_to_bytes(parts.path))
    base = os.fsencode(target)
    assert paths == {base + b"/" + raw for raw in NAMES}  # each name's own bytes, percent-decoded


def test_the_checker_used_above_refuses_what_is_not_a_uri() -> None:
    assert is_uri_reference("a/b%FFc.gguf") and is_uri_reference("file:///tmp/x%20y.gguf")
    assert not is_uri_reference("a/b\udcffc.gguf") and not is_uri_reference("a b.gguf")
    with pytest.raises(jsonschema.ValidationError):
        validate_sarif(
            {
                "version": "2.1.0",
                "runs": [{"tool": {"driver": {"name": "x"}}, "artifacts": [{"location": {"uri": "bad name.gguf"}}]}],
            }
        )


# --------------------------------------------------------------------------------------------- item 12


@pytest.mark.parametrize("length", [232, 255])
def test_patch_writes_an_output_name_as_long_as_the_filesystem_allows(tmp_path: Path, length: int) -> None:
    tpl = tmp_path / "t.jinja"
    tpl.write_text(CHATML)
    out = tmp_path / ("o" * (length - len(".gguf")) + ".gguf")
    assert len(out.name.encode()) == length
    w = run_watched("patch", SAMPLE, "--template", f"tool_use={tpl}", "--no-audit", "-o", out)
    assert w.returncode == 0, w.stderr
    assert out.is_file() and sorted(p.name for p in tmp_path.iterdir()) == sorted([out.name, "t.jinja"])
    # and --in-place over that file, whose own name is as long
    w = run_watched("patch", out, "--remove", "tool_use", "--no-audit", "--in-place")
    assert w.returncode == 0, w.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([out.name, "t.jinja"])


def test_without_o_tmpfile_the_named_temporary_is_short_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A filesystem without O_TMPFILE gets a named temporary file: it is short as well (shown by taking the flag
    away, as such a filesystem would refuse it)."""
    from gguftpl.gguf.writer import atomic_output

    monkeypatch.delattr(os, "O_TMPFILE", raising=False)
    out = tmp_path / ("o" * 250 + ".gguf")
    with atomic_output(out, overwrite=False) as fh:
        fh.write(b"GGUF")
        (tmp,) = [p for p in tmp_path.iterdir() if p != out]
        assert len(tmp.name) < 32, tmp.name
    assert out.read_bytes() == b"GGUF" and list(tmp_path.iterdir()) == [out]


# --------------------------------------------------------------------------------------------- the cache folder


def test_the_cache_warning_names_any_folder_on_one_line(tmp_path: Path) -> None:
    """A cache folder whose name holds an ANSI escape and a newline, writable by others: the one warning that
    says so is one line, its control characters shown as escapes (raw, they forged a second line and drove the
    terminal), and the audit's verdict is the same."""
    folder = tmp_path / "cache \x1b[31mred\nforged: line"
    folder.mkdir(mode=0o777)
    folder.chmod(0o777)
    res = run_watched("audit", SAMPLE, env={"GGUFTPL_CACHE_DIR": str(folder)}, timeout=120)
    assert res.returncode == 1, res.stderr
    assert "\x1b" not in res.stderr and len(res.stderr_lines) == 1, res.stderr
    (line,) = res.stderr_lines
    assert "writable by others" in line and "\\x1b[31mred\\x0aforged: line" in line, line
