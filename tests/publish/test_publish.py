"""Publishing and downloading variants with the real huggingface_hub client over real HTTP.

The Hub is ``tests/hub_server.py`` on 127.0.0.1. The variant is a real export by
``rne_tools.export`` of SmolLM2's architecture with the tiny random config (cached under
``~/.cache/rne/exports``, shared with the export tests), with SmolLM2's real tokenizer files. Every
test works on a copy of the registry and its own generated TypeScript file; the repository's
registry is never touched.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from huggingface_hub import constants as hf_constants

from hub_server import RunningHub, serve_hub
from publish_env import TOKEN, hub_env, registry_files
from rne_tools import registry
from rne_tools.export import ExportResult
from rne_tools.paths import REPO_ROOT
from rne_tools.publish import (
    DownloadError,
    PublishError,
    download_variant,
    plan_publish,
    publish,
)
from rne_tools.publish.exports import read_encoder, read_export, text_width
from rne_tools.registry import codegen

MODEL = "smollm2_135m"
REPO = "software-mansion/react-native-executorch-smollm2"
PTE_PATH = "xnnpack/smollm2_135m_xnnpack_8w.pte"
STEM = "smollm2_135m_xnnpack_8w"
# tiny_export, tokenizer_dir, exports_dir, reg_dir
pytest_plugins = ["publish_fixtures"]


@pytest.fixture
def ts_out(tmp_path: Path) -> Path:
    return tmp_path / "registry.generated.ts"


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RunningHub]:
    """The test Hub, and a Hugging Face environment pointing at it for in-process calls."""
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    # No stored login of the machine may leak in; plain LFS uploads (the server has no Xet).
    monkeypatch.setattr(hf_constants, "HF_TOKEN_PATH", str(tmp_path / "hf-home" / "token"))
    monkeypatch.setattr(hf_constants, "HF_HUB_DISABLE_XET", True)
    with serve_hub({TOKEN: "software-mansion"}) as running:
        yield running


def cli(tmp_path: Path, *args: str, token: str | None = TOKEN) -> subprocess.CompletedProcess:
    env = hub_env(tmp_path, token)
    return subprocess.run(
        [sys.executable, str(REPO_ROOT / "tools" / "publish_models.py"), *args],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env=env,
        timeout=300,
    )


def cli_args(
    hub: RunningHub, exports: Path, tok: Path, reg: Path, ts: Path, revision: str = "v0.1.0"
) -> list[str]:
    return [
        "--model", MODEL, "--revision", revision, "--endpoint", hub.url,
        "--exports-dir", str(exports), "--tokenizer-dir", str(tok),
        "--registry-dir", str(reg), "--ts-output", str(ts), "--allow-random-weights",
    ]  # fmt: skip


def publish_now(
    hub: RunningHub, exports: Path, tok: Path, reg: Path, ts: Path, revision: str = "v0.1.0"
):
    plan = plan_publish(
        MODEL, revision, exports, tok, ["xnnpack"], registry_dir=reg, allow_random_weights=True
    )
    return publish(plan, endpoint=hub.url, registry_dir=reg, ts_output=ts)


def uploads(hub: RunningHub) -> list[str]:
    return [path for method, path in hub.state.requests if method == "PUT"]


def test_publish_round_trip(
    hub: RunningHub,
    tmp_path: Path,
    exports_dir: Path,
    tokenizer_dir: Path,
    reg_dir: Path,
    ts_out: Path,
    tiny_export: ExportResult,
) -> None:
    result = cli(tmp_path, *cli_args(hub, exports_dir, tokenizer_dir, reg_dir, ts_out))
    assert result.returncode == 0, result.stderr
    assert TOKEN not in result.stdout + result.stderr
    assert "committed" in result.stdout and "tag v0.1.0 created" in result.stdout

    # One commit on top of the repository's initial commit, tagged, holding every file.
    repo = hub.state.repos[REPO]
    assert len(repo.commits) == 2
    head = repo.commits[repo.branches["main"]]
    assert repo.tags == {"v0.1.0": head.oid}
    pte_bytes = tiny_export.pte_path.read_bytes()
    stored = head.files[PTE_PATH]
    assert stored.lfs and stored.sha256 == tiny_export.report["sha256"]
    assert hub.state.lfs_objects[stored.sha256] == pte_bytes
    for name in ("tokenizer.json", "tokenizer_config.json"):
        assert head.files[name].content == (tokenizer_dir / name).read_bytes()
    card = head.files["README.md"].content.decode()
    assert "| xnnpack | 8w | `xnnpack/smollm2_135m_xnnpack_8w.pte` |" in card
    v = tiny_export.report["verification"]
    assert f"{v['matching_tokens']}/{v['generated_tokens']} greedy tokens match eager" in card
    assert tiny_export.report["sha256"] in card
    assert "useLLM({ model: models.llm.smollm2_135m })" in card

    # The registry copy records exactly what was uploaded; the TypeScript is regenerated.
    spec = registry.load_registry(reg_dir).model(MODEL)
    assert spec.revision == "v0.1.0"
    variant = spec.variant("xnnpack")
    assert variant.published
    assert (variant.pte.sha256, variant.pte.size) == (
        hashlib.sha256(pte_bytes).hexdigest(),
        len(pte_bytes),
    )
    assert spec.tokenizer.published
    for f in spec.tokenizer.files:
        data = (tokenizer_dir / f.path).read_bytes()
        assert (f.sha256, f.size) == (hashlib.sha256(data).hexdigest(), len(data))
    ts = ts_out.read_text()
    assert ts == codegen.generate_typescript(registry.load_registry(reg_dir))
    assert f"sha256: '{variant.pte.sha256}'" in ts

    # The download helper fetches the variant back through huggingface_hub and verifies it.
    got = download_variant(
        MODEL, "xnnpack", tmp_path / "download", registry_dir=reg_dir, endpoint=hub.url
    )
    assert got.revision == "v0.1.0"
    assert got.pte.read_bytes() == pte_bytes
    assert got.chat_template.read_bytes() == (tokenizer_dir / "tokenizer_config.json").read_bytes()
    assert ("GET", f"/cdn/{stored.sha256}") in hub.state.requests  # LFS bytes came via the CDN
    # What came back is a program the ExecuTorch runtime loads, with the registry's shape.
    from rne_tools.checks.runner import PteRunner

    assert PteRunner(got.pte).info.max_chunk == variant.max_chunk


def test_republishing_identical_files_makes_no_commit(
    hub: RunningHub, exports_dir: Path, tokenizer_dir: Path, reg_dir: Path, ts_out: Path
) -> None:
    first = publish_now(hub, exports_dir, tokenizer_dir, reg_dir, ts_out)
    assert first.new_commit and first.new_tag and first.registry_changed
    recorded = registry_files(reg_dir)
    commits = hub.state.commit_count(REPO)
    puts = len(uploads(hub))

    again = publish_now(hub, exports_dir, tokenizer_dir, reg_dir, ts_out)
    assert (again.commit, again.new_commit, again.new_tag, again.registry_changed) == (
        first.commit,
        False,
        False,
        False,
    )
    assert hub.state.commit_count(REPO) == commits
    assert len(uploads(hub)) == puts
    assert registry_files(reg_dir) == recorded

    # Same files under a new release tag: still no commit, only the tag and the registry move.
    retag = publish_now(hub, exports_dir, tokenizer_dir, reg_dir, ts_out, revision="v0.1.1")
    assert (retag.commit, retag.new_commit, retag.new_tag) == (first.commit, False, True)
    assert hub.state.commit_count(REPO) == commits
    assert hub.state.repos[REPO].tags == {"v0.1.0": first.commit, "v0.1.1": first.commit}
    assert registry.load_registry(reg_dir).model(MODEL).revision == "v0.1.1"


def test_an_existing_tag_with_other_files_is_refused(
    hub: RunningHub,
    tmp_path: Path,
    exports_dir: Path,
    tokenizer_dir: Path,
    reg_dir: Path,
    ts_out: Path,
) -> None:
    publish_now(hub, exports_dir, tokenizer_dir, reg_dir, ts_out)
    recorded = registry_files(reg_dir)
    changed_tok = tmp_path / "tokenizer"
    shutil.copytree(tokenizer_dir, changed_tok, ignore=shutil.ignore_patterns("*.safetensors"))
    # Same size, other bytes: only the content comparison can tell.
    config = (changed_tok / "tokenizer_config.json").read_text()
    assert "assistant" in config
    (changed_tok / "tokenizer_config.json").write_text(config.replace("assistant", "ASSISTANT"))

    with pytest.raises(PublishError, match=r"already has tag v0\.1\.0 with different files") as e:
        publish_now(hub, exports_dir, changed_tok, reg_dir, ts_out)
    assert "tokenizer_config.json: content differs" in str(e.value)
    assert registry_files(reg_dir) == recorded
    assert hub.state.commit_count(REPO) == 2


@pytest.mark.parametrize("failure", ["lfs upload", "commit", "tag"])
def test_a_failure_mid_upload_leaves_the_registry_untouched_and_a_retry_succeeds(
    hub: RunningHub,
    exports_dir: Path,
    tokenizer_dir: Path,
    reg_dir: Path,
    ts_out: Path,
    failure: str,
) -> None:
    before = registry_files(reg_dir)
    if failure == "lfs upload":
        hub.state.fail_lfs_upload_after = 0  # the storage rejects the .pte upload
    elif failure == "commit":
        hub.state.fail_next_commit = True  # every upload lands, then the commit fails
    else:
        hub.state.fail_next_tag = True  # the commit lands, tagging it fails

    with pytest.raises(PublishError, match="Nothing was recorded in the registry"):
        publish_now(hub, exports_dir, tokenizer_dir, reg_dir, ts_out)
    assert registry_files(reg_dir) == before
    assert not ts_out.exists()
    repo = hub.state.repos[REPO]
    assert not repo.tags
    # Only the repository's initial commit, unless the failure came after the commit.
    assert len(repo.commits) == (2 if failure == "tag" else 1)
    assert len(hub.state.lfs_objects) == (0 if failure == "lfs upload" else 1)

    hub.state.fail_lfs_upload_after = None
    puts = len(uploads(hub))
    result = publish_now(hub, exports_dir, tokenizer_dir, reg_dir, ts_out)
    assert result.new_commit == (failure != "tag") and result.new_tag
    assert len(repo.commits) == 2
    assert repo.tags == {"v0.1.0": repo.branches["main"]}
    # Files that already reached the server are not sent again.
    assert len(uploads(hub)) - puts == (1 if failure == "lfs upload" else 0)
    assert registry.load_registry(reg_dir).model(MODEL).variant("xnnpack").published
    assert ts_out.is_file()


def test_a_bad_token_is_a_clear_error_and_is_never_printed(
    hub: RunningHub,
    tmp_path: Path,
    exports_dir: Path,
    tokenizer_dir: Path,
    reg_dir: Path,
    ts_out: Path,
) -> None:
    before = registry_files(reg_dir)
    bad = "hf_revoked_token_9f8e7d6c5b4a"
    args = cli_args(hub, exports_dir, tokenizer_dir, reg_dir, ts_out)
    result = cli(tmp_path, *args, token=bad)
    assert result.returncode == 1
    assert "rejected the Hugging Face token (401 Unauthorized)" in result.stderr
    assert "HF_TOKEN" in result.stderr
    assert bad not in result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert hub.state.requests == [("GET", "/api/whoami-v2")]
    assert REPO not in hub.state.repos
    assert registry_files(reg_dir) == before

    missing = cli(tmp_path, *args, token=None)
    assert missing.returncode == 1
    assert "no Hugging Face token found: set HF_TOKEN or run `hf auth login`" in missing.stderr
    assert len(hub.state.requests) == 1  # nothing was sent without a token
    assert registry_files(reg_dir) == before


@pytest.mark.parametrize(
    ("verification", "expected"),
    [
        (
            {"passed": False, "status": "mismatch", "error": "greedy tokens diverge at step 3"},
            "status: mismatch; greedy tokens diverge at step 3",
        ),
        ({"passed": False, "status": "not run"}, "status: not run"),
        (
            {"passed": False, "status": "unavailable", "reason": "no Vulkan runtime here"},
            "status: unavailable; no Vulkan runtime here",
        ),
    ],
)
def test_an_unverified_variant_is_refused(
    hub: RunningHub,
    tmp_path: Path,
    exports_dir: Path,
    tokenizer_dir: Path,
    reg_dir: Path,
    ts_out: Path,
    verification: dict,
    expected: str,
) -> None:
    report_path = exports_dir / f"{STEM}.report.json"
    report = json.loads(report_path.read_text())
    report["verification"] = verification
    report_path.write_text(json.dumps(report))
    before = registry_files(reg_dir)

    result = cli(tmp_path, *cli_args(hub, exports_dir, tokenizer_dir, reg_dir, ts_out))
    assert result.returncode == 1
    assert f"refusing to publish {STEM}.pte" in result.stderr
    assert f"does not show a passed verification ({expected})" in result.stderr
    assert hub.state.requests == []  # refused before any network access
    assert registry_files(reg_dir) == before
    assert not ts_out.exists()


def test_exports_that_cannot_be_trusted_are_refused(
    exports_dir: Path, tokenizer_dir: Path, reg_dir: Path
) -> None:
    def plan(**kwargs: object) -> None:
        plan_publish(MODEL, "v0.1.0", exports_dir, tokenizer_dir, registry_dir=reg_dir, **kwargs)

    plan(allow_random_weights=True)  # the untouched export is fine
    with pytest.raises(PublishError, match="random-weight test config 'tiny'"):
        plan()
    with pytest.raises(PublishError, match="must be a release tag"):
        plan_publish(MODEL, "main", exports_dir, tokenizer_dir, registry_dir=reg_dir)

    report_path = exports_dir / f"{STEM}.report.json"
    report = json.loads(report_path.read_text())
    other = report["max_chunk"] + 1
    report_path.write_text(json.dumps({**report, "max_chunk": other}))
    with pytest.raises(PublishError, match=f"max_chunk is {other} but the registry's"):
        plan(allow_random_weights=True)
    report_path.write_text(json.dumps(report))

    with (exports_dir / f"{STEM}.pte").open("ab") as f:
        f.write(b"\0")
    with pytest.raises(PublishError, match="changed after it was exported and verified"):
        plan(allow_random_weights=True)

    (exports_dir / f"{STEM}.pte").unlink()
    with pytest.raises(PublishError, match="export the xnnpack variant first"):
        plan(allow_random_weights=True)


def test_dry_run_uploads_nothing(
    hub: RunningHub,
    tmp_path: Path,
    exports_dir: Path,
    tokenizer_dir: Path,
    reg_dir: Path,
    ts_out: Path,
    tiny_export: ExportResult,
) -> None:
    before = registry_files(reg_dir)
    args = cli_args(hub, exports_dir, tokenizer_dir, reg_dir, ts_out)
    result = cli(tmp_path, *args, "--dry-run")
    assert result.returncode == 0, result.stderr
    assert f"sha256 {tiny_export.report['sha256']}" in result.stdout
    assert "dry run: nothing uploaded, registry unchanged" in result.stdout
    assert hub.state.requests == []
    assert registry_files(reg_dir) == before


def test_download_verifies_checksums(
    hub: RunningHub,
    tmp_path: Path,
    exports_dir: Path,
    tokenizer_dir: Path,
    reg_dir: Path,
    ts_out: Path,
) -> None:
    with pytest.raises(DownloadError, match="is not published yet"):
        download_variant(MODEL, "xnnpack", tmp_path / "early", registry_dir=reg_dir)

    publish_now(hub, exports_dir, tokenizer_dir, reg_dir, ts_out)
    dest = tmp_path / "download"
    got = download_variant(MODEL, "xnnpack", dest, registry_dir=reg_dir, endpoint=hub.url)
    good = got.pte.read_bytes()

    # A damaged local copy is fetched again rather than used.
    got.pte.write_bytes(b"\xff" + good[1:])
    again = download_variant(MODEL, "xnnpack", dest, registry_dir=reg_dir, endpoint=hub.url)
    assert again.pte.read_bytes() == good

    # A server that serves other bytes (same size) is caught by the sha256 check.
    oid = hashlib.sha256(good).hexdigest()
    hub.state.lfs_objects[oid] = good[:-1] + bytes([good[-1] ^ 1])
    fresh = tmp_path / "fresh"
    with pytest.raises(DownloadError, match=r"smollm2_135m_xnnpack_8w\.pte does not match"):
        download_variant(MODEL, "xnnpack", fresh, registry_dir=reg_dir, endpoint=hub.url)
    assert not (fresh / PTE_PATH).exists()


def test_an_interrupted_download_resumes_with_range_and_verifies(
    monkeypatch: pytest.MonkeyPatch,
    hub: RunningHub,
    tmp_path: Path,
    exports_dir: Path,
    tokenizer_dir: Path,
    reg_dir: Path,
    ts_out: Path,
    tiny_export: ExportResult,
) -> None:
    publish_now(hub, exports_dir, tokenizer_dir, reg_dir, ts_out)
    # The client writes what it received in DOWNLOAD_CHUNK_SIZE pieces (10 MB); smaller pieces
    # let a sub-megabyte file be cut after some of them have reached the disk.
    chunk = 16 * 1024
    monkeypatch.setattr(hf_constants, "DOWNLOAD_CHUNK_SIZE", chunk)
    hub.state.cut_next_cdn_download = True  # the CDN drops the connection halfway through
    dest = tmp_path / "dl"
    got = download_variant(MODEL, "xnnpack", dest, registry_dir=reg_dir, endpoint=hub.url)
    [resumed] = hub.state.ranges
    start = int(resumed.removeprefix("bytes=").removesuffix("-"))
    assert 0 < start <= tiny_export.report["size"] // 2 and start % chunk == 0
    assert got.pte.read_bytes() == tiny_export.pte_path.read_bytes()


def add_published_vulkan_variant(reg_dir: Path, sha256: str, size: int) -> None:
    """Give the registry copy's SmolLM2 a second, already-published variant."""
    path = reg_dir / "smollm2.yaml"
    text = path.read_text()
    text = text.replace(
        "    variants:\n",
        "    variants:\n"
        "      - backend: vulkan\n"
        "        quantization: 8da4w\n"
        "        status: published\n"
        "        export: {max_context: 2048, max_chunk: 64}\n"
        '        min_platform: {android: 28}\n'
        "        files:\n"
        "          - path: vulkan/smollm2_135m_vulkan_8da4w.pte\n"
        f"            sha256: {sha256}\n"
        f"            size: {size}\n",
    )
    path.write_text(text)
    assert registry.load_registry(reg_dir).model(MODEL).variant("vulkan").published


