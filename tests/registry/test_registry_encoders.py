"""Media capabilities and encoder files in the model registry (tools/rne_tools/registry/):
`vision`/`audio` capabilities, each variant's `encoders`, their checks and the generated TS."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from registry_edits import edit, load_error
from rne_tools import registry
from rne_tools.registry import codegen

GOOD_SHA = "cd" * 32
VISION = "xnnpack/gemma4_e2b_vision_xnnpack_8w.pte"
AUDIO = "xnnpack/gemma4_e2b_audio_xnnpack_fp32.pte"


def gemma(doc: dict[str, Any]) -> dict[str, Any]:
    model: dict[str, Any] = doc["models"][0]
    return model


def variant(doc: dict[str, Any], v: int = 1) -> dict[str, Any]:
    """Gemma 4's variant ``v`` (1: xnnpack)."""
    spec: dict[str, Any] = gemma(doc)["variants"][v]
    return spec


def test_gemma4_declares_vision_and_audio_with_an_encoder_in_every_variant() -> None:
    spec = registry.load_registry().model("gemma4_e2b")
    assert {"vision", "audio"} <= set(spec.capabilities)
    for v in spec.variants.values():
        assert v.encoders["vision"] == registry.EncoderSpec("unpublished", registry.FileSpec(VISION))
        assert v.encoders["audio"] == registry.EncoderSpec("unpublished", registry.FileSpec(AUDIO))
    smol = registry.load_registry().model("smollm2_135m")
    assert not {"vision", "audio"} & set(smol.capabilities)
    assert all(not v.encoders for v in smol.variants.values())


def _drop_encoder(kind: str, v: int) -> Callable[[dict[str, Any]], None]:
    return lambda d: variant(d, v)["encoders"].pop(kind)


def _publish_encoder(**fields: Any) -> Callable[[dict[str, Any]], None]:
    return lambda d: variant(d)["encoders"]["vision"].update(fields)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            _drop_encoder("audio", 2),
            "gemma4.yaml: models[0].variants[2].encoders.audio: missing: the model declares the "
            "'audio' capability, so every variant needs its audio encoder",
        ),
        (
            lambda d: variant(d, 0).pop("encoders"),
            "gemma4.yaml: models[0].variants[0].encoders.vision: missing",
        ),
        (
            lambda d: gemma(d)["capabilities"].remove("audio"),
            "gemma4.yaml: models[0].variants[0].encoders.audio: the model does not declare the "
            "'audio' capability; add 'audio' to capabilities or remove this encoder",
        ),
        (
            _publish_encoder(status="published"),
            "gemma4.yaml: models[0].variants[1].encoders.vision.sha256: required when status is "
            "'published'",
        ),
        (
            _publish_encoder(sha256=GOOD_SHA, size=10),
            "gemma4.yaml: models[0].variants[1].encoders.vision.sha256: must be absent while "
            "status is 'unpublished'",
        ),
        (
            _publish_encoder(path="xnnpack/vision.bin"),
            "gemma4.yaml: models[0].variants[1].encoders.vision.path: 'xnnpack/vision.bin' is not "
            "a .pte program",
        ),
        (
            lambda d: variant(d)["encoders"].update(video={"status": "unpublished", "path": "v.pte"}),
            "gemma4.yaml: models[0].variants[1].encoders: Additional properties are not allowed "
            "('video' was unexpected)",
        ),
        (
            lambda d: variant(d).update(encoders={}),
            "gemma4.yaml: models[0].variants[1].encoders: {} should be non-empty",
        ),
        (
            lambda d: gemma(d)["capabilities"].append("video"),
            "gemma4.yaml: models[0].capabilities[4]: 'video' is not one of",
        ),
        (
            # An encoder at the path of the model's own program: one file for two roles.
            _publish_encoder(path="xnnpack/gemma4_e2b_xnnpack_8da4w.pte"),
            "gemma4.yaml: models[0].variants[1].encoders.vision.path: "
            "'xnnpack/gemma4_e2b_xnnpack_8da4w.pte' is already used by "
            "models[0].variants[1].files[0].path",
        ),
        (
            # Two variants share an encoder file only when they declare it identically.
            lambda d: variant(d, 2)["encoders"]["vision"].update(status="published", sha256=GOOD_SHA, size=5),
            "gemma4.yaml: models[0].variants[2].encoders.vision.path: "
            f"'{VISION}' is already used by models[0].variants[0].encoders.vision.path",
        ),
    ],
)
def test_encoder_problems_name_file_and_field(
    registry_copy: Path, change: Callable[[dict[str, Any]], None], expected: str
) -> None:
    edit(registry_copy, change)
    assert expected in load_error(registry_copy)


