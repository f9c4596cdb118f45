"""Recording a publish in the registry YAML (tools/rne_tools/publish/registry_update.py)."""

from __future__ import annotations

import difflib
import shutil
from pathlib import Path

import pytest
import yaml

from rne_tools import registry
from rne_tools.errors import RegistryError
from rne_tools.paths import REGISTRY_DIR
from rne_tools.publish.model_card import CardVariant, render_model_card
from rne_tools.publish.registry_update import PublishedFile, update_registry
from rne_tools.registry import codegen

SHA_A, SHA_B, SHA_C, SHA_D, SHA_E = "a" * 64, "b" * 64, "c" * 64, "d" * 64, "e" * 64
VISION = "xnnpack/gemma4_e2b_vision_xnnpack_8w.pte"
AUDIO = "xnnpack/gemma4_e2b_audio_xnnpack_fp32.pte"
# Gemma 4's encoders: every variant lists the same two XNNPACK programs.
ENCODERS = [PublishedFile(VISION, SHA_D, 500_000_000), PublishedFile(AUDIO, SHA_E, 300_000_000)]
ASSISTANT = PublishedFile("xnnpack/gemma4_e2b_xnnpack_8da4w_assistant.pte", "f" * 64, 2_800_000_000)


@pytest.fixture
def reg_dir(tmp_path: Path) -> Path:
    target = tmp_path / "model-registry"
    shutil.copytree(REGISTRY_DIR, target)
    return target


def tokenizer_files(with_template_file: bool = True) -> list[PublishedFile]:
    """The tokenizer files Gemma 4 declares (SmolLM2's template is in tokenizer_config.json)."""
    return [
        PublishedFile("tokenizer.json", SHA_A, 2_000_000),
        PublishedFile("tokenizer_config.json", SHA_B, 4_000),
        *([PublishedFile("chat_template.jinja", SHA_C, 16_000)] if with_template_file else []),
    ]


def changed_lines(before: str, after: str) -> list[str]:
    return [
        line
        for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]


def test_update_touches_only_the_published_fields(reg_dir: Path, tmp_path: Path) -> None:
    before = (reg_dir / "gemma4.yaml").read_text()
    smol_before = (reg_dir / "smollm2.yaml").read_text()
    ts = tmp_path / "registry.generated.ts"
    pte = PublishedFile("xnnpack/gemma4_e2b_xnnpack_8da4w.pte", SHA_C, 2_500_000_000)

    assert update_registry(
        "gemma4_e2b",
        "v0.2.0",
        tokenizer=tokenizer_files(),
        variants={"xnnpack": [pte]},
        registry_dir=reg_dir,
        ts_output=ts,
        encoders=ENCODERS,
        assistants={"xnnpack": ASSISTANT},
    )

    after = (reg_dir / "gemma4.yaml").read_text()
    encoder_lines = [
        f"-          vision: {{status: unpublished, path: {VISION}}}",
        f"-          audio: {{status: unpublished, path: {AUDIO}}}",
        f"+          vision: {{status: published, path: {VISION}, sha256: {SHA_D}, size: 500000000}}",
        f"+          audio: {{status: published, path: {AUDIO}, sha256: {SHA_E}, size: 300000000}}",
    ]
    # The encoders are one file per path: the variants that share them (all three) record them.
    assert changed_lines(before, after) == [
        "-      revision: v0.1.0",
        "+      revision: v0.2.0",
        "-      status: unpublished",
        "+      status: published",
        f"+          sha256: {SHA_A}",
        "+          size: 2000000",
        f"+          sha256: {SHA_B}",
        "+          size: 4000",
        f"+          sha256: {SHA_C}",
        "+          size: 16000",
        *encoder_lines,  # mlx
        "-        status: unpublished",
        "+        status: published",
        f"+            sha256: {SHA_C}",
        "+            size: 2500000000",
        # Its assistant drafter's program (published with the variant).
        "-          status: unpublished",
        "+          status: published",
        f"+          sha256: {ASSISTANT.sha256}",
        "+          size: 2800000000",
        *encoder_lines,  # xnnpack
        *encoder_lines,  # vulkan
    ]
    assert (reg_dir / "smollm2.yaml").read_text() == smol_before
    # Comments, flow mappings and quoting survive the round trip.
    assert "# KV capacity of the exported variants" in after
    assert 'min_platform: {ios: "17.0", android: 26}' in after

    spec = registry.load_registry(reg_dir).model("gemma4_e2b")
    assert spec.revision == "v0.2.0"
    assert spec.variants["xnnpack"].published
    assert spec.variants["xnnpack"].pte.sha256 == SHA_C
    assert not spec.variants["mlx"].published
    for variant in spec.variants.values():
        assert variant.encoders["vision"].published
        assert (variant.encoders["audio"].file.sha256, variant.encoders["audio"].file.size) == (
            SHA_E,
            300_000_000,
        )
    assert spec.tokenizer.published
    assert ts.read_text() == codegen.generate_typescript(registry.load_registry(reg_dir))
    assert f"sha256: '{SHA_C}'" in ts.read_text()

    # Recording the same publish again changes nothing.
    assert not update_registry(
        "gemma4_e2b",
        "v0.2.0",
        tokenizer=tokenizer_files(),
        variants={"xnnpack": [pte]},
        registry_dir=reg_dir,
        ts_output=ts,
        encoders=ENCODERS,
        assistants={"xnnpack": ASSISTANT},
    )
    assert (reg_dir / "gemma4.yaml").read_text() == after
    assistant = registry.load_registry(reg_dir).model("gemma4_e2b").variant("xnnpack").assistant
    assert assistant is not None and assistant.published
    assert (assistant.file.sha256, assistant.file.size) == (ASSISTANT.sha256, ASSISTANT.size)

    # A variant that declares an assistant is never recorded without it.
    with pytest.raises(RegistryError, match=r"xnnpack\.assistant: was not published with its variant"):
        update_registry(
            "gemma4_e2b", "v0.3.0", tokenizer=tokenizer_files(), variants={"xnnpack": [pte]},
            registry_dir=reg_dir, ts_output=ts, encoders=ENCODERS,
        )  # fmt: skip
    assert (reg_dir / "gemma4.yaml").read_text() == after