def test_variants_published_earlier_must_still_be_in_the_new_revision(
    hub: RunningHub,
    exports_dir: Path,
    tokenizer_dir: Path,
    reg_dir: Path,
    ts_out: Path,
) -> None:
    from huggingface_hub import HfApi

    vulkan = b"\0earlier vulkan program\0" * 100
    add_published_vulkan_variant(reg_dir, hashlib.sha256(vulkan).hexdigest(), len(vulkan))
    before = registry_files(reg_dir)

    # The repository lacks the vulkan file the registry calls published: refused before uploading.
    with pytest.raises(PublishError, match=r"vulkan/smollm2_135m_vulkan_8da4w\.pte: missing"):
        publish_now(hub, exports_dir, tokenizer_dir, reg_dir, ts_out)
    assert registry_files(reg_dir) == before
    assert uploads(hub) == [] and hub.state.commit_count(REPO) == 1

    api = HfApi(endpoint=hub.url)
    api.upload_file(path_or_fileobj=vulkan, path_in_repo="vulkan/smollm2_135m_vulkan_8da4w.pte", repo_id=REPO)
    result = publish_now(hub, exports_dir, tokenizer_dir, reg_dir, ts_out, revision="v0.2.0")
    assert result.new_commit
    spec = registry.load_registry(reg_dir).model(MODEL)
    assert spec.revision == "v0.2.0"
    assert spec.variant("vulkan").published and spec.variant("xnnpack").published
    card = hub.state.repos[REPO].resolve("v0.2.0").files["README.md"].content.decode()
    assert "| vulkan | 8da4w | `vulkan/smollm2_135m_vulkan_8da4w.pte` |" in card
    assert "passed (verified when first published)" in card
    assert "| xnnpack | 8w |" in card


