"""fetch_upstream against a real HTTP server on 127.0.0.1 speaking the Hub protocol (tests/hubserver.py),
through the real huggingface_hub client, with a fresh cache per test."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from gguftpl.errors import HubError
from gguftpl.upstream.catalog import load_catalog
from gguftpl.upstream.hub import fetch_upstream, load_upstream_dir, parse_repo_ref
from tests.hubserver import HubServer, tokenizer_config

HERMES = "NousResearch/Hermes-2-Pro-Mistral-7B"


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    with HubServer(tmp_path / "hub") as server:
        yield server


def fetch(hub: HubServer, repo: str, revision: str | None = None, **kw):
    return fetch_upstream(repo, revision, endpoint=hub.url, **kw)


def hermes_templates() -> dict[str, str]:
    entry = load_catalog().get(HERMES)
    assert entry is not None
    return {n: entry.text(n) for n in ("default", "tool_use")}


def paths(hub: HubServer) -> list[str]:
    return [f"{r.method} {r.path}" for r in hub.log]


def test_string_chat_template(hub: HubServer) -> None:
    text = "{% for m in messages %}{{ m['content'] }}\n{% endfor %}"
    sha = hub.add_repo("org/plain", {"tokenizer_config.json": tokenizer_config(text, bos_token="<s>")})
    cfg = fetch(hub, "org/plain")
    assert cfg.templates == {"default": text}
    assert cfg.sources == {"default": "tokenizer_config.json"}
    assert cfg.commit_sha == sha and cfg.revision_requested is None
    assert cfg.special.bos == "<s>"
    # the cold fetch is exactly what RESEARCH §6 describes: revision, tree, then HEAD+GET per file
    log = paths(hub)
    assert log[0] == "GET /api/models/org/plain/revision/main"
    assert log[1].startswith(f"GET /api/models/org/plain/tree/{sha}") and "recursive=true" in log[1]
    assert f"HEAD /org/plain/resolve/{sha}/tokenizer_config.json" in log
    assert f"GET /org/plain/resolve/{sha}/tokenizer_config.json" in log


def test_list_chat_template_default_first_and_names_sanitised(hub: HubServer) -> None:
    tpl = hermes_templates()
    # tool_use listed first upstream, plus a name gguf-py would sanitise
    raw = {
        "chat_template": [
            {"name": "tool_use", "template": tpl["tool_use"]},
            {"name": "default", "template": tpl["default"]},
            {"name": "rag v2", "template": "RAG"},
        ]
    }
    hub.add_repo(HERMES, {"tokenizer_config.json": json.dumps(raw)})
    cfg = fetch(hub, HERMES)
    assert list(cfg.templates) == ["default", "tool_use", "rag_v2"]
    assert cfg.templates["tool_use"] == tpl["tool_use"]
    assert cfg.original_names == {"rag_v2": "rag v2"}


def test_chat_template_jinja_and_additional_templates(hub: HubServer) -> None:
    files = {
        "tokenizer_config.json": json.dumps({"bos_token": "<s>"}),
        "chat_template.jinja": "DEFAULT\n",
        "additional_chat_templates/tool_use.jinja": "TOOLS\n",
        "additional_chat_templates/rag.jinja": "RAG",
        "additional_chat_templates/notes.txt": "not a template",
    }
    hub.add_repo("org/jinja", files)
    cfg = fetch(hub, "org/jinja")
    # trailing newlines kept byte for byte, as gguf-py's converter keeps them
    assert cfg.templates == {"default": "DEFAULT\n", "rag": "RAG", "tool_use": "TOOLS\n"}
    assert cfg.sources["default"] == "chat_template.jinja"
    assert cfg.sources["tool_use"] == "additional_chat_templates/tool_use.jinja"
    assert "additional_chat_templates/notes.txt" not in cfg.files


def test_tokenizer_config_wins_over_jinja_then_chat_template_json(hub: HubServer) -> None:
    hub.add_repo(
        "org/both",
        {"tokenizer_config.json": tokenizer_config("FROM_TC"), "chat_template.jinja": "FROM_JINJA"},
    )
    assert fetch(hub, "org/both").templates == {"default": "FROM_TC"}
    hub.add_repo(
        "org/ctj",
        {"tokenizer_config.json": "{}", "chat_template.json": json.dumps({"chat_template": "FROM_JSON"})},
    )
    cfg = fetch(hub, "org/ctj")
    assert cfg.templates == {"default": "FROM_JSON"} and cfg.sources["default"] == "chat_template.json"


def test_revision_pins_branch_tag_and_commit(hub: HubServer) -> None:
    sha_main = hub.add_repo("org/rev", {"tokenizer_config.json": tokenizer_config("MAIN")})
    sha_v1 = hub.add_repo("org/rev", {"tokenizer_config.json": tokenizer_config("V1")}, revision="v1.0")
    assert sha_main != sha_v1
    cfg = fetch(hub, "org/rev", "v1.0")
    assert (cfg.templates["default"], cfg.commit_sha, cfg.revision_requested) == ("V1", sha_v1, "v1.0")
    assert fetch(hub, "org/rev@v1.0").commit_sha == sha_v1
    by_sha = fetch(hub, "org/rev", sha_main)
    assert (by_sha.templates["default"], by_sha.commit_sha) == ("MAIN", sha_main)


def test_pinned_commit_in_warm_cache_makes_no_request(hub: HubServer) -> None:
    sha = hub.add_repo("org/pin", {"tokenizer_config.json": tokenizer_config("X", added_tokens_decoder={})})
    fetch(hub, "org/pin", sha)
    hub.clear_log()
    assert fetch(hub, "org/pin", sha).templates == {"default": "X"}
    assert hub.log == []


def test_special_tokens_from_config_tokenizer_json_and_generation_config(hub: HubServer) -> None:
    tc = tokenizer_config(
        "T",
        bos_token={"content": "<s>", "special": True},
        eos_token="<|im_end|>",
        added_tokens_decoder={"1": {"content": "<s>", "special": True}, "7": {"content": "<x>", "special": False}},
    )
    hub.add_repo(
        "org/sp",
        {
            "tokenizer_config.json": tc,
            "generation_config.json": json.dumps({"eos_token_id": [2, 7]}),
            "tokenizer.json": json.dumps({"added_tokens": [{"id": 99, "content": "<never>", "special": True}]}),
        },
    )
    cfg = fetch(hub, "org/sp")
    assert cfg.special.bos == "<s>" and cfg.special.eos == "<|im_end|>"
    assert cfg.special.added_tokens == {1: {"content": "<s>", "special": True}, 7: {"content": "<x>", "special": False}}
    assert cfg.special.generation_eos_ids == [2, 7]
    # tokenizer.json (MBs on real repos) is not downloaded when tokenizer_config has the added tokens
    assert not any("tokenizer.json" in p for p in paths(hub))

    hub.add_repo(
        "org/sp2",
        {
            "tokenizer_config.json": tokenizer_config("T"),
            "tokenizer.json": json.dumps({"added_tokens": [{"id": 5, "content": "<|im_end|>", "special": True}]}),
        },
    )
    cfg2 = fetch(hub, "org/sp2")
    assert cfg2.special.added_tokens == {5: {"content": "<|im_end|>", "special": True}}
    assert cfg2.special.added_tokens_source == "tokenizer.json"


@pytest.mark.parametrize(
    ("repo", "revision", "expect"),
    [
        ("org/missing", None, "repository not found"),
        ("org/there", "nope", "revision not found"),
        ("org/ggufonly", None, "no tokenizer_config.json"),
    ],
)
def test_missing_repo_revision_file(hub: HubServer, repo: str, revision: str | None, expect: str) -> None:
    hub.add_repo("org/there", {"tokenizer_config.json": tokenizer_config("X")})
    hub.add_repo("org/ggufonly", {"model.Q4_K_M.gguf": b"GGUF"})
    with pytest.raises(HubError) as err:
        fetch(hub, repo, revision)
    msg = str(err.value)
    assert expect in msg and "\n" not in msg


def test_gated_repo(hub: HubServer) -> None:
    hub.add_repo("org/gated", {"tokenizer_config.json": tokenizer_config("X")})
    hub.set_gated("org/gated")
    with pytest.raises(HubError, match="gated"):
        fetch(hub, "org/gated")


def test_hf_token_opens_a_gated_repo(hub: HubServer, monkeypatch: pytest.MonkeyPatch) -> None:
    hub.add_repo("org/gated", {"tokenizer_config.json": tokenizer_config("X")})
    hub.set_gated("org/gated", token="hf_testtoken")
    with pytest.raises(HubError, match="gated"):
        fetch(hub, "org/gated", token="hf_wrong")
    monkeypatch.setenv("HF_TOKEN", "hf_testtoken")  # read at call time, not at import
    assert fetch(hub, "org/gated").templates == {"default": "X"}


def test_offline_warm_and_cold_cache(hub: HubServer, monkeypatch: pytest.MonkeyPatch) -> None:
    tpl = hermes_templates()
    sha = hub.add_repo(HERMES, {"tokenizer_config.json": tokenizer_config(tpl)})
    online = fetch(hub, HERMES)
    hub.clear_log()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    warm = fetch(hub, HERMES)
    assert warm.templates == online.templates and warm.commit_sha == sha
    assert warm.origin == "cache"
    assert hub.log == []  # offline means offline
    hub.add_repo("org/never-fetched", {"tokenizer_config.json": tokenizer_config("X")})
    with pytest.raises(HubError, match="not in the local cache and HF_HUB_OFFLINE is set"):
        fetch(hub, "org/never-fetched")
    assert hub.log == []


def test_dropped_connection_is_a_hub_error(hub: HubServer) -> None:
    hub.add_repo("org/flaky", {"tokenizer_config.json": tokenizer_config("X")})
    hub.drop_connection = True
    with pytest.raises(HubError, match="connection to .* failed") as err:
        fetch(hub, "org/flaky")
    assert "\n" not in str(err.value)
    assert hub.log and all(r.status == 0 for r in hub.log)


def test_no_network() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(HubError, match="connection to|cannot reach"):
        fetch_upstream("org/x", endpoint=f"http://127.0.0.1:{port}", cache_dir=None, offline=False)


def test_unreachable_hub_falls_back_to_catalog_only_with_known_revision(hub: HubServer) -> None:
    hub.drop_connection = True
    cfg = fetch(hub, HERMES, catalog_fallback=True)
    entry = load_catalog().get(HERMES)
    assert entry is not None and entry.revision
    assert cfg.origin == "catalog" and cfg.commit_sha == entry.revision
    assert cfg.warnings[0].startswith("WARNING: the Hub could not be reached")
    assert cfg.templates == hermes_templates()
    # an explicit other revision, or an entry without a known revision: no fallback (offline with a
    # cold cache is the same "unreachable" case, without huggingface_hub's retry back-off on a pinned sha)
    with pytest.raises(HubError, match="not in the local cache"):
        fetch(hub, HERMES, "0" * 40, catalog_fallback=True, offline=True)
    with pytest.raises(HubError, match="not in the local cache"):
        fetch(hub, "NousResearch/Hermes-3-Llama-3.1-8B", catalog_fallback=True, offline=True)
    assert fetch(hub, HERMES, catalog_fallback=True, offline=True).origin == "catalog"
    # a definite answer from the Hub (404) never falls back
    hub.drop_connection = False
    with pytest.raises(HubError, match="repository not found"):
        fetch(hub, HERMES, catalog_fallback=True)


def test_parse_repo_ref() -> None:
    assert parse_repo_ref("org/name@v2") == ("org/name", "v2")
    assert parse_repo_ref("https://huggingface.co/org/name") == ("org/name", None)
    for bad in ("name-only", "a/b/c", "org/na me", ""):
        with pytest.raises(HubError):
            parse_repo_ref(bad)


def test_load_upstream_dir_and_json(tmp_path: Path) -> None:
    tpl = hermes_templates()
    d = tmp_path / "repo"
    (d / "additional_chat_templates").mkdir(parents=True)
    (d / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|im_end|>"}))
    (d / "chat_template.jinja").write_text(tpl["default"])
    (d / "additional_chat_templates" / "tool_use.jinja").write_text(tpl["tool_use"])
    cfg = load_upstream_dir(d)
    assert cfg.templates == tpl and cfg.origin == "dir" and cfg.special.eos == "<|im_end|>"

    tc = tmp_path / "tokenizer_config.json"
    tc.write_text(tokenizer_config(tpl))
    assert load_upstream_dir(tc).templates == tpl

    bundle = tmp_path / "bundle.json"
    bundle.write_text(
        json.dumps(
            {
                "repo_id": HERMES,
                "revision": "a" * 40,
                "files": {"tokenizer_config.json": json.loads(tokenizer_config(tpl))},
            }
        )
    )
    b = load_upstream_dir(bundle)
    assert (b.repo_id, b.commit_sha, b.templates) == (HERMES, "a" * 40, tpl)

    for bad, msg in ((tmp_path / "nope", "no such"), (tmp_path / "bad.json", "not valid JSON")):
        if bad.suffix:
            bad.write_text("{nope")
        with pytest.raises(HubError, match=msg):
            load_upstream_dir(bad)
