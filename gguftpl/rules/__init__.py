"""Every rule gguftpl can report, one module per code range, each rule beside its documentation and checks.

container (GT0xx), template (GT1xx), tools (GT2xx), tokens (GT3xx), safety (GT4xx), upstream (GT50x),
repo (GT55x), llamacpp (GT6xx), runtimes (GT7xx); context.py holds what file and template checks read.
Nothing is imported here: ``findings.get_rule``, ``findings.checks`` and ``findings.all_rules`` load the
modules they need (``findings.RULE_MODULES``).
"""