def test_an_unreachable_endpoint_is_a_clear_error(
    hub: RunningHub, exports_dir: Path, tokenizer_dir: Path, reg_dir: Path, ts_out: Path
) -> None:
    plan = plan_publish(
        MODEL, "v0.1.0", exports_dir, tokenizer_dir, registry_dir=reg_dir, allow_random_weights=True
    )
    before = registry_files(reg_dir)
    with pytest.raises(PublishError, match=r"cannot reach http://127\.0\.0\.1:9"):
        publish(plan, endpoint="http://127.0.0.1:9", registry_dir=reg_dir, ts_output=ts_out)
    assert registry_files(reg_dir) == before


# --- Encoders ------------------------------------------------------------------------------------
# SmolLM2's registry copy made multimodal: both variants list a vision encoder at one shared path
# (uploaded once), and each its own audio encoder. The encoder programs are small stand-in bytes
# with reports shaped as tools/export_encoder.py writes them: the publisher never loads a program,
# it checks the reports, the checksums and the widths. The text programs are the tiny export (vulkan:
# its bytes with a marker, under a report for that variant).
VISION = "xnnpack/smollm2_135m_vision_xnnpack_fp32.pte"
AUDIO = {
    "xnnpack": "xnnpack/smollm2_135m_audio_xnnpack_fp32.pte",
    "vulkan": "vulkan/smollm2_135m_audio_vulkan_fp16.pte",
}
VULKAN_PTE = "vulkan/smollm2_135m_vulkan_8da4w.pte"
TINY_WIDTH = 64  # hidden_size of the llama architecture's "tiny" random config


