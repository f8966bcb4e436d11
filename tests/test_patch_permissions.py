"""Who may read a patched model: ``--in-place`` keeps the input's mode, owner and group; a new output is never
readable by more people than its input (issue 14, item 1). Real chmod/chown (root), real processes."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from gguftpl.gguf.reader import read_header
from gguftpl.patching import patch_templates
from tests.conftest import CHATML, ROOT, build_gguf

needs_root = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown to others needs root")


def _gguftpl(*args: str | Path, umask: int | None = None) -> subprocess.CompletedProcess[str]:
    code = "import os, sys\n"
    if umask is not None:
        code += f"os.umask({umask:#o})\n"
    code += "from gguftpl.cli import main\nmain(sys.argv[1:])\n"
    return subprocess.run(
        [sys.executable, "-c", code, *map(str, args)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )


def _perms(path: Path) -> tuple[int, int, int]:
    st = path.stat()
    return stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid


@needs_root
def test_in_place_keeps_mode_owner_and_group(make_gguf, tmp_path):
    """The report's reproduction, through the command line: it left 644 root:root."""
    src = make_gguf("m.gguf", templates={"default": CHATML})
    os.chmod(src, 0o600)
    os.chown(src, 1234, 5678)
    tpl = tmp_path / "t.jinja"
    tpl.write_text("{{ 'patched' }}", encoding="utf-8")
    res = _gguftpl("patch", src, "--template", f"default={tpl}", "--in-place", "--no-audit")
    assert res.returncode == 0, res.stderr
    assert _perms(src) == (0o600, 1234, 5678)
    assert read_header(src).get("tokenizer.chat_template") == "{{ 'patched' }}"
    # set-group-ID and a group-only mode survive too (chown clears set-ID bits: they are put back after it)
    os.chmod(src, 0o2640)
    patch_templates(src, None, {"default": CHATML}, in_place=True, provenance=False)
    assert _perms(src) == (0o2640, 1234, 5678)


@pytest.mark.parametrize(
    ("input_mode", "umask", "expected"),
    [
        (0o600, 0o022, 0o600),  # the report's case: it gave 0644
        (0o640, 0o022, 0o640),
        (0o644, 0o077, 0o600),  # the umask narrows further, as for any new file
        (0o4755, 0o022, 0o755),  # a new file never inherits set-user-ID
        (0o400, 0o022, 0o400),
    ],
)
def test_a_new_output_is_never_wider_than_its_input(make_gguf, tmp_path, input_mode, umask, expected):
    src = make_gguf("m.gguf", templates={"default": CHATML})
    os.chmod(src, input_mode)
    tpl = tmp_path / "t.jinja"
    tpl.write_text("{{ 'x' }}", encoding="utf-8")
    out = tmp_path / "new.gguf"
    res = _gguftpl("patch", src, "-o", out, "--template", f"tool_use={tpl}", "--no-audit", umask=umask)
    assert res.returncode == 0, res.stderr
    assert _perms(out)[0] == expected
    # overwriting an existing, world-writable output with --force: the input decides, not the old file
    out.chmod(0o666)
    res = _gguftpl("patch", src, "-o", out, "--force", "--template", f"rag={tpl}", "--no-audit", umask=umask)
    assert res.returncode == 0, res.stderr
    assert _perms(out)[0] == expected


@needs_root
def test_in_place_by_a_user_who_cannot_keep_the_owner_narrows():
    """A user (uid 1234, group 5678) may replace a root-owned model in a folder they can write, but cannot
    give the file back to root: it becomes theirs, and the bits that were root's group's are dropped rather
    than handed to the user's group. (The child starts as root and drops to that user after a warm-up patch
    has imported everything: the interpreter itself lives where only root may read.)"""
    # pytest's temp folders are private to root (and another pytest run resets them so): a folder of its own
    folder = Path(tempfile.mkdtemp(prefix="gguftpl-test-perms-"))
    try:
        folder.chmod(0o777)
        warm = build_gguf(folder / "warm.gguf", templates={"default": CHATML})
        src = build_gguf(folder / "m.gguf", templates={"default": CHATML})
        os.chmod(src, 0o664)
        _patch_as_user_1234(warm, src)
        assert _perms(src) == (0o604, 1234, 5678)
        assert "tokenizer.chat_template.tool_use" in read_header(src).kv
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _patch_as_user_1234(warm: Path, src: Path) -> None:
    code = (
        "import os, sys\n"
        "from gguftpl.patching import PatchOptions, patch_templates\n"
        "options = PatchOptions(in_place=True, audit=False, provenance=False)\n"
        "patch_templates(sys.argv[1], None, {'tool_use': '{{ 1 }}'}, options=options)\n"
        "os.setgroups([]); os.setgid(5678); os.setuid(1234)\n"
        "patch_templates(sys.argv[2], None, {'tool_use': '{{ 1 }}'}, options=options)\n"
    )
    res = subprocess.run([sys.executable, "-c", code, warm, src], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert res.returncode == 0, res.stderr


def test_in_place_replaces_the_file_behind_a_link_and_hard_links_keep_the_old_content(make_gguf, tmp_path):
    """What the README says about links: through a symlink the file it points at is replaced (the link stays);
    other hard links to the input keep the old bytes (the patch is a new file renamed over the name)."""
    src = make_gguf("m.gguf", templates={"default": CHATML})
    other = tmp_path / "other-name.gguf"
    os.link(src, other)
    link = tmp_path / "link.gguf"
    link.symlink_to(src.name)
    patch_templates(link, None, {"default": "{{ 'new' }}"}, in_place=True, provenance=False)
    assert link.is_symlink() and os.readlink(link) == src.name
    assert read_header(src).get("tokenizer.chat_template") == "{{ 'new' }}"
    assert read_header(other).get("tokenizer.chat_template") == CHATML
    assert src.stat().st_nlink == 1 and other.stat().st_nlink == 1
