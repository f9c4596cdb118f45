"""Publishing a variant with its assistant drafter and fetching either program back, with the
real huggingface_hub client over real HTTP (tests/hub_server.py on 127.0.0.1).

The assistant program is the real export of the tiny random Gemma 4 with a tiny random assistant
(the C++ runner's `assistant_models` fixture: the same request, so one cached export serves
both). The registry copy gives Gemma 4's xnnpack variant that export's shape, text only (the
encoders are test_publish.py's subject). The variant's own program is that export's bytes with
a suffix and the report the exporter writes without --assistant: the publisher checks reports and
checksums, and no second slow export is needed to exercise it.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from huggingface_hub import constants as hf_constants

from hub_server import RunningHub, serve_hub
from publish_env import TOKEN, hub_env
from rne_tools import registry
from rne_tools.export import ExportResult, cached_export
from rne_tools.models import gemma4_assistant
from rne_tools.paths import REGISTRY_DIR, REPO_ROOT
from rne_tools.publish import DownloadError, PublishError, download_variant, plan_publish, publish
from rne_tools.registry import codegen

MODEL = "gemma4_e2b"
REPO = "software-mansion/react-native-executorch-gemma-4"
STEM = "gemma4_e2b_xnnpack_fp32"
PLAIN = "xnnpack/gemma4_e2b_xnnpack_8da4w.pte"
ASSISTANT = "xnnpack/gemma4_e2b_xnnpack_8da4w_assistant.pte"


@pytest.fixture(scope="session")
def assistant_export(tmp_path_factory: pytest.TempPathFactory) -> ExportResult:
    """cpp/tests/CMakeLists.txt's export_tiny_gemma4_assistant, from the export cache."""
    checkpoint = gemma4_assistant.write_random_checkpoint(tmp_path_factory.mktemp("assistant"))
    return cached_export(
        MODEL, "xnnpack", "fp32", progress=False, random_config="tiny", max_context=64,
        max_chunk=6, verify_tokens=5, assistant=checkpoint,
    )  # fmt: skip


@pytest.fixture
def exports(tmp_path: Path, assistant_export: ExportResult) -> Path:
    """<exports>/ the variant's own program and report; <exports>/assistant/ the real export
    with the drafter."""
    out = tmp_path / "exports"
    (out / "assistant").mkdir(parents=True)
    for path in (assistant_export.pte_path, assistant_export.report_path):
        shutil.copyfile(path, out / "assistant" / path.name)
    plain = assistant_export.pte_path.read_bytes() + b"plain"
    (out / f"{STEM}.pte").write_bytes(plain)
    report = {**assistant_export.report, "assistant": None, "verify_tokens": None}
    report.update(size=len(plain), sha256=hashlib.sha256(plain).hexdigest())
    report["verification"] = {
        k: v for k, v in report["verification"].items() if k not in ("verify_method", "draft_method")
    }
    (out / f"{STEM}.report.json").write_text(json.dumps(report))
    return out


@pytest.fixture
def tokenizer_dir(tmp_path: Path) -> Path:
    out = tmp_path / "tokenizer"
    out.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        (out / name).write_text(json.dumps({"file": name}))
    return out


@pytest.fixture
def reg_dir(tmp_path: Path, assistant_export: ExportResult) -> Path:
    """A registry copy whose Gemma 4 is text only, its xnnpack variant of the export's shape."""
    target = tmp_path / "model-registry"
    shutil.copytree(REGISTRY_DIR, target)
    path = target / "gemma4.yaml"
    doc = yaml.safe_load(path.read_text())
    model = doc["models"][0]
    model["capabilities"] = ["text-generation", "chat"]
    report = assistant_export.report
    for v in model["variants"]:
        v.pop("encoders", None)
        if v["backend"] == "xnnpack":
            v["quantization"] = "fp32"
            v["export"] = {"max_context": report["max_context"], "max_chunk": report["max_chunk"]}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    assert registry.load_registry(target).model(MODEL).variant("xnnpack").assistant is not None
    return target


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RunningHub]:
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setattr(hf_constants, "HF_TOKEN_PATH", str(tmp_path / "hf-home" / "token"))
    monkeypatch.setattr(hf_constants, "HF_HUB_DISABLE_XET", True)
    with serve_hub({TOKEN: "software-mansion"}) as running:
        yield running


