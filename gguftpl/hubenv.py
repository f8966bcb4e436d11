"""The Hugging Face Hub's environment, read in one place: endpoint, offline mode, token, cache folder.

huggingface_hub reads ``HF_ENDPOINT``, ``HF_HUB_OFFLINE``, ``HF_HOME`` and ``HF_HUB_CACHE`` once, when it is
imported (``huggingface_hub.constants``). A long-lived process or a test that sets them afterwards would be
ignored, so each function here reads the variable now and falls back to huggingface_hub's own constant
when it is not set: one rule for the local, remote and upstream code. huggingface_hub is imported only
inside the functions (its ``constants`` module alone costs a few milliseconds).

The messages that tell the user which variable to set are phrased here too (``OFFLINE_IS_SET``,
``SET_TOKEN``), so the variables are named in this module only.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit

from gguftpl.errors import HubError

__all__ = [
    "OFFLINE_IS_SET",
    "OFFLINE_NOTE",
    "SET_TOKEN",
    "cache_dir",
    "endpoint",
    "headers",
    "hf_api",
    "hub_hosts",
    "offline",
    "strip_hub_url",
    "token",
]

OFFLINE_IS_SET = "HF_HUB_OFFLINE is set"
"""Why a Hub request was not made: ``f"{OFFLINE_IS_SET}: cannot read …"``."""
OFFLINE_NOTE = "offline (HF_HUB_OFFLINE)"
"""A warning's lead when a read was served from the local cache because of offline mode."""
SET_TOKEN = "set HF_TOKEN"
"""The hint for a gated, private or forbidden repo: ``f"… (or private: {SET_TOKEN})"``."""


def endpoint(explicit: str | None = None) -> str:
    """The Hub base URL, without a trailing slash: ``explicit`` if given, else ``HF_ENDPOINT`` now, else
    huggingface_hub's ``constants.ENDPOINT`` (``https://huggingface.co``, or the staging Hub)."""
    if explicit:
        return explicit.rstrip("/")
    env = os.environ.get("HF_ENDPOINT")
    if env:
        return env.rstrip("/")
    from huggingface_hub import constants

    return str(constants.ENDPOINT).rstrip("/")


def offline() -> bool:
    """True when ``HF_HUB_OFFLINE`` (or transformers' ``TRANSFORMERS_OFFLINE``) is true now, or was when
    huggingface_hub was imported (then huggingface_hub refuses every request itself)."""
    from huggingface_hub import constants

    raw = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    if raw.strip().upper() in constants.ENV_VARS_TRUE_VALUES:
        return True
    return bool(constants.is_offline_mode())


def token(explicit: str | bool | None = None) -> str | bool | None:
    """The token to send: ``explicit`` if given (``False``: send none), else ``HF_TOKEN`` now, else None,
    which lets huggingface_hub use the token saved by ``hf auth login``."""
    if explicit is False or explicit:
        return explicit
    return os.environ.get("HF_TOKEN") or None


def cache_dir(explicit: str | os.PathLike[str] | None = None) -> str:
    """huggingface_hub's cache folder: ``explicit`` if given, else ``HF_HUB_CACHE`` now, else
    ``HF_HOME``/hub now, else ``constants.HF_HUB_CACHE``."""
    if explicit is not None:
        return os.fspath(explicit)
    env = os.environ.get("HF_HUB_CACHE")
    if env:
        return _expand(env)
    home = os.environ.get("HF_HOME")
    if home:
        return os.path.join(_expand(home), "hub")
    from huggingface_hub import constants

    return str(constants.HF_HUB_CACHE)


def _expand(path: str) -> str:
    # as huggingface_hub.constants does
    return os.path.expandvars(os.path.expanduser(path))


def headers(explicit_token: str | bool | None = None) -> dict[str, str]:
    """huggingface_hub's request headers: user agent and the ``token()`` (unless ``explicit_token=False``)."""
    from huggingface_hub.utils import build_hf_headers

    try:
        return dict(build_hf_headers(token=token(explicit_token), library_name="gguftpl"))
    except Exception as exc:  # noqa: BLE001 - e.g. OIDC exchange failures
        raise HubError(f"cannot build Hub credentials: {' '.join(str(exc).split())}") from None


def hf_api(explicit_endpoint: str | None = None, explicit_token: str | bool | None = None) -> Any:
    """A ``huggingface_hub.HfApi`` on the :func:`endpoint` and with the :func:`token` in effect now."""
    from huggingface_hub import HfApi

    return HfApi(endpoint=endpoint(explicit_endpoint), token=token(explicit_token), library_name="gguftpl")


def hub_hosts() -> frozenset[str]:
    """Host names that are the Hub: huggingface_hub's own list, its ``hf.co`` short domain, and the host of
    the endpoint in effect now."""
    from huggingface_hub import constants

    hosts = {"hf.co", urlsplit(constants.HUGGINGFACE_CO_URL_HOME).hostname, urlsplit(endpoint()).hostname}
    hosts |= set(getattr(constants, "HF_URL_HOSTS", ()))
    return frozenset(h.lower() for h in hosts if h)


def strip_hub_url(ref: str) -> str:
    """``ORG/NAME…`` from a Hub address (``hf://``, ``https://HUB/``, ``HUB/`` for a Hub host); anything
    else unchanged."""
    if ref.lower().startswith("hf://"):
        return ref[5:]
    rest = ref.split("://", 1)[1] if "://" in ref else ref
    host, sep, path = rest.partition("/")
    try:
        name = urlsplit("//" + host).hostname or ""
    except ValueError:  # "Invalid IPv6 URL": not a Hub address either
        return ref
    return path if sep and name in hub_hosts() else ref
