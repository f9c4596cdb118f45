"""Publishing and downloading variants with the real huggingface_hub client over real HTTP.

The Hub is ``tests/hub_server.py`` on 127.0.0.1. The variant is a real export by
``rne_tools.export`` of SmolLM2's architecture with the tiny random config (cached under
``~/.cache/rne/exports``, shared with the export tests), with SmolLM2's real tokenizer files. Every
test works on a copy of the registry and its own generated TypeScript file; the repository's
registry is never touched.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from huggingface_hub import constants as hf_constants

from hub_server import RunningHub, serve_hub
from rne_tools import registry
from rne_tools.export import ExportResult
from rne_tools.gguf_import import default_checkpoint
from rne_tools.paths import REGISTRY_DIR, REPO_ROOT
from rne_tools.publish import (
    DownloadError,
    PublishError,
    download_variant,
    plan_publish,
    publish,
)

MODEL = "smollm2_135m"
REPO = "software-mansion/react-native-executorch-smollm2"
PTE_PATH = "xnnpack/smollm2_135m_xnnpack_8w.pte"
STEM = "smollm2_135m_xnnpack_8w"
TOKEN = "hf_test_token_5b0c1e77d2"  # the only token the test Hub accepts


@pytest.fixture(scope="session")
def tiny_export(tiny_llama_8w) -> ExportResult:
    """A verified 8w XNNPACK export (the registry variant's recipe) of the tiny random Llama."""
    return tiny_llama_8w


@pytest.fixture(scope="session")
def tokenizer_dir() -> Path:
    return default_checkpoint("smollm2_135m")


@pytest.fixture
def exports_dir(tmp_path: Path, tiny_export: ExportResult) -> Path:
    """A writable copy of the export (tests edit reports; the cache stays pristine)."""
    out = tmp_path / "exports"
    out.mkdir()
    for path in (tiny_export.pte_path, tiny_export.report_path):
        shutil.copyfile(path, out / path.name)
    return out


@pytest.fixture
def reg_dir(tmp_path: Path, tiny_export: ExportResult) -> Iterator[Path]:
    """A copy of the registry whose SmolLM2 xnnpack variant has the tiny export's shape."""
    real = {p.name: p.read_bytes() for p in REGISTRY_DIR.iterdir()}
    target = tmp_path / "model-registry"
    shutil.copytree(REGISTRY_DIR, target)
    family = target / "smollm2.yaml"
    text = family.read_text()
    shape = "export: {max_context: 2048, max_chunk: 64}"
    assert text.count(shape) == 1
    report = tiny_export.report
    tiny = f"export: {{max_context: {report['max_context']}, max_chunk: {report['max_chunk']}}}"
    family.write_text(text.replace(shape, tiny))
    yield target
    assert {p.name: p.read_bytes() for p in REGISTRY_DIR.iterdir()} == real


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
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING_FACE"))}
    env.update(HF_HOME=str(tmp_path / "hf-home"), HF_HUB_DISABLE_XET="1")
    if token is not None:
        env["HF_TOKEN"] = token
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


def snapshot(reg: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(reg.iterdir())}


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
    assert ts == registry.generate_typescript(registry.load_registry(reg_dir))
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
    recorded = snapshot(reg_dir)
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
    assert snapshot(reg_dir) == recorded

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
    recorded = snapshot(reg_dir)
    changed_tok = tmp_path / "tokenizer"
    shutil.copytree(tokenizer_dir, changed_tok, ignore=shutil.ignore_patterns("*.safetensors"))
    # Same size, other bytes: only the content comparison can tell.
    config = (changed_tok / "tokenizer_config.json").read_text()
    assert "assistant" in config
    (changed_tok / "tokenizer_config.json").write_text(config.replace("assistant", "ASSISTANT"))

    with pytest.raises(PublishError, match=r"already has tag v0\.1\.0 with different files") as e:
        publish_now(hub, exports_dir, changed_tok, reg_dir, ts_out)
    assert "tokenizer_config.json: content differs" in str(e.value)
    assert snapshot(reg_dir) == recorded
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
    before = snapshot(reg_dir)
    if failure == "lfs upload":
        hub.state.fail_lfs_upload_after = 0  # the storage rejects the .pte upload
    elif failure == "commit":
        hub.state.fail_next_commit = True  # every upload lands, then the commit fails
    else:
        hub.state.fail_next_tag = True  # the commit lands, tagging it fails

    with pytest.raises(PublishError, match="Nothing was recorded in the registry"):
        publish_now(hub, exports_dir, tokenizer_dir, reg_dir, ts_out)
    assert snapshot(reg_dir) == before
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
    before = snapshot(reg_dir)
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
    assert snapshot(reg_dir) == before

    missing = cli(tmp_path, *args, token=None)
    assert missing.returncode == 1
    assert "no Hugging Face token found: set HF_TOKEN or run `hf auth login`" in missing.stderr
    assert len(hub.state.requests) == 1  # nothing was sent without a token
    assert snapshot(reg_dir) == before


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
    before = snapshot(reg_dir)

    result = cli(tmp_path, *cli_args(hub, exports_dir, tokenizer_dir, reg_dir, ts_out))
    assert result.returncode == 1
    assert f"refusing to publish {STEM}.pte" in result.stderr
    assert f"does not show a passed verification ({expected})" in result.stderr
    assert hub.state.requests == []  # refused before any network access
    assert snapshot(reg_dir) == before
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
    before = snapshot(reg_dir)
    args = cli_args(hub, exports_dir, tokenizer_dir, reg_dir, ts_out)
    result = cli(tmp_path, *args, "--dry-run")
    assert result.returncode == 0, result.stderr
    assert f"sha256 {tiny_export.report['sha256']}" in result.stdout
    assert "dry run: nothing uploaded, registry unchanged" in result.stdout
    assert hub.state.requests == []
    assert snapshot(reg_dir) == before


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


def add_published_mlx_variant(reg_dir: Path, sha256: str, size: int) -> None:
    """Give the registry copy's SmolLM2 a second, already-published variant."""
    path = reg_dir / "smollm2.yaml"
    text = path.read_text()
    text = text.replace(
        "    variants:\n",
        "    variants:\n"
        "      - backend: mlx\n"
        "        quantization: int4\n"
        "        status: published\n"
        "        export: {max_context: 2048, max_chunk: 64}\n"
        '        min_platform: {ios: "17.0"}\n'
        "        files:\n"
        "          - path: mlx/smollm2_135m_mlx_int4.pte\n"
        f"            sha256: {sha256}\n"
        f"            size: {size}\n",
    )
    path.write_text(text)
    assert registry.load_registry(reg_dir).model(MODEL).variant("mlx").published


def test_variants_published_earlier_must_still_be_in_the_new_revision(
    hub: RunningHub,
    exports_dir: Path,
    tokenizer_dir: Path,
    reg_dir: Path,
    ts_out: Path,
) -> None:
    from huggingface_hub import HfApi

    mlx = b"\0earlier mlx program\0" * 100
    add_published_mlx_variant(reg_dir, hashlib.sha256(mlx).hexdigest(), len(mlx))
    before = snapshot(reg_dir)

    # The repository lacks the mlx file the registry calls published: refused before uploading.
    with pytest.raises(PublishError, match=r"mlx/smollm2_135m_mlx_int4\.pte: missing"):
        publish_now(hub, exports_dir, tokenizer_dir, reg_dir, ts_out)
    assert snapshot(reg_dir) == before
    assert uploads(hub) == [] and hub.state.commit_count(REPO) == 1

    api = HfApi(endpoint=hub.url)
    api.upload_file(path_or_fileobj=mlx, path_in_repo="mlx/smollm2_135m_mlx_int4.pte", repo_id=REPO)
    result = publish_now(hub, exports_dir, tokenizer_dir, reg_dir, ts_out, revision="v0.2.0")
    assert result.new_commit
    spec = registry.load_registry(reg_dir).model(MODEL)
    assert spec.revision == "v0.2.0"
    assert spec.variant("mlx").published and spec.variant("xnnpack").published
    card = hub.state.repos[REPO].resolve("v0.2.0").files["README.md"].content.decode()
    assert "| mlx | int4 | `mlx/smollm2_135m_mlx_int4.pte` |" in card
    assert "passed (verified when first published)" in card
    assert "| xnnpack | 8w |" in card


def test_an_unreachable_endpoint_is_a_clear_error(
    hub: RunningHub, exports_dir: Path, tokenizer_dir: Path, reg_dir: Path, ts_out: Path
) -> None:
    plan = plan_publish(
        MODEL, "v0.1.0", exports_dir, tokenizer_dir, registry_dir=reg_dir, allow_random_weights=True
    )
    before = snapshot(reg_dir)
    with pytest.raises(PublishError, match=r"cannot reach http://127\.0\.0\.1:9"):
        publish(plan, endpoint="http://127.0.0.1:9", registry_dir=reg_dir, ts_output=ts_out)
    assert snapshot(reg_dir) == before