def plan(exports: Path, tok: Path, reg: Path, **kwargs):
    return plan_publish(
        MODEL, "v0.1.0", exports, tok, ["xnnpack"], registry_dir=reg, allow_random_weights=True,
        **kwargs,
    )  # fmt: skip


def method_names(pte: Path) -> set[str]:
    from executorch.runtime import Runtime

    return set(Runtime.get().load_program(pte).method_names)


def test_a_variant_is_published_with_its_assistant_and_either_program_comes_back(
    hub: RunningHub,
    tmp_path: Path,
    exports: Path,
    tokenizer_dir: Path,
    reg_dir: Path,
    assistant_export: ExportResult,
) -> None:
    ts_out = tmp_path / "registry.generated.ts"
    dry = subprocess.run(
        [sys.executable, str(REPO_ROOT / "tools" / "publish_models.py"), "--model", MODEL,
         "--variant", "xnnpack", "--revision", "v0.1.0", "--endpoint", hub.url,
         "--exports-dir", str(exports), "--tokenizer-dir", str(tokenizer_dir),
         "--registry-dir", str(reg_dir), "--ts-output", str(ts_out), "--allow-random-weights",
         "--dry-run"],
        capture_output=True, text=True, cwd=REPO_ROOT, env=hub_env(tmp_path), timeout=300,
    )  # fmt: skip
    assert dry.returncode == 0, dry.stderr
    sha = assistant_export.report["sha256"]
    assert f"-> {ASSISTANT}  {assistant_export.report['size']} bytes  sha256 {sha}" in dry.stdout
    assert "draft: 4 greedy steps match the eager assistant" in dry.stdout
    assert hub.state.requests == []

    result = publish(plan(exports, tokenizer_dir, reg_dir), endpoint=hub.url,
                     registry_dir=reg_dir, ts_output=ts_out)  # fmt: skip
    assert result.new_commit and result.new_tag and result.registry_changed

    # One commit holds both programs.
    repo = hub.state.repos[REPO]
    head = repo.commits[repo.branches["main"]]
    stored = head.files[ASSISTANT]
    assert stored.lfs and stored.sha256 == sha
    assert hub.state.lfs_objects[sha] == assistant_export.pte_path.read_bytes()
    plain = (exports / f"{STEM}.pte").read_bytes()
    assert head.files[PLAIN].sha256 == hashlib.sha256(plain).hexdigest()
    card = head.files["README.md"].content.decode()
    assert "## Assistant drafter (speculative decoding)" in card
    assert (
        f"| xnnpack | `{ASSISTANT}` | 2.1 MB | [google/gemma-4-E2B-it-assistant]"
        "(https://huggingface.co/google/gemma-4-E2B-it-assistant) | 5 | passed: "
    ) in card
    assert f"models.llm.{MODEL}, backend: 'xnnpack', assistant: true" in card

    # The registry records it; the TypeScript carries it.
    spec = registry.load_registry(reg_dir).model(MODEL)
    got = spec.variant("xnnpack").assistant
    assert got is not None and got.published
    assert (got.file.sha256, got.file.size) == (sha, assistant_export.report["size"])
    ts = ts_out.read_text()
    assert ts == codegen.generate_typescript(registry.load_registry(reg_dir))
    assert f"sha256: '{sha}',\n          size: {got.file.size},\n          sourceRepo:" in ts

    # A plain download never fetches the assistant's program; asked for, it replaces the plain
    # one, verified, and it is a program with the draft and verify methods.
    before = len(hub.state.requests)
    dl = download_variant(MODEL, "xnnpack", tmp_path / "plain", registry_dir=reg_dir,
                          endpoint=hub.url)  # fmt: skip
    assert dl.pte.read_bytes() == plain
    assert not any(ASSISTANT in path or sha in path for _, path in hub.state.requests[before:])
    fast = download_variant(MODEL, "xnnpack", tmp_path / "fast", registry_dir=reg_dir,
                            endpoint=hub.url, assistant=True)  # fmt: skip
    assert fast.pte == tmp_path / "fast" / ASSISTANT
    assert fast.pte.read_bytes() == assistant_export.pte_path.read_bytes()
    assert not (tmp_path / "fast" / PLAIN).exists()
    assert {"forward", "verify", "draft"} <= method_names(fast.pte)

    # A server that serves other bytes for it is caught.
    hub.state.lfs_objects[sha] = b"\0" * got.file.size
    with pytest.raises(DownloadError, match=r"_assistant\.pte does not match the registry"):
        download_variant(MODEL, "xnnpack", tmp_path / "bad", registry_dir=reg_dir,
                         endpoint=hub.url, assistant=True)  # fmt: skip

    # Publishing the variant again keeps its assistant (no program is uploaded twice).
    puts = [p for m, p in hub.state.requests if m == "PUT"]
    again = publish(plan(exports, tokenizer_dir, reg_dir), endpoint=hub.url,
                    registry_dir=reg_dir, ts_output=ts_out)  # fmt: skip
    assert not again.registry_changed
    assert [p for m, p in hub.state.requests if m == "PUT"] == puts


