#!/usr/bin/env python3
"""Regenerate docs/html-report.png: the HTML report of the bundled bartowski-like sample
(``gguftpl audit samples/hermes-2-pro-mistral-7b.chatml.gguf --format html``) as headless Chromium draws it.

    python scripts/html_screenshot.py [--width 1400] [--height 2450] [-o docs/html-report.png]

Needs Debian's ``chromium`` (``apt-get install -y chromium``); as root it runs with ``--no-sandbox``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SAMPLE = ROOT / "samples" / "hermes-2-pro-mistral-7b.chatml.gguf"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--width", type=int, default=1400)
    ap.add_argument("--height", type=int, default=2450)
    ap.add_argument("-o", "--output", type=Path, default=ROOT / "docs" / "html-report.png")
    args = ap.parse_args(argv)
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        print("html_screenshot: chromium is not installed (apt-get install -y chromium)", file=sys.stderr)
        return 2
    from click.testing import CliRunner

    from gguftpl.cli import main_group

    with tempfile.TemporaryDirectory(prefix="gguftpl-shot-") as tmp:
        page = Path(tmp) / "report.html"
        os.chdir(ROOT)  # the report names the sample as the README's command does: samples/…
        res = CliRunner().invoke(
            main_group, ["audit", "--exit-zero", "--format", "html", "-o", str(page), str(SAMPLE.relative_to(ROOT))]
        )
        if res.exit_code != 0:
            print(res.output, file=sys.stderr)
            return 1
        cmd = [
            browser,
            "--headless",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--user-data-dir={tmp}/profile",
            f"--window-size={args.width},{args.height}",
            f"--screenshot={args.output.resolve()}",
            page.as_uri(),
        ]
        if os.geteuid() == 0:
            cmd.append("--no-sandbox")
        args.output.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(cmd, check=True, capture_output=True)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