def test_a_text_model_may_not_list_an_encoder(registry_copy: Path) -> None:
    def add(doc: dict[str, Any]) -> None:
        doc["models"][0]["variants"][0]["encoders"] = {
            "vision": {"status": "unpublished", "path": "xnnpack/vision.pte"}
        }

    edit(registry_copy, add, "smollm2.yaml")
    assert (
        "smollm2.yaml: models[0].variants[0].encoders.vision: the model does not declare the "
        "'vision' capability" in load_error(registry_copy)
    )


def test_a_published_encoder_is_generated_with_its_checksum(registry_copy: Path) -> None:
    def publish(doc: dict[str, Any]) -> None:
        for v in gemma(doc)["variants"]:
            v["encoders"]["vision"].update(status="published", sha256=GOOD_SHA, size=1234)

    edit(registry_copy, publish)
    reg = registry.load_registry(registry_copy)
    assert reg.model("gemma4_e2b").variants["mlx"].encoders["vision"].published
    ts = codegen.generate_typescript(reg)
    # The three variants list the same encoders: declared once, named by each variant.
    assert (
        "const gemma4_e2b_encoders = {\n"
        "  vision: {\n"
        "    status: 'published',\n"
        f"    path: '{VISION}',\n"
        f"    sha256: '{GOOD_SHA}',\n"
        "    size: 1234,\n"
        "  },\n"
        "  audio: {\n"
        "    status: 'unpublished',\n"
        f"    path: '{AUDIO}',\n"
        "  },\n"
        "} as const;\n"
    ) in ts
    assert ts.count("        encoders: gemma4_e2b_encoders,\n") == 3
    assert "export type Capability = 'text-generation' | 'chat' | 'vision' | 'audio';" in ts




def other_vision(doc: dict[str, Any], v: int, path: str) -> None:
    """Variant ``v`` lists its own vision encoder at ``path``."""
    variant(doc, v)["encoders"]["vision"] = {"status": "unpublished", "path": path}


def test_a_variant_with_other_encoders_keeps_them_inline(registry_copy: Path) -> None:
    edit(registry_copy, lambda doc: other_vision(doc, 2, "xnnpack/gemma4_e2b_vision_xnnpack_fp32.pte"))
    ts = codegen.generate_typescript(registry.load_registry(registry_copy))
    # mlx and xnnpack still share theirs; vulkan's differ, so they stand in its descriptor.
    assert ts.count("        encoders: gemma4_e2b_encoders,\n") == 2
    assert (
        "        encoders: {\n"
        "          vision: {\n"
        "            status: 'unpublished',\n"
        "            path: 'xnnpack/gemma4_e2b_vision_xnnpack_fp32.pte',\n"
    ) in ts


def test_encoders_no_two_variants_share_are_not_declared_apart(registry_copy: Path) -> None:
    def all_different(doc: dict[str, Any]) -> None:
        other_vision(doc, 0, "xnnpack/gemma4_e2b_vision_xnnpack_fp32.pte")
        other_vision(doc, 2, "xnnpack/gemma4_e2b_vision_xnnpack_8da8w.pte")

    edit(registry_copy, all_different)
    ts = codegen.generate_typescript(registry.load_registry(registry_copy))
    assert "gemma4_e2b_encoders" not in ts
    assert ts.count("        encoders: {\n") == 3
