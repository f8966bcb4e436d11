"""Remote header reads against a real HTTP server on 127.0.0.1 (tests/hubserver.py).

Byte and request counts are checked against the server's own request log, not only against what the
client says it fetched.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from gguftpl.errors import GGUFFormatError, HubError
from gguftpl.gguf.httpsource import DEFAULT_INITIAL_CHUNK, DEFAULT_MAX_CHUNK
from gguftpl.gguf.hubref import HubFileRef, HubRepoRef, parse_remote, parse_repo_spec
from gguftpl.gguf.reader import GGUFHeader, LazyArray, read_header
from gguftpl.gguf.remote import open_remote, read_remote_header
from gguftpl.gguf.shards import shard_info
from gguftpl.hubenv import headers as hub_headers
from tests.conftest import CHATML
from tests.hubserver import HubServer

SMOL = "SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA_VOCAB = "ggml-vocab-gemma-4.gguf"  # 262,144-token vocabulary, a ~15 MB header


def same_header(a: GGUFHeader, b: GGUFHeader) -> None:
    assert (a.version, a.byteorder, a.tensor_count, a.kv_count) == (b.version, b.byteorder, b.tensor_count, b.kv_count)
    assert list(a.kv) == list(b.kv)
    for key in a.kv:
        ka, kb = a.kv[key], b.kv[key]
        assert (ka.type, ka.offset, ka.end) == (kb.type, kb.offset, kb.end), key
        if isinstance(ka.value, LazyArray):  # big arrays: same bytes, without decoding 262k strings
            assert isinstance(kb.value, LazyArray) and len(ka.value) == len(kb.value), key
            assert ka.value._loader(ka.value.offset, ka.value.end) == kb.value._loader(kb.value.offset, kb.value.end)
        else:
            assert ka.value == kb.value, key
    assert [(t.name, t.shape, t.ggml_type, t.offset) for t in a.tensors] == [
        (t.name, t.shape, t.ggml_type, t.offset) for t in b.tensors
    ]
    assert (a.kv_end, a.tensor_info_end, a.data_offset, a.file_size) == (
        b.kv_end,
        b.tensor_info_end,
        b.data_offset,
        b.file_size,
    )


def gets(hub: HubServer) -> list[Any]:
    return [r for r in hub.log if r.method == "GET" and "/resolve/" in r.path]


# ------------------------------------------------------------------------------------------ spec parsing


@pytest.mark.parametrize(
    ("spec", "repo", "filename", "rev"),
    [
        ("hf://org/name/model.Q4_K_M.gguf", "org/name", "model.Q4_K_M.gguf", None),
        ("hf://org/name/sub/dir/m.gguf@v1.0", "org/name", "sub/dir/m.gguf", "v1.0"),
        ("hf://org/name@refs%2Fpr%2F3/m.gguf", "org/name", "m.gguf", "refs/pr/3"),
        ("hf://org/name/m.gguf@refs/pr/3", "org/name", "m.gguf", "refs/pr/3"),
        ("https://huggingface.co/org/name/resolve/main/m.gguf", "org/name", "m.gguf", "main"),
        ("https://hf.example/org/name/blob/abc123/q/m.gguf?download=true", "org/name", "q/m.gguf", "abc123"),
    ],
)
def test_parse_remote_forms(spec: str, repo: str, filename: str, rev: str | None) -> None:
    ref = parse_remote(spec)
    assert isinstance(ref, HubFileRef)
    assert (ref.repo_id, ref.filename, ref.revision) == (repo, filename, rev)


def test_parse_remote_url_endpoint_and_plain_urls() -> None:
    ref = parse_remote("http://127.0.0.1:9/datasets/org/name/resolve/main/m.gguf")
    assert isinstance(ref, HubFileRef)
    assert (ref.repo_type, ref.endpoint) == ("dataset", "http://127.0.0.1:9")
    assert ref.url().startswith("http://127.0.0.1:9/datasets/org/name/resolve/main/")
    assert parse_remote("https://cdn.example/x/model.gguf") == "https://cdn.example/x/model.gguf"


@pytest.mark.parametrize("bad", ["hf://org/name", "hf://org/m.gguf", "hf://../x/m.gguf", "ftp://x/y.gguf"])
def test_parse_remote_rejects(bad: str) -> None:
    with pytest.raises(HubError):
        parse_remote(bad)


def test_parse_repo_spec() -> None:
    assert parse_repo_spec("org/name") == HubRepoRef("org/name", None)
    assert parse_repo_spec("org/name@v2") == HubRepoRef("org/name", "v2")
    assert parse_repo_spec("hf://org/name@main") == HubRepoRef("org/name", "main")
    r = parse_repo_spec("https://hf.example/org/name/tree/refs/pr/1")
    assert (r.repo_id, r.revision, r.endpoint) == ("org/name", "refs/pr/1", "https://hf.example")
    with pytest.raises(HubError):
        parse_repo_spec("just-a-name")


def test_shard_info() -> None:
    s = shard_info("dir/Model-Q8_0-00002-of-00003.gguf")
    assert s is not None and (s.number, s.count, s.first) == (2, 3, "dir/Model-Q8_0-00001-of-00003.gguf")
    assert shard_info("Model-Q8_0.gguf") is None
    assert shard_info("Model-00004-of-00003.gguf") is None


# ------------------------------------------------------------------------------------------ real GGUFs


def test_remote_smollm2_matches_local_and_fetches_header_plus_one_chunk(hub: HubServer, corpus_file: Any) -> None:
    path = corpus_file(SMOL)
    hub.add_file("org/smol-GGUF", SMOL, path)
    rr = read_remote_header(f"hf://org/smol-GGUF/{SMOL}")
    local = read_header(path)
    same_header(rr.header, local)

    log = gets(hub)
    served = sum(r.bytes_sent for r in log)
    assert served == rr.stats.bytes_fetched  # the client's count is what the server sent
    assert rr.stats.requests == len(log) and all(r.status == 206 for r in log)
    # every request is a range, each no larger than the cap, and together they cover the header once
    sizes = [int(m.group(2)) - int(m.group(1)) + 1 for m in (re.match(r"bytes=(\d+)-(\d+)", r.range) for r in log)]
    assert all(s <= DEFAULT_MAX_CHUNK for s in sizes)
    assert sizes[0] == DEFAULT_INITIAL_CHUNK
    header_end = local.tensor_info_end
    assert header_end <= served <= header_end + sizes[-1]
    assert served < local.file_size / 10  # 98 MB file: nothing like a download
    # later requests are pinned to the commit the first answer named
    assert rr.stats.revision == hub.commit_sha("org/smol-GGUF")
    assert all(rr.stats.revision in r.path for r in log[1:])
    assert rr.label == f"hf://org/smol-GGUF/{SMOL}@{rr.stats.revision}"
    assert rr.remote_dict()["bytes_fetched"] == served


def test_remote_262k_vocab_grows_geometrically(hub: HubServer, corpus_file: Any) -> None:
    path = corpus_file(GEMMA_VOCAB)
    hub.add_file("org/gemma", "vocab.gguf", path)
    rr = read_remote_header("hf://org/gemma/vocab.gguf")
    local = read_header(path)
    same_header(rr.header, local)
    assert len(rr.header.kv["tokenizer.ggml.tokens"].value) == 262144
    log = gets(hub)
    sizes = [r.bytes_sent for r in log]
    # geometric growth: ~15 MB in a handful of requests, none above the per-request cap
    assert len(log) <= 8
    assert max(sizes) <= DEFAULT_MAX_CHUNK
    assert all(b >= a for a, b in zip(sizes[:-2], sizes[1:-1], strict=True))
    assert sum(sizes) == rr.stats.bytes_fetched <= local.file_size


def test_server_ignoring_range_is_streamed_and_cut_short(hub: HubServer, corpus_file: Any) -> None:
    path = corpus_file(SMOL)
    hub.add_file("org/smol", "m.gguf", path)
    hub.ignore_range = True
    rr = read_remote_header("hf://org/smol/m.gguf")
    same_header(rr.header, read_header(path))
    assert rr.stats.range_ignored
    log = gets(hub)
    assert [r.status for r in log] == [200] and rr.stats.requests == 1
    size = path.stat().st_size
    # we read the header and stopped; the server could push at most its socket buffers more
    assert rr.stats.bytes_fetched <= rr.header.tensor_info_end + DEFAULT_MAX_CHUNK
    assert log[0].bytes_sent < size / 4


# ------------------------------------------------------------------------------------------ generated files


def test_split_gguf_reads_first_shard(hub: HubServer, make_gguf: Any) -> None:
    first = make_gguf(
        "m-00001-of-00002.gguf",
        templates={"default": CHATML},
        extra_kv={"split.no": 0, "split.count": 2},
    )
    second = make_gguf("m-00002-of-00002.gguf", tensors=True, extra_kv={"split.no": 1, "split.count": 2})
    hub.add_file("org/split", first.name, first)
    hub.add_file("org/split", second.name, second)
    rr = read_remote_header("hf://org/split/m-00002-of-00002.gguf")
    assert rr.header.get("tokenizer.chat_template") == CHATML
    assert rr.shard is not None and (rr.shard.number, rr.shard.count) == (2, 2)
    assert any("first shard" in n for n in rr.notes)
    assert all("00001-of-00002" in r.path for r in gets(hub))
    assert rr.label.startswith("hf://org/split/m-00001-of-00002.gguf@")


def test_truncated_remote_header_is_a_format_error(hub: HubServer, make_gguf: Any) -> None:
    path = make_gguf("full.gguf", templates={"default": CHATML})
    cut = read_header(path).kv_end // 2
    hub.add_repo("org/cut", {"m.gguf": path.read_bytes()[:cut]})
    with pytest.raises(GGUFFormatError, match="remain|truncated|exceeds"):
        read_remote_header("hf://org/cut/m.gguf", retries=0)
    # the remote size bounds every length, as for a local file: the same error, byte for byte
    local_cut = path.with_name("cut.gguf")
    local_cut.write_bytes(path.read_bytes()[:cut])
    with pytest.raises(GGUFFormatError) as local_err:
        read_header(local_cut)
    with pytest.raises(GGUFFormatError) as remote_err:
        read_remote_header("hf://org/cut/m.gguf", retries=0)
    assert str(remote_err.value) == str(local_err.value)


def test_small_chunks_still_read_the_whole_header(hub: HubServer, make_gguf: Any) -> None:
    path = make_gguf("m.gguf", templates={"default": CHATML, "tool_use": CHATML + "{# tools #}"})
    hub.add_file("org/m", "m.gguf", path)
    rr = read_remote_header("hf://org/m/m.gguf", initial_chunk=64, max_chunk=256)
    same_header(rr.header, read_header(path))
    log = gets(hub)
    assert rr.stats.requests == len(log) > 3
    assert log[0].range == "bytes=0-63"
    # a request larger than the cap is only ever exactly what one value needs: never more than the cap
    # past the end of the header
    local = read_header(path)
    assert sum(r.bytes_sent for r in log) == rr.stats.bytes_fetched <= local.tensor_info_end + 256


# ------------------------------------------------------------------------------------------ errors


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("hf://org/nope/m.gguf", "repository org/nope not found"),
        ("hf://org/m/zz.gguf", "zz.gguf not found in org/m@main"),
        ("hf://org/m/m.gguf@v9", "revision 'v9' not found in org/m"),
    ],
)
def test_missing_things_are_hub_errors(hub: HubServer, make_gguf: Any, spec: str, message: str) -> None:
    hub.add_file("org/m", "m.gguf", make_gguf("m.gguf"))
    with pytest.raises(HubError, match=re.escape(message)) as info:
        read_remote_header(spec, retries=0)
    assert "\n" not in str(info.value)


def test_gated_repo(hub: HubServer, make_gguf: Any) -> None:
    hub.add_file("org/gated", "m.gguf", make_gguf("m.gguf"))
    hub.set_gated("org/gated")
    with pytest.raises(HubError, match="gated repo.*HF_TOKEN"):
        read_remote_header("hf://org/gated/m.gguf", retries=0)


def test_offline_is_a_hub_error_without_requests(
    hub: HubServer, make_gguf: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub.add_file("org/m", "m.gguf", make_gguf("m.gguf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HubError, match="HF_HUB_OFFLINE"):
        read_remote_header("hf://org/m/m.gguf")
    assert hub.log == []


def test_dropped_connections(hub: HubServer, make_gguf: Any) -> None:
    hub.add_file("org/m", "m.gguf", make_gguf("m.gguf", templates={"default": CHATML}))
    hub.drop_connection = True
    with pytest.raises(HubError, match="127.0.0.1"):
        read_remote_header("hf://org/m/m.gguf", retries=1, initial_chunk=1024)
    assert len(gets(hub)) == 2  # first try + one retry
    hub.drop_connection = False
    hub.drop_after_bytes = 100
    hub.clear_log()
    with pytest.raises(HubError, match="connection dropped"):
        read_remote_header("hf://org/m/m.gguf", retries=0, initial_chunk=1024)
    assert [r.bytes_sent for r in gets(hub)] == [100]


def test_a_transient_drop_is_retried(hub: HubServer, make_gguf: Any) -> None:
    path = make_gguf("m.gguf", templates={"default": CHATML})
    hub.add_file("org/m", "m.gguf", path)
    hub.drop_connection = 1
    rr = read_remote_header("hf://org/m/m.gguf", retries=2)
    assert rr.header.get("tokenizer.chat_template") == CHATML
    assert [r.status for r in gets(hub)] == [0, 206]


def test_token_goes_to_the_hub_only(hub: HubServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_secret_for_test")
    assert hub_headers().get("authorization") == "Bearer hf_secret_for_test"
    src, _, _, _ = open_remote(f"{hub.url}/org/m/resolve/main/m.gguf")
    assert src._headers.get("authorization") == "Bearer hf_secret_for_test"
    foreign, _, _, _ = open_remote("http://127.0.0.2:1/some/m.gguf")
    assert "authorization" not in {k.lower() for k in foreign._headers}


def test_server_errors_are_retried_then_reported(hub: HubServer, make_gguf: Any) -> None:
    hub.add_file("org/m", "m.gguf", make_gguf("m.gguf"))
    hub.fail_status = 503
    with pytest.raises(HubError, match="server error HTTP 503") as info:
        read_remote_header("hf://org/m/m.gguf", retries=1)
    assert "\n" not in str(info.value)
    assert [r.status for r in gets(hub)] == [503, 503]
    hub.fail_status = 500
    hub.clear_log()
    with pytest.raises(HubError, match="HTTP 500"):
        read_remote_header("hf://org/m/m.gguf", retries=0)
    assert len(gets(hub)) == 1


def test_hf_token_opens_a_gated_repo(hub: HubServer, make_gguf: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    path = make_gguf("m.gguf", templates={"default": CHATML})
    hub.add_file("org/gated", "m.gguf", path)
    hub.set_gated("org/gated", token="hf_open_sesame")
    with pytest.raises(HubError, match="gated"):
        read_remote_header("hf://org/gated/m.gguf", retries=0)
    monkeypatch.setenv("HF_TOKEN", "hf_open_sesame")
    rr = read_remote_header("hf://org/gated/m.gguf", retries=0)
    assert rr.header.get("tokenizer.chat_template") == CHATML


def test_revisions_branch_tag_pr_and_commit(hub: HubServer, make_gguf: Any) -> None:
    main_sha = hub.add_file("org/m", "m.gguf", make_gguf("main.gguf", templates={"default": CHATML}))
    v2_sha = hub.add_file("org/m", "m.gguf", make_gguf("v2.gguf", templates={"default": CHATML + "{# v2 #}"}), "v2")
    pr_sha = hub.add_file("org/m", "m.gguf", make_gguf("pr.gguf", templates={"default": "{# pr #}"}), "refs/pr/1")
    cases = [
        ("hf://org/m/m.gguf", main_sha, CHATML),
        ("hf://org/m/m.gguf@v2", v2_sha, CHATML + "{# v2 #}"),
        ("hf://org/m@refs%2Fpr%2F1/m.gguf", pr_sha, "{# pr #}"),
        (f"hf://org/m/m.gguf@{v2_sha}", v2_sha, CHATML + "{# v2 #}"),
        (f"{hub.url}/org/m/resolve/refs%2Fpr%2F1/m.gguf", pr_sha, "{# pr #}"),
    ]
    for spec, sha, text in cases:
        rr = read_remote_header(spec, retries=0)
        assert (rr.stats.revision, rr.header.get("tokenizer.chat_template")) == (sha, text), spec
        assert rr.label == f"hf://org/m/m.gguf@{sha}"
