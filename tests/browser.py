"""Headless Chromium for tests that look at the HTML report as a browser shows it (Debian's ``chromium`` package;
.ci/run installs it when missing), and a small DOM of what it dumps.

    dom = Dom.parse(dump_dom(page, tmp_path))      # the DOM after the page loaded and any script ran
    [text(c) for c in dom.find_all("td", cls="cell")]

A test that needs the browser calls :func:`chromium` first: it skips, with the reason, where there is none.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import pytest

SAFETY_TIMEOUT = 600  # seconds; a safety net only, a page loads in a second or two

_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


def chromium() -> str:
    """The Chromium binary, or a skip that says how to install it."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("headless Chromium is not installed: apt-get install -y chromium (.ci/run installs it)")


def _run(args: list[str], profile: Path) -> subprocess.CompletedProcess[str]:
    cmd = [
        chromium(),
        "--headless",
        "--disable-gpu",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-extensions",
        "--disable-dev-shm-usage",
        f"--user-data-dir={profile}",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--no-sandbox")  # Chromium refuses to start as root with its sandbox
    proc = subprocess.run(cmd + args, capture_output=True, text=True, timeout=SAFETY_TIMEOUT, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


def dump_dom(page: Path, tmp: Path) -> str:
    """The serialised DOM of ``page`` once it loaded (after every script that ran)."""
    profile = tmp / f"chromium-profile-{page.stem}"
    return _run(["--dump-dom", page.resolve().as_uri()], profile).stdout


def screenshot(page: Path, png: Path, tmp: Path, width: int = 1400, height: int = 1800) -> Path:
    profile = tmp / f"chromium-profile-shot-{page.stem}"
    _run(
        ["--hide-scrollbars", f"--window-size={width},{height}", f"--screenshot={png}", page.resolve().as_uri()],
        profile,
    )
    return png


@dataclass
class Node:
    tag: str
    attrs: dict[str, str | None] = field(default_factory=dict)
    children: list[Node | str] = field(default_factory=list)

    def classes(self) -> list[str]:
        return (self.attrs.get("class") or "").split()

    def find_all(self, tag: str | None = None, cls: str | None = None) -> list[Node]:
        out = []
        for child in self.children:
            if isinstance(child, Node):
                if (tag is None or child.tag == tag) and (cls is None or cls in child.classes()):
                    out.append(child)
                out += child.find_all(tag, cls)
        return out

    def find(self, tag: str | None = None, cls: str | None = None) -> Node:
        found = self.find_all(tag, cls)
        assert found, f"no <{tag or '*'} class={cls}> in the page"
        return found[0]

    def all_tags(self) -> list[str]:
        return [n.tag for n in self.find_all()]


def text(node: Node | str) -> str:
    """The text a node shows (its text nodes, entities decoded)."""
    if isinstance(node, str):
        return node
    return "".join(text(c) for c in node.children)


class Dom(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document")
        self._stack = [self.root]

    @classmethod
    def parse(cls, html: str) -> Node:
        parser = cls()
        parser.feed(html)
        parser.close()
        return parser.root

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, dict(attrs))
        self._stack[-1].children.append(node)
        if tag not in _VOID:
            self._stack.append(node)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._stack[-1].children.append(Node(tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self._stack) - 1, 0, -1):
            if self._stack[i].tag == tag:
                del self._stack[i:]
                return

    def handle_data(self, data: str) -> None:
        self._stack[-1].children.append(data)
