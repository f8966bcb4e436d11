"""``python -m gguftpl`` and the ``gguftpl`` command.

The signal handlers go in before anything heavy is imported (click, the command's library code): a Ctrl-C
while modules load is one line and exit 130, not a KeyboardInterrupt traceback (issue 14).

The command ends with ``os._exit`` after running the exit handlers itself: Python's own shutdown puts the
default signal handlers back before it tears the interpreter down, so a SIGTERM in that window killed the
process with no line and status -15. Skipping the teardown also saves its time on every run.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    code: object = 0
    try:
        from gguftpl import interrupts

        interrupts.install()
        from gguftpl.cli import main as cli_main

        cli_main(argv)
    except KeyboardInterrupt as exc:  # before click runs the command, or while it imports it
        code = _report(exc)
    except SystemExit as exc:
        code = exc.code
    finally:
        if "gguftpl.interrupts" in sys.modules:
            sys.modules["gguftpl.interrupts"].finished()
    _exit(code)


def _report(exc: KeyboardInterrupt) -> int:
    module = sys.modules.get("gguftpl.interrupts")
    if module is not None:
        code: int = module.report(exc)
        return code
    sys.stderr.write("gguftpl: interrupted\n")  # a Ctrl-C while the module that handles them was importing
    return 130


def _exit(code: object) -> None:
    """What interpreter exit does that matters here (exit handlers: workers stopped, temp folders removed;
    output flushed), with gguftpl's signal handlers still in place, then the exit itself."""
    import atexit
    import os

    atexit._run_exitfuncs()
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:  # sys.exit("message"), as Python prints it
        sys.stderr.write(f"{code}\n")
        status = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`gguftpl … | head`) or a closed stream: nothing to add
            pass
    os._exit(status & 0xFF)


if __name__ == "__main__":
    main()