def write_encoder(
    exports: Path,
    path: str,
    kind: str,
    *,
    suffix: str,
    width: int = TINY_WIDTH,
    payload: bytes = b"",
    verification: dict | None = None,
) -> Path:
    """A stand-in encoder export for registry ``path``, named as the exporter names it."""
    name = f"{Path(path).stem}{suffix}.pte"
    data = f"{kind} encoder program {path}".encode() * 64 + payload
    (exports / name).write_bytes(data)
    methods = {
        "vision": {"method": "vision_encoder"},
        "audio": {"methods": ["speech_transform", "audio_encoder"]},
    }[kind]
    report = {
        "model": "gemma4:tiny",
        **methods,
        "random_config": {"text": {"hidden_size": width}},
        "text_hidden": width,
        "backend": "xnnpack",
        "quantization": "fp32",
        "file": name,
        "size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "verification": verification
        or {
            "status": "match",
            "passed": True,
            "max_abs_diff": 2.5e-5,
            "relative": 2.4e-5,
            **({"feature_max_abs_diff": 7.1e-4} if kind == "audio" else {}),
        },
    }
    (exports / f"{Path(name).stem}.report.json").write_text(json.dumps(report))
    return exports / name


@pytest.fixture
def media(reg_dir: Path, exports_dir: Path, tiny_export: ExportResult) -> Path:
    """Make the registry copy's SmolLM2 take images and audio, with a vulkan variant beside the
    xnnpack one, and put every encoder's export in the exports directory. Returns the latter."""
    path = reg_dir / "smollm2.yaml"
    text = path.read_text()
    shape = (
        f"export: {{max_context: {tiny_export.report['max_context']}, max_chunk: "
        f"{tiny_export.report['max_chunk']}}}"
    )
    xnnpack_files = "        files:\n          - path: xnnpack/smollm2_135m_xnnpack_8w.pte\n"
    assert text.count(xnnpack_files) == 1

    def encoders(backend: str) -> str:
        return (
            "        encoders:\n"
            f"          vision: {{status: unpublished, path: {VISION}}}\n"
            f"          audio: {{status: unpublished, path: {AUDIO[backend]}}}\n"
        )

    text = text.replace(
        "capabilities: [text-generation, chat]",
        "capabilities: [text-generation, chat, vision, audio]",
    ).replace(xnnpack_files, xnnpack_files + encoders("xnnpack"))
    text = text.replace(
        "    variants:\n",
        "    variants:\n"
        "      - backend: vulkan\n"
        "        quantization: 8da4w\n"
        "        status: unpublished\n"
        f"        {shape}\n"
        '        min_platform: {android: 28}\n'
        f"        files:\n          - path: {VULKAN_PTE}\n" + encoders("vulkan"),
    )
    path.write_text(text)
    spec = registry.load_registry(reg_dir).model(MODEL)
    assert (
        set(spec.variant("vulkan").encoders)
        == set(spec.variant("xnnpack").encoders)
        == {"vision", "audio"}
    )

    vulkan = tiny_export.pte_path.read_bytes() + b"vulkan"
    (exports_dir / "smollm2_135m_vulkan_8da4w.pte").write_bytes(vulkan)
    vulkan_report = {
        **tiny_export.report,
        "backend": "vulkan",
        "quantization": "8da4w",
        "file": "smollm2_135m_vulkan_8da4w.pte",
        "size": len(vulkan),
        "sha256": hashlib.sha256(vulkan).hexdigest(),
    }
    (exports_dir / "smollm2_135m_vulkan_8da4w.report.json").write_text(json.dumps(vulkan_report))
    write_encoder(exports_dir, VISION, "vision", suffix="_280")
    write_encoder(exports_dir, AUDIO["xnnpack"], "audio", suffix="_30s")
    write_encoder(exports_dir, AUDIO["vulkan"], "audio", suffix="")
    return exports_dir


