"""The assistant drafter's program in the model registry (tools/rne_tools/registry/): a variant's
optional `assistant` entry, its checks, and what the generated TypeScript carries of it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from registry_edits import edit, load_error
from rne_tools import registry
from rne_tools.backend_catalog import load_catalog
from rne_tools.errors import ExportError
from rne_tools.models import ARCHITECTURES
from rne_tools.registry import codegen
from rne_tools.registry.specs import ASSISTANT_BACKENDS

SHA = "ab" * 32
PATH = "xnnpack/gemma4_e2b_xnnpack_8da4w_assistant.pte"


def variant(doc: dict[str, Any], v: int = 1) -> dict[str, Any]:
    """The first model's variant ``v`` (Gemma 4: 0 mlx, 1 xnnpack, 2 vulkan)."""
    found: dict[str, Any] = doc["models"][0]["variants"][v]
    return found


def assistant(doc: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = variant(doc)["assistant"]
    return found


def test_gemma4_xnnpack_declares_googles_assistant() -> None:
    spec = registry.load_registry().model("gemma4_e2b")
    got = spec.variant("xnnpack").assistant
    assert got == registry.AssistantSpec(
        "unpublished", registry.FileSpec(PATH), "google/gemma-4-E2B-it-assistant", 5
    )
    assert got.verify_tokens < spec.variant("xnnpack").max_chunk
    assert spec.variant("mlx").assistant is None and spec.variant("vulkan").assistant is None
    smol = registry.load_registry().model("smollm2_135m")
    assert all(v.assistant is None for v in smol.variants.values())


def test_the_registry_allows_an_assistant_where_the_exporter_makes_one() -> None:
    """ASSISTANT_BACKENDS says what rne_tools.export.assistant.check_request lets through: the
    architecture and backend are checked before anything else (a missing --verify-tokens is the
    first refusal past them)."""
    from rne_tools.export.assistant import check_request

    for architecture in ARCHITECTURES:
        for backend in load_catalog().names():
            with pytest.raises(ExportError) as info:
                check_request(Path("/nonexistent"), backend, architecture, {}, 0, 8)
            allowed = "needs --verify-tokens" in str(info.value)
            assert allowed == (backend in ASSISTANT_BACKENDS.get(architecture, ())), (
                architecture, backend, str(info.value))


def _on_smollm2(doc: dict[str, Any]) -> None:
    variant(doc, 0)["assistant"] = {
        "status": "unpublished",
        "path": "xnnpack/smollm2_assistant.pte",
        "source": {"hf_repo": "google/gemma-4-E2B-it-assistant"},
        "verify_tokens": 5,
    }


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            lambda d: variant(d, 2).update(assistant=assistant(d)),
            "gemma4.yaml: models[0].variants[2].assistant: the vulkan variant cannot carry an "
            "assistant: the 'gemma4' drafter is exported for xnnpack only (docs/design.md says "
            "what the others lack); remove it (model 'gemma4_e2b')",
        ),
        (
            lambda d: assistant(d).update(path="xnnpack/drafter.bin"),
            "gemma4.yaml: models[0].variants[1].assistant.path: 'xnnpack/drafter.bin' is not a "
            ".pte program (model 'gemma4_e2b')",
        ),
        (
            lambda d: assistant(d).update(verify_tokens=128),
            "gemma4.yaml: models[0].variants[1].assistant.verify_tokens: 128 must be below the "
            "variant's max_chunk (128): the assistant reads one position more of the sliding "
            "caches than the model does (model 'gemma4_e2b')",
        ),
        (
            lambda d: assistant(d).update(verify_tokens=1),
            "gemma4.yaml: models[0].variants[1].assistant.verify_tokens: 1 is less than the "
            "minimum of 2 (expected tokens one verify call scores",
        ),
        (
            lambda d: assistant(d).pop("source"),
            "gemma4.yaml: models[0].variants[1].assistant: 'source' is a required property",
        ),
        (
            lambda d: assistant(d).update(source={"hf_repo": "gemma-4-E2B-it-assistant"}),
            "gemma4.yaml: models[0].variants[1].assistant.source.hf_repo: "
            "'gemma-4-E2B-it-assistant' does not match",
        ),
        (
            lambda d: assistant(d).update(sha256=SHA, size=10),
            "gemma4.yaml: models[0].variants[1].assistant.sha256: must be absent while status "
            "is 'unpublished' (checksums come from the publisher, never placeholders)",
        ),
        (
            lambda d: assistant(d).update(status="published"),
            "gemma4.yaml: models[0].variants[1].assistant.sha256: required when status is "
            "'published'",
        ),
        (
            lambda d: assistant(d).update(status="published", sha256=SHA, size=10),
            "gemma4.yaml: models[0].variants[1].assistant.status: 'published' while its variant "
            "is not: publish the variant and its assistant together (tools/publish_models.py)",
        ),
        (
            lambda d: assistant(d).update(path="xnnpack/gemma4_e2b_xnnpack_8da4w.pte"),
            "gemma4.yaml: models[0].variants[1].assistant.path: "
            "'xnnpack/gemma4_e2b_xnnpack_8da4w.pte' is already used by "
            "models[0].variants[1].files[0].path (model 'gemma4_e2b')",
        ),
        (
            lambda d: assistant(d).update(path="xnnpack/Gemma4_E2B_vision_xnnpack_8w.pte"),
            "gemma4.yaml: models[0].variants[1].assistant.path: "
            "'xnnpack/Gemma4_E2B_vision_xnnpack_8w.pte' and "
            "'xnnpack/gemma4_e2b_vision_xnnpack_8w.pte' (gemma4.yaml: models[0].variants",
        ),
        (
            lambda d: assistant(d).update(extra=1),
            "gemma4.yaml: models[0].variants[1].assistant: Additional properties are not allowed "
            "('extra' was unexpected)",
        ),
    ],
    ids=[
        "on a backend without the drafter",
        "not a program",
        "verify tokens not below max_chunk",
        "verify tokens below 2",
        "no source",
        "source not a Hub repository",
        "checksums while unpublished",
        "published without checksums",
        "published before its variant",
        "the variant's own program",
        "a case clash with another file",
        "unknown field",
    ],
)
def test_bad_assistant_entries_are_refused(
    registry_copy: Path, change: Callable[[dict[str, Any]], None], expected: str
) -> None:
    edit(registry_copy, change)
    assert expected in load_error(registry_copy)


