"""``gguftpl patch ollama://NAME --ollama-modelfile DIR``: audit the model as Ollama runs it, write the Modelfile
whose TEMPLATE renders its tools (``gguftpl.runtimes.modelfile``, proven by Ollama's Go engine first) into DIR, and
print the ``ollama create`` command. Nothing in Ollama's store is written."""

from __future__ import annotations

import os

from gguftpl.cli.output import echo
from gguftpl.errors import UsageError

__all__ = ["write_modelfile"]


def _specials(path: str) -> tuple[tuple[str, str], str | None]:
    """(bos, eos) texts of the GGUF at ``path`` and its ``tokenizer.chat_template`` (None: it has none)."""
    from gguftpl.gguf.reader import read_header
    from gguftpl.gguf.templateset import load_templateset, special_token_text

    header = read_header(path)
    try:
        tset = load_templateset(header)
        default = tset.default.text if tset.default is not None else None
        return (special_token_text(tset, "bos"), special_token_text(tset, "eos")), default
    finally:
        header.close()


def write_modelfile(file: str, folder: str | None, source: str | None, force: bool, others: bool = False) -> None:
    """``others``: options that patch the GGUF were given too (refused: this writes a Modelfile only)."""
    from gguftpl.audit import AuditOptions, audit_file
    from gguftpl.auditcache import AnalysisCache
    from gguftpl.cli.modelarg import store_model
    from gguftpl.report import write_atomic
    from gguftpl.runtimes.modelfile import ollama_modelfile
    from gguftpl.safeio import check_regular
    from gguftpl.templates.factstore import disk_use

    if folder is None:
        raise UsageError("--ollama-from goes with --ollama-modelfile DIR")
    if others:
        raise UsageError("--ollama-modelfile writes a Modelfile only; patch the GGUF first, then name it --ollama-from")
    model = store_model(file)
    if model is None or model.ollama is None:
        raise UsageError("--ollama-modelfile takes a model Ollama has: ollama://NAME[:TAG]")
    if source is not None:
        check_regular(source, what="--ollama-from GGUF")
        source = os.path.abspath(source)
    top = os.path.realpath(model.root)
    where = os.path.realpath(os.path.abspath(folder))
    if os.path.commonpath([where, top]) == top:
        raise UsageError(f"--ollama-modelfile {folder} is inside Ollama's store ({top}); write it elsewhere")
    options = AuditOptions(select=("GT7",))
    fa = audit_file(model.path, options, label=model.ref, cache=AnalysisCache.on_disk(), store=model)
    specials, default = _specials(source or model.path)  # what Ollama reads is the GGUF FROM names
    with disk_use("write"):  # the Modelfile's proof is rendered now, never read back from the cache
        mf = ollama_modelfile(model, fa.templates, specials, source, default)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "Modelfile")
    if os.path.lexists(path) and not force:
        raise UsageError(f"{path} exists; use --force to overwrite it")
    write_atomic(path, mf.text)
    row = fa.runtimes.row("ollama") if fa.runtimes is not None else None
    if row is not None:
        echo(f"{model.ref}: Ollama now: {row.reason}")
    for line in mf.proof:
        echo(f"  proven: {line}")
    echo(f"  stop: {', '.join(mf.stops) or 'none'}")
    echo(f"wrote {path} (FROM {source or model.path}); nothing in Ollama's store was changed")
    echo(f"run: {mf.command(path)}")