def publish_media(
    hub: RunningHub,
    exports: Path,
    tok: Path,
    reg: Path,
    ts: Path,
    backends: tuple[str, ...] = ("xnnpack", "vulkan"),
    revision: str = "v0.1.0",
):
    plan = plan_publish(
        MODEL, revision, exports, tok, backends, registry_dir=reg, allow_random_weights=True
    )
    return publish(plan, endpoint=hub.url, registry_dir=reg, ts_output=ts)


def encoder_bytes(exports: Path, path: str) -> bytes:
    [pte] = exports.glob(f"{Path(path).stem}*.pte")
    return pte.read_bytes()


def test_variants_are_published_with_their_encoders(
    hub: RunningHub,
    tmp_path: Path,
    media: Path,
    tokenizer_dir: Path,
    reg_dir: Path,
    ts_out: Path,
) -> None:
    dry = cli(tmp_path, *cli_args(hub, media, tokenizer_dir, reg_dir, ts_out), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    vision = encoder_bytes(media, VISION)
    assert (
        f"vision   smollm2_135m_vision_xnnpack_fp32_280.pte -> {VISION}  {len(vision)} bytes  "
        f"sha256 {hashlib.sha256(vision).hexdigest()}"
    ) in dry.stdout
    assert hub.state.requests == []

    result = publish_media(hub, media, tokenizer_dir, reg_dir, ts_out)
    assert result.new_commit and result.new_tag and result.registry_changed

    # One commit holds both variants, the shared vision encoder once and each audio encoder.
    repo = hub.state.repos[REPO]
    head = repo.commits[repo.branches["main"]]
    assert repo.tags == {"v0.1.0": head.oid} and len(repo.commits) == 2
    for path in (VISION, *AUDIO.values()):
        data = encoder_bytes(media, path)
        stored = head.files[path]
        assert stored.lfs and stored.sha256 == hashlib.sha256(data).hexdigest()
        assert hub.state.lfs_objects[stored.sha256] == data
        # Uploaded once, though two variants list the vision encoder.
        assert uploads(hub).count(f"/lfs-upload/{stored.sha256}") == 1
    assert len(uploads(hub)) == 5  # two text programs, three encoders

    # The registry records every encoder entry with the bytes at its path, in both variants.
    spec = registry.load_registry(reg_dir).model(MODEL)
    for backend in ("xnnpack", "vulkan"):
        variant = spec.variant(backend)
        assert variant.published
        for kind, path in (("vision", VISION), ("audio", AUDIO[backend])):
            enc = variant.encoders[kind]
            data = encoder_bytes(media, path)
            assert enc.published and enc.file.path == path
            assert (enc.file.sha256, enc.file.size) == (hashlib.sha256(data).hexdigest(), len(data))
    ts = ts_out.read_text()
    assert ts == codegen.generate_typescript(registry.load_registry(reg_dir))
    assert f"sha256: '{spec.variant('vulkan').encoders['audio'].file.sha256}'" in ts

    # The model card lists the encoders, what uses each, their parity and checksums.
    card = head.files["README.md"].content.decode()
    assert "## Encoders" in card
    kb = f"{len(vision) / 1e3:.1f} kB"
    assert f"| images | `{VISION}` | {kb} | vulkan, xnnpack | passed: max \\|diff\\| " in card
    kb = f"{len(encoder_bytes(media, AUDIO['vulkan'])) / 1e3:.1f} kB"
    assert (
        f"| audio (16 kHz mono) | `{AUDIO['vulkan']}` | {kb} | vulkan | passed: max \\|diff\\| 2.5e-05 "
        "against eager transformers (2.4e-05 x the embeddings' std), features max \\|diff\\| "
        "0.00071 |"
    ) in card
    assert "{ image: '/path/to/photo.jpg' }" in card and "{ audio: '/path/to/clip.wav' }" in card
    assert f"| `{VISION}` | {len(vision)} | `{hashlib.sha256(vision).hexdigest()}` |" in card

    # A download of a variant fetches its published encoders too, verified.
    got = download_variant(MODEL, "vulkan", tmp_path / "dl", registry_dir=reg_dir, endpoint=hub.url)
    assert got.encoders["vision"].read_bytes() == vision
    assert got.encoders["audio"].read_bytes() == encoder_bytes(media, AUDIO["vulkan"])

    # Publishing one variant again keeps the other's own encoder (same bytes at the new
    # revision, listed in the card) and sends no program again (only the card changed).
    plan = plan_publish(
        MODEL,
        "v0.2.0",
        media,
        tokenizer_dir,
        ["xnnpack"],
        registry_dir=reg_dir,
        allow_random_weights=True,
    )
    assert {VISION, AUDIO["xnnpack"]} == {c.path for c in plan.encoders}
    assert {VULKAN_PTE, AUDIO["vulkan"]} == {f.path for f in plan.kept}
    puts = len(uploads(hub))
    again = publish_media(hub, media, tokenizer_dir, reg_dir, ts_out, ("xnnpack",), "v0.2.0")
    assert again.new_tag
    assert len(uploads(hub)) == puts
    card = repo.resolve("v0.2.0").files["README.md"].content.decode()
    assert f"| `{AUDIO['vulkan']}` |" in card and "passed (verified when first published)" in card
    assert registry.load_registry(reg_dir).model(MODEL).variant("vulkan").encoders["audio"].published


def test_an_encoder_shared_with_a_published_variant_must_not_change(
    hub: RunningHub, media: Path, tokenizer_dir: Path, reg_dir: Path, ts_out: Path
) -> None:
    publish_media(hub, media, tokenizer_dir, reg_dir, ts_out)
    recorded = registry_files(reg_dir)
    for old in media.glob(f"{Path(VISION).stem}*"):
        old.unlink()
    write_encoder(media, VISION, "vision", suffix="_280", payload=b"retrained")
    with pytest.raises(PublishError, match=r"also the vision encoder of the published vulkan") as e:
        publish_media(hub, media, tokenizer_dir, reg_dir, ts_out, ("xnnpack",), "v0.2.0")
    assert "add --variant vulkan" in str(e.value)
    assert registry_files(reg_dir) == recorded

    # Together with the vulkan variant the new encoder is published for both.
    publish_media(hub, media, tokenizer_dir, reg_dir, ts_out, revision="v0.2.0")
    spec = registry.load_registry(reg_dir).model(MODEL)
    sha = hashlib.sha256(encoder_bytes(media, VISION)).hexdigest()
    assert {spec.variant(b).encoders["vision"].file.sha256 for b in ("vulkan", "xnnpack")} == {sha}


def break_missing(exports: Path) -> None:
    (exports / "smollm2_135m_audio_xnnpack_fp32_30s.pte").unlink()


def break_parity(exports: Path) -> None:
    write_encoder(
        exports,
        VISION,
        "vision",
        suffix="_280",
        verification={
            "status": "mismatch",
            "passed": False,
            "error": "max |diff| 0.4 over the bound",
        },
    )


def break_width(exports: Path) -> None:
    write_encoder(exports, AUDIO["xnnpack"], "audio", suffix="_30s", width=32)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (
            break_missing,
            "the audio encoder of smollm2_135m (xnnpack/smollm2_135m_audio_xnnpack_fp32.pte) is "
            "not in",
        ),
        (
            break_parity,
            "refusing to publish smollm2_135m_vision_xnnpack_fp32_280.pte: its export report",
        ),
        (
            break_width,
            "smollm2_135m_audio_xnnpack_fp32_30s.pte, the audio encoder of smollm2_135m/xnnpack, "
            "gives 32-wide embeddings, but the xnnpack text variant smollm2_135m_xnnpack_8w.pte "
            "takes 64-wide ones",
        ),
    ],
    ids=["missing", "parity failed", "width"],
)
def test_an_encoder_that_cannot_be_published_is_refused_before_any_upload(
    hub: RunningHub,
    tmp_path: Path,
    media: Path,
    tokenizer_dir: Path,
    reg_dir: Path,
    ts_out: Path,
    damage,
    message: str,
) -> None:
    damage(media)
    before = registry_files(reg_dir)
    result = cli(tmp_path, *cli_args(hub, media, tokenizer_dir, reg_dir, ts_out))
    assert result.returncode == 1
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert hub.state.requests == []  # refused before any network access
    assert registry_files(reg_dir) == before
    assert not ts_out.exists()