def test_an_architecture_without_a_drafter_may_not_list_an_assistant(registry_copy: Path) -> None:
    edit(registry_copy, _on_smollm2, "smollm2.yaml")
    assert (
        "smollm2.yaml: models[0].variants[0].assistant: the xnnpack variant cannot carry an "
        "assistant: the 'llama' architecture has no assistant drafter (architectures with one: "
        "gemma4); remove it (model 'smollm2_135m')"
    ) in load_error(registry_copy)


def test_a_published_assistant_is_generated_with_its_checksum(registry_copy: Path) -> None:
    def publish(doc: dict[str, Any]) -> None:
        v = variant(doc)
        v["status"] = "published"
        v["files"][0].update(sha256="cd" * 32, size=3_000_000_000)
        for encoder in v["encoders"].values():
            encoder.update(status="published", sha256="ef" * 32, size=1000)
        assistant(doc).update(
            status="published", sha256=SHA, size=3_310_000_000, peak_memory_bytes=2_900_000_000
        )

    def publish_encoders_everywhere(doc: dict[str, Any]) -> None:
        # Every variant lists the same encoder files: one file, one status.
        for v in doc["models"][0]["variants"]:
            for encoder in v["encoders"].values():
                encoder.update(status="published", sha256="ef" * 32, size=1000)

    edit(registry_copy, publish)
    edit(registry_copy, publish_encoders_everywhere)
    spec = registry.load_registry(registry_copy).model("gemma4_e2b")
    got = spec.variant("xnnpack").assistant
    assert got is not None and got.published and got.file.sha256 == SHA
    assert got.peak_memory_bytes == 2_900_000_000
    ts = codegen.generate_typescript(registry.load_registry(registry_copy))
    assert (
        "        assistant: {\n"
        "          status: 'published',\n"
        f"          path: '{PATH}',\n"
        f"          sha256: '{SHA}',\n"
        "          size: 3310000000,\n"
        "          sourceRepo: 'google/gemma-4-E2B-it-assistant',\n"
        "          verifyTokens: 5,\n"
        "          peakMemoryBytes: 2900000000,\n"
        "        },\n"
    ) in ts
    # Only the xnnpack variant has one; the type says it is optional.
    assert ts.count("        assistant: {\n") == 1
    assert "  readonly assistant?: AssistantDescriptor;\n" in ts


def test_the_registered_source_is_a_drafter_for_e2b() -> None:
    """gemma4_e2b's assistant comes from google/gemma-4-E2B-it-assistant, whose published shape
    (gemma4_assistant.E2B_CONFIG) our drafter parses and finds fit for E2B's caches and width."""
    import torch

    from benchmarks.export_benchmark import gemma4_e2b_config
    from rne_tools.models import gemma4, gemma4_assistant

    spec = registry.load_registry().model("gemma4_e2b")
    assert spec.variant("xnnpack").assistant.hf_repo == "google/gemma-4-E2B-it-assistant"
    args = gemma4_assistant.AssistantArgs.from_hf_config(gemma4_assistant.E2B_CONFIG)
    e2b = gemma4.ModelArgs.from_hf_config(gemma4_e2b_config(35))
    assert args.target_problem(e2b) is None
    assert (args.dim, args.n_layers, args.num_centroids, args.centroid_top_k) == (256, 4, 2048, 32)
    with torch.device("meta"):
        params = sum(p.numel() for p in gemma4_assistant.Assistant(args).parameters())
    assert params == 77_731_328  # ~311 MB in float32, as the registry's comment says
    # A drafter for another width is not one for E2B.
    other = {**gemma4_assistant.E2B_CONFIG, "backbone_hidden_size": 2560}
    assert "hidden size 2560" in gemma4_assistant.AssistantArgs.from_hf_config(other).target_problem(e2b)