def test_files_that_do_not_match_the_registry_are_rejected_untouched(
    reg_dir: Path, tmp_path: Path
) -> None:
    before = (reg_dir / "gemma4.yaml").read_text()
    ts = tmp_path / "registry.generated.ts"
    with pytest.raises(RegistryError, match="declares files"):
        update_registry(
            "gemma4_e2b",
            "v0.2.0",
            tokenizer=tokenizer_files(),
            variants={"xnnpack": [PublishedFile("xnnpack/other.pte", SHA_C, 10)]},
            registry_dir=reg_dir,
            ts_output=ts,
        )
    assert (reg_dir / "gemma4.yaml").read_text() == before
    assert not ts.exists()
    assert not list(reg_dir.glob(".*.tmp"))


@pytest.mark.parametrize(
    ("encoders", "message"),
    [
        (
            ENCODERS[:1],
            r"variants\.xnnpack\.encoders\.audio: .* was not published with its variant",
        ),
        (
            [*ENCODERS, PublishedFile("xnnpack/other_vision.pte", SHA_D, 10)],
            r"no variant declares the encoders \['xnnpack/other_vision\.pte'\]",
        ),
    ],
    ids=["an encoder left out", "an encoder no variant lists"],
)
def test_encoders_that_do_not_match_the_registry_are_rejected_untouched(
    reg_dir: Path, tmp_path: Path, encoders: list[PublishedFile], message: str
) -> None:
    before = (reg_dir / "gemma4.yaml").read_text()
    ts = tmp_path / "registry.generated.ts"
    with pytest.raises(RegistryError, match=message):
        update_registry(
            "gemma4_e2b",
            "v0.2.0",
            tokenizer=tokenizer_files(),
            variants={"xnnpack": [PublishedFile("xnnpack/gemma4_e2b_xnnpack_8da4w.pte", SHA_C, 9)]},
            registry_dir=reg_dir,
            ts_output=ts,
            encoders=encoders,
        )
    assert (reg_dir / "gemma4.yaml").read_text() == before
    assert not ts.exists()


def test_an_update_that_would_not_validate_is_not_written(reg_dir: Path, tmp_path: Path) -> None:
    before = (reg_dir / "smollm2.yaml").read_text()
    with pytest.raises(RegistryError, match=r"revision: 'v 1' does not match"):
        update_registry(
            "smollm2_135m",
            "v 1",  # not a valid revision per the schema
            tokenizer=tokenizer_files(with_template_file=False),
            variants={},
            registry_dir=reg_dir,
            ts_output=tmp_path / "x.ts",
        )
    assert (reg_dir / "smollm2.yaml").read_text() == before


def test_model_card_has_table_checksums_usage_and_valid_front_matter() -> None:
    spec = registry.load_registry().model("gemma4_e2b")
    card = render_model_card(
        spec,
        [
            CardVariant(
                "xnnpack",
                "8da4w",
                "xnnpack/gemma4_e2b_xnnpack_8da4w.pte",
                2_512_000_000,
                SHA_C,
                4096,
                128,
                {"ios": "17.0", "android": 26},
                "passed (max_abs_logit_diff=0.0123)",
            )
        ],
    )
    front = card.split("---\n")[1]
    meta = yaml.safe_load(front)
    assert meta["license"] == "gemma"
    assert meta["base_model"] == "google/gemma-4-E2B-it"
    assert "xnnpack" in meta["tags"]
    assert (
        "| xnnpack | 8da4w | `xnnpack/gemma4_e2b_xnnpack_8da4w.pte` | 2.5 GB | 4096 | 128 "
        "| iOS 17.0, Android API 26 | passed (max_abs_logit_diff=0.0123) |"
    ) in card
    assert f"| `xnnpack/gemma4_e2b_xnnpack_8da4w.pte` | 2512000000 | `{SHA_C}` |" in card
    assert "const llm = useLLM({ model: models.llm.gemma4_e2b });" in card
    assert "import { useLLM, models } from 'react-native-executorch';" in card
    assert "Default backend per platform: Android: `vulkan`, iOS: `mlx`." in card