def test_encoder_exports_that_cannot_be_trusted_are_refused(
    media: Path, tokenizer_dir: Path, reg_dir: Path
) -> None:
    def plan(**kwargs: object) -> None:
        plan_publish(MODEL, "v0.1.0", media, tokenizer_dir, registry_dir=reg_dir, **kwargs)

    plan(allow_random_weights=True)  # the untouched exports are fine
    # Without the flag the text variant is refused first; an encoder is refused on its own too.
    spec = registry.load_registry(reg_dir).model(MODEL)
    with pytest.raises(PublishError, match="280.pte: it was exported from the random-weight"):
        read_encoder(spec, "vision", VISION, media)
    assert read_encoder(spec, "vision", VISION, media, allow_random_weights=True).text_hidden == 64

    audio = media / "smollm2_135m_audio_vulkan_fp16.pte"
    with audio.open("ab") as f:
        f.write(b"\0")
    with pytest.raises(PublishError, match="changed after it was exported and verified"):
        plan(allow_random_weights=True)
    write_encoder(media, AUDIO["vulkan"], "audio", suffix="")

    # A vision program where the audio encoder belongs.
    for old in media.glob("smollm2_135m_audio_vulkan_fp16*"):
        old.unlink()
    write_encoder(media, AUDIO["vulkan"], "vision", suffix="")
    with pytest.raises(PublishError, match=r"needs speech_transform, audio_encoder; is "):
        plan(allow_random_weights=True)
    write_encoder(media, AUDIO["vulkan"], "audio", suffix="")

    # Two budgets of one encoder: which one to publish is not guessed.
    write_encoder(media, VISION, "vision", suffix="_560")
    with pytest.raises(
        PublishError, match=r"ambiguous: .* holds smollm2_135m_vision_xnnpack_fp32_"
    ):
        plan(allow_random_weights=True)
    (media / "smollm2_135m_vision_xnnpack_fp32_560.pte").unlink()

    # Two registry paths with one file name would be published from one export.
    family = reg_dir / "smollm2.yaml"
    yaml_text = family.read_text()
    family.write_text(yaml_text.replace(AUDIO["vulkan"], "vulkan/smollm2_135m_audio_xnnpack_fp32.pte"))
    with pytest.raises(PublishError, match=r"would both be published from smollm2_135m_audio_xnn"):
        plan(allow_random_weights=True)
    family.write_text(yaml_text)

    (media / "smollm2_135m_vision_xnnpack_fp32_280.report.json").unlink()
    with pytest.raises(PublishError, match="needs the report its export wrote beside it"):
        plan(allow_random_weights=True)


