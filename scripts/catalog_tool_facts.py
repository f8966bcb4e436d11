"""Write ``upstream_templates/tool_templates.json``: for every catalog template (by sha256), does its Jinja AST put
the tool schemas in the prompt, and which control markers it writes (``gguftpl.upstream.catalog.measure_tool_facts``).
Run after adding a catalog template; ``tests/test_upstream_catalog.py`` measures every entry again."""

from __future__ import annotations

import json

from gguftpl.upstream.catalog import TOOL_FACTS_FILE, catalog_dir, load_catalog, measure_tool_facts


def main() -> None:
    cat = load_catalog()
    out: dict[str, dict[str, object]] = {}
    for e in cat.entries:
        for name, t in e.templates.items():
            renders, markers = measure_tool_facts(e.text(name))
            rec = out.setdefault(t.sha256, {"templates": [], "renders_tools": renders, "markers": list(markers)})
            rec["templates"].append(f"{e.repo_id}:{name}")  # type: ignore[union-attr]
    doc = {
        "schema": 1,
        "description": "For every catalog template (by sha256): does its Jinja AST put the tool schemas in the "
        "prompt (gguftpl.templates.static.data_flow of `tools`), and the control markers its literal text writes "
        "(gguftpl.gguf.tokens.control_markers), measured by gguftpl.upstream.catalog.measure_tool_facts "
        "(scripts/catalog_tool_facts.py writes this file; tests/test_upstream_catalog.py measures them again). "
        "gguftpl.repair reads them, so a file's repair needs no Jinja parser.",
        "templates": dict(sorted(out.items(), key=lambda kv: str(kv[1]["templates"]))),
    }
    path = catalog_dir() / TOOL_FACTS_FILE
    path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {path}: {len(out)} templates")


if __name__ == "__main__":
    main()