def test_a_published_assistant_stays_when_another_variant_is_published(
    hub: RunningHub, tmp_path: Path, exports: Path, tokenizer_dir: Path, reg_dir: Path,
    assistant_export: ExportResult,
) -> None:
    ts_out = tmp_path / "registry.generated.ts"
    publish(plan(exports, tokenizer_dir, reg_dir), endpoint=hub.url, registry_dir=reg_dir,
            ts_output=ts_out)  # fmt: skip
    # A Vulkan variant of the same shape (the plain export's bytes with a marker, its report).
    path = reg_dir / "gemma4.yaml"
    doc = yaml.safe_load(path.read_text())
    report = json.loads((exports / f"{STEM}.report.json").read_text())
    vulkan = next(v for v in doc["models"][0]["variants"] if v["backend"] == "vulkan")
    vulkan["export"] = {"max_context": report["max_context"], "max_chunk": report["max_chunk"]}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    program = (exports / f"{STEM}.pte").read_bytes() + b"vulkan"
    (exports / "gemma4_e2b_vulkan_8da4w.pte").write_bytes(program)
    report.update(backend="vulkan", quantization="8da4w", file="gemma4_e2b_vulkan_8da4w.pte",
                  size=len(program), sha256=hashlib.sha256(program).hexdigest())  # fmt: skip
    (exports / "gemma4_e2b_vulkan_8da4w.report.json").write_text(json.dumps(report))

    second = plan_publish(MODEL, "v0.2.0", exports, tokenizer_dir, ["vulkan"], registry_dir=reg_dir,
                          allow_random_weights=True)  # fmt: skip
    assert second.assistants == ()
    sha = assistant_export.report["sha256"]
    assert any(f.path == ASSISTANT and f.sha256 == sha for f in second.kept)
    assert f"| xnnpack | `{ASSISTANT}` | 2.1 MB |" in second.card
    assert "| 5 | passed (verified when first published) |" in second.card
    publish(second, endpoint=hub.url, registry_dir=reg_dir, ts_output=ts_out)
    repo = hub.state.repos[REPO]
    assert repo.resolve("v0.2.0").files[ASSISTANT].sha256 == sha
    got = registry.load_registry(reg_dir).model(MODEL)
    assert got.revision == "v0.2.0" and got.variant("xnnpack").assistant.published
    fast = download_variant(MODEL, "xnnpack", tmp_path / "fast", registry_dir=reg_dir,
                            endpoint=hub.url, assistant=True)  # fmt: skip
    assert fast.pte.read_bytes() == assistant_export.pte_path.read_bytes()