def test_the_text_width_comes_from_where_the_export_says_its_weights_came_from(
    tmp_path: Path, exports_dir: Path, tokenizer_dir: Path, reg_dir: Path
) -> None:
    spec = registry.load_registry(reg_dir).model(MODEL)
    tiny = read_export(spec, spec.variant("xnnpack"), exports_dir, allow_random_weights=True)
    assert text_width(spec, tiny, tmp_path) == TINY_WIDTH  # the architecture's "tiny" config
    # A checkpoint export: its config.json (SmolLM2-135M is 576 wide), from the report's
    # checkpoint, or else from the checkpoint directory given to the publisher.
    real = dataclasses.replace(tiny, random_config=None, checkpoint=str(tokenizer_dir))
    assert text_width(spec, real, tmp_path) == 576
    moved = dataclasses.replace(real, checkpoint=str(tmp_path / "elsewhere"))
    assert text_width(spec, moved, tokenizer_dir) == 576
    with pytest.raises(PublishError, match="pass --tokenizer-dir, the checkpoint directory"):
        text_width(spec, moved, tmp_path)
    custom = dataclasses.replace(tiny, random_config="custom")
    with pytest.raises(PublishError, match="random_config 'custom' is not a named llama config"):
        text_width(spec, custom, tokenizer_dir)
