"""``python -m gguftpl.engines.hfjs install|status``: install the pinned ``@huggingface/jinja``, or say whether it is
here (exit 0) or not (exit 1, with why). Until ``gguftpl engines install hfjs`` exists, this is that command."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gguftpl.engines.hfjs", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    inst = sub.add_parser("install", help="install the pinned @huggingface/jinja with npm ci (no-op when there)")
    inst.add_argument("--timeout", type=float, default=300.0, help="seconds npm may take (default 300)")
    sub.add_parser("status", help="say whether the engine is installed, and which versions")
    args = parser.parse_args(argv)

    from gguftpl.engines.hfjs import ENGINE, install
    from gguftpl.errors import GGUFTplError

    if args.command == "install":
        try:
            print(install(timeout=args.timeout))
        except GGUFTplError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return 0
    found = ENGINE.availability()
    print(f"hfjs: {found.version}" if found.installed else found.unknown_reason())
    return 0 if found.installed else 1


if __name__ == "__main__":
    sys.exit(main())
