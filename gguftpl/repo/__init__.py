"""Every quant of a model checked at once: a Hub repo (headers read remotely) or a local output folder.

``facts``: one summary per quant and the facts the GT55x checks read; ``upstream``: each model group's
upstream templates (the network step); ``audit``: the runs (``audit_hub_repo``, ``audit_local_dir``,
``audit_targets`` for ``gguftpl audit``) with ``--jobs`` concurrency. The checks themselves live beside
their rules in ``gguftpl/rules/repo.py``.
"""
