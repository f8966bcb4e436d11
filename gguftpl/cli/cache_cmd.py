"""``gguftpl cache info|clear``: the facts cache folder, what it holds, and emptying it."""

from __future__ import annotations

import click

from gguftpl.cli.output import echo, echo_json, width_option


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


@click.group("cache")
def command() -> None:
    """The facts cache: template facts kept between runs in $GGUFTPL_CACHE_DIR/facts (an absolute path), else
    $XDG_CACHE_HOME/gguftpl/facts or ~/.cache/gguftpl/facts, kept under GGUFTPL_CACHE_MAX bytes (default 256M)
    by removing the least recently used entries.

    \b
    gguftpl cache info    the folder, its entries and size, the cap, and whether it is trusted
    gguftpl cache clear   remove every entry and the folder's secret
    """


@command.command("info")
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True, help="Output format."
)
@width_option
def info_command(fmt: str) -> None:
    """Show the cache folder, its entries, their size, the size cap, and whether it is used (a folder that is
    not yours or is writable by others is ignored: the reason is shown)."""
    from dataclasses import asdict

    from gguftpl.templates.factstore import cache_info

    info = cache_info()
    if fmt == "json":
        echo_json(asdict(info) if info is not None else {"folder": None, "trusted": "off: no home directory"})
        return
    if info is None:
        echo("cache: off (no home directory and no GGUFTPL_CACHE_DIR)")
        return
    echo(f"folder:  {info.folder}")
    echo(f"entries: {info.entries} ({_size(info.size)})")
    echo(f"cap:     {_size(info.cap)} (GGUFTPL_CACHE_MAX)")
    echo(f"trusted: {info.trusted}")


@command.command("clear")
@width_option
def clear_command() -> None:
    """Remove every entry of the cache folder, and its secret (the next audit makes a new one)."""
    from gguftpl.templates.factstore import cache_clear

    done = cache_clear()
    if done is None:
        echo("cache: off (no home directory and no GGUFTPL_CACHE_DIR): nothing to clear")
        return
    folder, removed = done
    echo(f"removed {removed} entr{'y' if removed == 1 else 'ies'} from {folder}")
