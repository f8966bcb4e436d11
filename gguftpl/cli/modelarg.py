"""The one place a command's GGUF argument is resolved: a local path, or a model reference (``ollama://…``,
``lmstudio://…``, ``hf-cache://…``, :mod:`gguftpl.stores`) turned into the local GGUF it names.

Every command that takes a GGUF path declares its argument with :data:`MODEL` (``audit`` passes references on to
the library, which names its findings after them). The resolved :class:`~gguftpl.stores.StoreModel` is kept on
the click context, so a command can say which reference it read (:func:`store_model`) and refuse to write into a
store (``patch``). A reference that cannot be resolved safely is the store's one-line error, exit 2.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from gguftpl.stores import StoreModel

__all__ = ["LOCAL_MODEL", "MODEL", "ModelArg", "hash_progress", "store_model"]

_KEY = "gguftpl.store_models"


@contextmanager
def hash_progress() -> Iterator[None]:
    """A bar on a terminal's stderr while a store's blob is checked against its sha256 (a big one, the first time:
    minutes for tens of GB); nothing elsewhere."""
    from gguftpl.cli.output import StderrProgress
    from gguftpl.stores.safety import HASH_PROGRESS

    with StderrProgress("checking the blob's sha256 (once)", in_bytes=True) as bar:
        token = HASH_PROGRESS.set(bar if bar.enabled else None)
        try:
            yield
        finally:
            HASH_PROGRESS.reset(token)


class ModelArg(click.ParamType):
    name = "FILE"

    def __init__(self, path: click.Path | None = None) -> None:
        self.path = path
        """What a plain path is checked as (``click.Path(dir_okay=False)``); None: passed on as it is."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from gguftpl.stores import is_ref, resolve

        if not isinstance(value, str) or not is_ref(value):
            return self.path.convert(value, param, ctx) if self.path is not None else value
        with hash_progress():
            model = resolve(value)
        if ctx is not None:
            ctx.meta.setdefault(_KEY, {})[model.path] = model
        return model.path


MODEL = ModelArg()
"""A GGUF path, a URL the library reads (``hf://``, ``https://``) or a model reference."""
LOCAL_MODEL = ModelArg(click.Path(dir_okay=False))
"""A local GGUF file (not a folder) or a model reference."""


def store_model(path: str) -> StoreModel | None:
    """The store model the current command's argument ``path`` was resolved from, None for a plain path."""
    ctx = click.get_current_context(silent=True)
    found: dict[str, StoreModel] = ctx.meta.get(_KEY, {}) if ctx is not None else {}
    return found.get(path)
