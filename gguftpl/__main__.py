"""``python -m gguftpl`` and the ``gguftpl`` command.

The signal handlers go in before anything heavy is imported (click, the command's library code): a Ctrl-C
while modules load is one line and exit 130, not a KeyboardInterrupt traceback (issue 14)."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    try:
        from gguftpl import interrupts

        interrupts.install()
        from gguftpl.cli import main as cli_main

        cli_main(argv)
    except KeyboardInterrupt as exc:  # before click runs the command, or while it imports it
        sys.exit(_report(exc))
    finally:
        if "gguftpl.interrupts" in sys.modules:
            sys.modules["gguftpl.interrupts"].finished()


def _report(exc: KeyboardInterrupt) -> int:
    module = sys.modules.get("gguftpl.interrupts")
    if module is not None:
        code: int = module.report(exc)
        return code
    sys.stderr.write("gguftpl: interrupted\n")  # a Ctrl-C while the module that handles them was importing
    return 130


if __name__ == "__main__":
    main()
