"""Compare a GGUF's special tokens with upstream's: bos/eos ids and texts, every upstream added token's id,
text and special/CONTROL status in the GGUF vocabulary (a structured comparison with deepdiff), and whether
the GGUF's end tokens are among upstream's generation eos ids."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from gguftpl.upstream.config import UpstreamConfig, UpstreamSpecial

CONTROL, UNKNOWN = 3, 2
SPECIAL_TYPES = (CONTROL, UNKNOWN)
"""GGUF token types a special upstream token becomes: llama.cpp's converter writes special added tokens as
CONTROL and SentencePiece's ``<unk>`` as UNKNOWN (tokenizer_config marks ``<unk>`` special all the same)."""


@dataclass
class TokenDifference:
    kind: str
    """bos | eos | added_token | generation_eos"""
    path: str
    """Where, e.g. ``bos.id`` or ``added[32001].control``."""
    gguf: Any
    upstream: Any
    message: str
    severity: str = "difference"
    """difference (counts) | note (expected converter behaviour, does not count)"""

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "path": self.path,
            "gguf": self.gguf,
            "upstream": self.upstream,
            "message": self.message,
            "severity": self.severity,
        }


def compare_special_tokens(tset: Any, upstream: UpstreamConfig) -> tuple[bool, list[TokenDifference]]:
    """(compared?, differences). Not compared when upstream has no token data (a catalog entry)."""
    sp = upstream.special
    if not (sp.added_tokens or sp.bos or sp.eos or sp.generation_eos_ids):
        return False, []
    has_vocab = bool(getattr(tset, "has_vocab", False))
    gside, uside = _role_sides(tset, sp)
    notes: list[TokenDifference] = []
    gside["added"], uside["added"] = _added_sides(tset, sp, notes) if has_vocab else ({}, {})
    diffs = _deep_differences(gside, uside)
    if sp.generation_eos_ids:
        stops = {t.id for r, t in tset.special_tokens.items() if r in ("eos", "eot", "eom")}
        if stops and not stops & set(sp.generation_eos_ids):
            diffs.append(
                TokenDifference(
                    "generation_eos",
                    "generation_config.eos_token_id",
                    sorted(stops),
                    sp.generation_eos_ids,
                    f"none of the GGUF's end tokens {sorted(stops)} is among upstream's generation eos ids "
                    f"{sp.generation_eos_ids}: generation may not stop at the end of a turn",
                )
            )
    if not has_vocab and sp.added_tokens:
        notes.append(
            TokenDifference(
                "added_token",
                "added",
                None,
                len(sp.added_tokens),
                "the GGUF has no vocabulary: added tokens not compared",
                "note",
            )
        )
    return True, diffs + notes


def _role_sides(tset: Any, sp: UpstreamSpecial) -> tuple[dict[str, Any], dict[str, Any]]:
    gside: dict[str, Any] = {}
    uside: dict[str, Any] = {}
    for role, text in (("bos", sp.bos), ("eos", sp.eos)):
        if text is None:
            continue
        tok = tset.special_tokens.get(role)
        uid = sp.id_of(text)
        gside[role] = {"id": tok.id if tok else None, "text": tok.text if tok else None}
        uside[role] = {"id": uid if uid is not None else (tok.id if tok and tok.text == text else None), "text": text}
    return gside, uside


def _added_sides(tset: Any, sp: UpstreamSpecial, notes: list[TokenDifference]) -> tuple[dict[int, Any], dict[int, Any]]:
    added_g: dict[int, Any] = {}
    added_u: dict[int, Any] = {}
    for tid, tok in sorted(sp.added_tokens.items()):
        text = tset.token_text(tid)
        ttype = tset.token_type(tid)
        added_u[tid] = {"text": tok["content"], "control": bool(tok.get("special"))}
        added_g[tid] = {"text": text, "control": ttype in SPECIAL_TYPES if ttype is not None else None}
        if not tok.get("special") and ttype == CONTROL:
            # llama.cpp's converter marks <|...|>-looking added tokens CONTROL on purpose
            added_g[tid]["control"] = False
            notes.append(
                TokenDifference(
                    "added_token",
                    f"added[{tid}].control",
                    True,
                    False,
                    f"token {tid} {tok['content']!r} is CONTROL in the GGUF but not special upstream "
                    "(llama.cpp's converter does this for tokens that look special)",
                    severity="note",
                )
            )
    return added_g, added_u


def _deep_differences(gside: dict[str, Any], uside: dict[str, Any]) -> list[TokenDifference]:
    from deepdiff import DeepDiff

    diffs: list[TokenDifference] = []
    dd = DeepDiff(gside, uside, verbose_level=2)
    for kind in ("values_changed", "type_changes"):
        for path, change in dd.get(kind, {}).items():
            p = _dd_path(path)
            g, u = change.get("old_value"), change.get("new_value")
            diffs.append(TokenDifference(_kind(p), p, g, u, _token_message(p, g, u)))
    for kind, side in (("dictionary_item_added", "upstream"), ("dictionary_item_removed", "gguf")):
        for path, value in dd.get(kind, {}).items():
            p = _dd_path(path)
            diffs.append(
                TokenDifference(
                    _kind(p),
                    p,
                    value if side == "gguf" else None,
                    value if side == "upstream" else None,
                    f"{p} only in the {side}",
                )
            )
    return diffs


def _dd_path(path: str) -> str:
    # deepdiff paths look like root['added'][32001]['control']
    parts = re.findall(r"\[('([^']*)'|(\d+))\]", path)
    out = ""
    for _, key, idx in parts:
        if idx:
            out += f"[{idx}]"
        else:
            out += ("." if out else "") + key
    return out or path


def _kind(path: str) -> str:
    head = path.split(".")[0].split("[")[0]
    return "added_token" if head == "added" else head


def _token_message(path: str, g: Any, u: Any) -> str:
    if path.endswith(".control"):
        kind = "CONTROL (or UNKNOWN for <unk>)" if g else "neither CONTROL nor UNKNOWN"
        return f"{path}: upstream says special={u}, the GGUF token type is {kind}"
    return f"{path}: GGUF {g!r}, upstream {u!r}"