def test_an_assistant_only_where_the_registry_lists_one(reg_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(DownloadError) as info:
        download_variant(MODEL, "vulkan", tmp_path, registry_dir=reg_dir, assistant=True)
    assert str(info.value) == (
        "the vulkan variant of 'gemma4_e2b' has no assistant drafter; variants with one: "
        "gemma4_e2b (xnnpack)"
    )
    with pytest.raises(DownloadError, match=r"the assistant of 'gemma4_e2b' \(xnnpack, "
                       r"xnnpack/gemma4_e2b_xnnpack_8da4w_assistant\.pte\) is not published yet"):
        download_variant(MODEL, "xnnpack", tmp_path, registry_dir=reg_dir, assistant=True)


def _edit_report(path: Path, **fields: object) -> None:
    report = json.loads(path.read_text())
    report.update(fields)
    path.write_text(json.dumps(report))


def test_assistant_exports_that_cannot_be_trusted_are_refused(
    exports: Path, tokenizer_dir: Path, reg_dir: Path, tmp_path: Path
) -> None:
    # Missing: the message says how to export it.
    with pytest.raises(PublishError) as info:
        plan(exports, tokenizer_dir, reg_dir, assistant_exports_dir=tmp_path / "none")
    assert (
        f"the xnnpack variant of gemma4_e2b declares an assistant ({ASSISTANT}), but "
        f"{tmp_path / 'none'} has no {STEM}.pte: export it with .venv/bin/python "
        "tools/export_model.py --model gemma4_e2b --backend xnnpack --assistant "
        "ASSISTANT_CHECKPOINT_DIR (from google/gemma-4-E2B-it-assistant) --verify-tokens 5"
    ) in str(info.value)

    report = exports / "assistant" / f"{STEM}.report.json"
    original = report.read_text()
    cases = [
        ({"verify_tokens": 4}, "verify_tokens is 4 but the registry's gemma4_e2b/xnnpack "
                               "assistant needs 5"),
        ({"assistant": None}, "has no draft method"),
        ({"random_config": None, "checkpoint": "/ckpt/gemma-4-E2B-it"},
         "was exported from /ckpt/gemma-4-E2B-it, but the xnnpack variant's program"),
    ]  # fmt: skip
    for fields, expected in cases:
        report.write_text(original)
        _edit_report(report, **fields)
        with pytest.raises(PublishError, match=expected):
            plan(exports, tokenizer_dir, reg_dir, assistant_exports_dir=exports / "assistant")
    report.write_text(original)
    verification = json.loads(original)["verification"]
    _edit_report(report, verification={**verification, "draft_method": {"status": "not run"}})
    with pytest.raises(PublishError, match="does not show a passed check of the draft method"):
        plan(exports, tokenizer_dir, reg_dir)
    report.write_text(original)

    # The assistant's program in the variant's place: every app would download it.
    for name in (f"{STEM}.pte", f"{STEM}.report.json"):
        shutil.copyfile(exports / "assistant" / name, exports / name)
    with pytest.raises(PublishError, match="was exported with --assistant"):
        plan(exports, tokenizer_dir, reg_dir)


def test_a_release_that_exports_now_says_the_assistant_needs_an_export_of_its_own(
    tmp_path: Path,
) -> None:
    from rne_tools.release import ModelRequest, ReleaseError, export_models

    with pytest.raises(ReleaseError) as info:
        export_models([ModelRequest(MODEL, ("xnnpack",))], REGISTRY_DIR, tmp_path, dry_run=True)
    assert str(info.value).startswith(
        f"gemma4_e2b/xnnpack declares an assistant drafter ({ASSISTANT}), which --export does not "
        "make: export the variant and, with --assistant (the checkpoint of "
        "google/gemma-4-E2B-it-assistant) and --verify-tokens 5, its assistant program"
    )
    assert list(tmp_path.iterdir()) == []
