"""What a file-scope or template-scope check reads besides a template's own facts: the file it is in.

A check is ``fn(ctx)`` (scope ``file``) or ``fn(t, ctx)`` (scope ``template``, once per template) and yields
findings built with :meth:`FileContext.finding`, which fills in where (file, key, template) they are.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from gguftpl.findings import Finding, Location, Rule, Severity, make_finding
from gguftpl.gguf.modelkind import ModelKind

if TYPE_CHECKING:
    from gguftpl.gguf.templateset import TemplateSet
    from gguftpl.repair import Repair
    from gguftpl.runtimes.view import RuntimeView
    from gguftpl.stores import StoreModel
    from gguftpl.templates.facts import TemplateFacts, VocabFacts


@dataclass(frozen=True)
class FileContext:
    file: str
    """The label findings carry: a path as typed, a path found in a folder, or a URL ('' for bare text)."""
    tset: TemplateSet | None = None
    """The file's templates and special tokens (None when only a template text is analysed). Its lazily
    decoded vocabulary may belong to a closed file: rules read ``vocab`` instead."""
    vocab: VocabFacts | None = None
    """The vocabulary entries the rules need, looked up while the file was open."""
    templates: tuple[TemplateFacts, ...] = ()
    """The facts of every template of the file, in file order."""
    header: Any = None
    """The GGUF header (metadata types, tensor extent), when there is one."""
    upstream_repo: str | None = None
    upstream_how: str = ""
    """How ``upstream_repo`` was found, or why none was (the discovery's words)."""
    skipped: tuple[str, ...] = ()
    """Named templates not analysed (past the bound on distinct texts)."""
    max_analysed: int = 0
    """That bound, for the message."""
    store: StoreModel | None = None
    """The runtime store the file was found in (``gguftpl.stores``): an Ollama model's manifest decides Ollama's
    row of the runtime view."""

    def at(self, key: str | None = None, line: int | None = None, column: int | None = None) -> Location:
        return Location(self.file, key, line, column)

    def finding(
        self,
        rule: Rule,
        message: str,
        t: TemplateFacts | None = None,
        *,
        key: str | None = None,
        line: int | None = None,
        column: int | None = None,
        evidence: str = "",
        fix: str | None = None,
        severity: Severity | None = None,
        **extra: Any,
    ) -> Finding:
        """A finding of ``rule`` about template ``t`` (its key and name), or about the file."""
        where = self.at(key if key is not None or t is None else t.key, line, column)
        return make_finding(
            rule,
            message,
            where,
            template=t.name if t is not None else None,
            evidence=evidence,
            fix=fix,
            severity=severity,
            **extra,
        )

    def quoted(self) -> str:
        """The file as a shell argument, for fix commands."""
        return shlex.quote(self.file) if self.file else "FILE"

    def hub_fix(self, name: str) -> str:
        """The command that puts upstream's templates back (the file's one repair, :attr:`repair`), or sets
        template ``name`` from a file when nothing is known of upstream: the catalog entry when it holds the
        upstream (offline), else the Hub repo the metadata names."""
        from gguftpl.repair import upstream_command

        found = upstream_command(self.file, self.upstream_repo, self.upstream_how)
        return found or f"gguftpl patch {self.quoted()} --template {name}=PATH -o FIXED.gguf"

    @cached_property
    def repair(self) -> Repair:
        """The file's one repair of its tool calling (:func:`gguftpl.repair.file_repair`), computed once while
        the file is open (the vocabulary is looked up for the markers upstream's template needs)."""
        return self.repair_for(self.runtimes)

    def repair_for(self, view: RuntimeView) -> Repair:
        """The repair for the runtimes of ``view`` (``audit --runtime`` judges only some)."""
        from gguftpl.repair import file_repair, upstream_of

        tset = self.tset
        token_id = tset.token_id if tset is not None and tset.has_vocab else None
        return file_repair(
            self.file,
            view,
            upstream_of(self.upstream_repo, self.upstream_how),
            token_id=token_id,
            has_templates=bool(tset is not None and tset.templates),
        )

    def tools_fix(self) -> str | None:
        """The fix line of a finding saying the tools never reach the prompt: the file's repair."""
        return self.repair.text() or None

    @property
    def kind(self) -> ModelKind:
        """The file's model kind (chat, base, embedding, reranker); a bare template is a chat model's."""
        return self.tset.kind if self.tset is not None else ModelKind()

    def tool_capable(self) -> list[str]:
        """Named templates that put the tool schemas in the prompt (llama.cpp switches to one for tools)."""
        return [t.name for t in self.templates if t.name != "default" and t.renders_tools]

    @cached_property
    def runtimes(self) -> RuntimeView:
        """Which template each runtime renders a tools request with (``gguftpl.runtimes.view``), computed once
        per file and read by the rules and the report."""
        from gguftpl.runtimes.view import runtime_view

        texts = {n: t.text for n, t in self.tset.templates.items()} if self.tset is not None else None
        manifest = None
        if self.store is not None and self.store.ollama is not None and texts is not None:
            from gguftpl.runtimes.ollamamanifest import OllamaManifest

            manifest = OllamaManifest(self.store.ollama, self.store.ref.removeprefix("ollama://"))
        specials = (self.special_text("bos"), self.special_text("eos"))
        return runtime_view(self.templates, texts, manifest, specials)

    def special_text(self, role: str) -> str:
        from gguftpl.gguf.templateset import special_token_text

        return special_token_text(self.tset, role) if self.tset is not None else ""
