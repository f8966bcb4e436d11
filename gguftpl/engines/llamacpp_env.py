"""What gguftpl knows about llama.cpp without importing its bindings: whether xllamacpp is installed, how to
install it, and the variables llama.cpp passes to every template. xllamacpp's import costs 70 ms and the
session module's own imports (urllib, http.client) as much again: an audit that only asks whether to start the
llama.cpp worker, or compares prompts the worker rendered, pays neither."""

from __future__ import annotations

import time

INSTALL_HINT = "pip install 'gguftpl[llamacpp]'"
NOT_INSTALLED = f"llama.cpp verification needs the xllamacpp package, which is not installed: {INSTALL_HINT}"


def llamacpp_available() -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec("xllamacpp") is not None
    except (ImportError, ValueError):  # a broken or blocked installation counts as absent
        return False


def llamacpp_date_string() -> str:
    """``date_string`` as llama.cpp passes it to every template (today, ``%d %b %Y``)."""
    return time.strftime("%d %b %Y")
