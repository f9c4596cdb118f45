"""Bad input fails early with a clear message and leaves no partial files."""

import json
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file, save_file

from rne_tools.checkpoints import load_model
from rne_tools.errors import CheckpointError, ExportError, RegistryError, VerificationError
from rne_tools.export import export_llm
from rne_tools.export import pipeline as pipeline_module
from rne_tools.models import get_architecture, llama
from rne_tools.paths import REPO_ROOT


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny_ckpt")
    torch.manual_seed(0)
    llama.reference_model(llama.RANDOM_CONFIGS["tiny_untied"]).save_pretrained(path)
    return path


def _copy(src, dst):
    dst.mkdir()
    for f in src.iterdir():
        (dst / f.name).write_bytes(f.read_bytes())
    return dst


def _export(out, **kw):
    args = dict(quantization="fp32", max_context=64, max_chunk=16, progress=False)
    args.update(kw)
    return export_llm("smollm2_135m", "xnnpack", out, **args)


def test_unknown_model_id(tmp_path):
    with pytest.raises(RegistryError, match="unknown model id 'nope'.*smollm2_135m"):
        export_llm("nope", "xnnpack", tmp_path, random_config="tiny")


def test_unknown_backend_and_architecture(tmp_path):
    with pytest.raises(ExportError, match="Unknown backend 'coreml'.*xnnpack"):
        export_llm(
            "smollm2_135m",
            "coreml",
            tmp_path,
            "fp32",
            random_config="tiny",
            max_context=64,
            max_chunk=16,
        )
    with pytest.raises(CheckpointError, match="Unknown architecture 'mamba'"):
        get_architecture("mamba")


def test_quantization_the_backend_cannot_take(tmp_path):
    with pytest.raises(ExportError, match="cannot take quantization 'int4'; allowed: fp32, 8w, 8da4w, 8da8w"):
        _export(tmp_path, quantization="int4", random_config="tiny")
    with pytest.raises(ExportError, match="embedding quantization '2w'"):
        _export(tmp_path, quantization="8da4w", embedding_quantization="2w", random_config="tiny")


def test_max_chunk_above_max_context(tmp_path):
    with pytest.raises(ExportError, match="max chunk \\(128\\) is above max context \\(64\\)"):
        _export(tmp_path, max_chunk=128, random_config="tiny")


def test_unknown_random_config(tmp_path):
    with pytest.raises(ExportError, match="Unknown random config 'huge'.*tiny"):
        _export(tmp_path, random_config="huge")


def test_config_of_another_family(tmp_path, tiny_checkpoint):
    ckpt = _copy(tiny_checkpoint, tmp_path / "ckpt")
    cfg = json.loads((ckpt / "config.json").read_text())
    cfg["model_type"], cfg["architectures"] = "gemma4_text", ["Gemma4ForCausalLM"]
    (ckpt / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match="model_type='gemma4_text', not a Llama"):
        _export(tmp_path / "out", checkpoint=ckpt)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_missing_tensor_and_shape_mismatch(tmp_path, tiny_checkpoint):
    weights = load_file(tiny_checkpoint / "model.safetensors")
    missing = _copy(tiny_checkpoint, tmp_path / "missing")
    del weights["model.layers.1.mlp.up_proj.weight"]
    save_file(weights, missing / "model.safetensors")
    with pytest.raises(CheckpointError, match="lacks tensor\\(s\\) layers.1.mlp.up_proj.weight"):
        load_model(missing, "llama", 64, 16, progress=False)

    weights = load_file(tiny_checkpoint / "model.safetensors")
    bad = _copy(tiny_checkpoint, tmp_path / "bad_shape")
    weights["model.norm.weight"] = torch.ones(7)
    save_file(weights, bad / "model.safetensors")
    with pytest.raises(CheckpointError, match="model.norm.weight .* shape \\(7,\\).*\\(64,\\)"):
        load_model(bad, "llama", 64, 16, progress=False)

    weights = load_file(tiny_checkpoint / "model.safetensors")
    extra = _copy(tiny_checkpoint, tmp_path / "extra")
    weights["model.layers.0.self_attn.q_proj.bias"] = torch.zeros(128)
    save_file(weights, extra / "model.safetensors")
    with pytest.raises(
        CheckpointError, match="does not know: model.layers.0.self_attn.q_proj.bias"
    ):
        load_model(extra, "llama", 64, 16, progress=False)


def test_sharded_checkpoint_loads_and_missing_shard_is_named(tmp_path, tiny_checkpoint):
    weights = load_file(tiny_checkpoint / "model.safetensors")
    sharded = _copy(tiny_checkpoint, tmp_path / "sharded")
    (sharded / "model.safetensors").unlink()
    names = sorted(weights)
    halves = {
        "model-00001-of-00002.safetensors": names[::2],
        "model-00002-of-00002.safetensors": names[1::2],
    }
    weight_map = {}
    for shard, keys in halves.items():
        save_file({k: weights[k] for k in keys}, sharded / shard)
        weight_map.update({k: shard for k in keys})
    (sharded / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    model, _ = load_model(sharded, "llama", 64, 16, progress=False)
    reference, _ = load_model(tiny_checkpoint, "llama", 64, 16, progress=False)
    tokens = torch.arange(10).view(1, 10)
    with torch.no_grad():
        torch.testing.assert_close(
            model(tokens, torch.tensor([0])), reference(tokens, torch.tensor([0])), atol=0, rtol=0
        )

    (sharded / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(CheckpointError, match="model-00002-of-00002.safetensors"):
        _export(tmp_path / "out", checkpoint=sharded)


def test_failed_verification_leaves_nothing(tmp_path, monkeypatch):
    def mismatch(*args, **kwargs):
        return {"passed": False, "status": "mismatch", "error": "greedy tokens diverge at step 0"}

    monkeypatch.setattr(pipeline_module, "verify_program", mismatch)
    out = tmp_path / "out"
    with pytest.raises(VerificationError, match="diverge at step 0"):
        _export(out, random_config="tiny")
    assert list(out.iterdir()) == []


def test_verification_detects_a_different_model(tiny_llama_fp32):
    from rne_tools.checkpoints import random_model
    from rne_tools.checks.verify import verify_program
    from rne_tools.export import plan_export

    other, _, _ = random_model("llama", "tiny", 64, 16, seed=1)
    plan = plan_export("smollm2_135m", "xnnpack", "fp32", random_config="tiny", max_context=64,
                       max_chunk=16)
    result = verify_program(tiny_llama_fp32.pte_path, other, plan)
    assert result["status"] == "mismatch" and result["passed"] is False
    assert result["max_abs_logit_diff"] > 1e-2


def test_cli_reports_errors_without_traceback(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "tools/export_model.py",
            "--model",
            "smollm2_135m",
            "--quantization",
            "fp32",
            "--random-config",
            "tiny",
            "--max-context",
            "8",
            "--max-chunk",
            "16",
            "--output-dir",
            str(tmp_path),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1
    assert "error: max chunk (16) is above max context (8)" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_embedding_quantization_comes_from_the_registry_variant():
    """A variant's tables are declared in its registry entry: MLX loads only 4-bit ones and
    E2B's Vulkan and XNNPACK files are sized for them, so an export with the registry's defaults
    must get 4w, and an explicit value wins."""
    from rne_tools.export import plan_export
    from rne_tools.registry import load_registry

    variants = load_registry().model("gemma4_e2b").variants
    for backend in ("vulkan", "mlx", "xnnpack"):
        plan = plan_export("gemma4_e2b", backend, random_config="tiny")
        assert plan.options.embedding_quantization == variants[backend].embedding_quantization
    assert {variants[b].embedding_quantization for b in ("vulkan", "mlx", "xnnpack")} == {"4w"}
    explicit = plan_export("gemma4_e2b", "xnnpack", random_config="tiny",
                           embedding_quantization="none")
    assert explicit.options.embedding_quantization == "none"
    # A model whose variant declares none keeps the exporter's default.
    smollm2 = plan_export("smollm2_135m", "xnnpack", "8da4w", random_config="tiny")
    assert load_registry().model("smollm2_135m").variants["xnnpack"].embedding_quantization is None
    assert smollm2.options.embedding_quantization == "8w"


def test_group_sizes_come_from_the_registry_variant():
    """E2B's XNNPACK variant groups its looked-up tables by 128 and its linears by 32, the
    Vulkan one both by 128 and the MLX one both by 64 (the file budget); an explicit value wins,
    and a variant that says none groups its linears by 32 and its tables like its linears."""
    from rne_tools.export import plan_export

    for backend, groups in (("xnnpack", (32, 128)), ("vulkan", (128, 128)), ("mlx", (64, 64))):
        options = plan_export("gemma4_e2b", backend, random_config="tiny").options
        assert (options.group_size, options.table_group_size) == groups
    smollm2 = plan_export("smollm2_135m", "xnnpack", "8da4w", random_config="tiny").options
    assert (smollm2.group_size, smollm2.table_group_size) == (32, 32)
    explicit = plan_export("gemma4_e2b", "xnnpack", random_config="tiny", embedding_group_size=64)
    assert explicit.options.table_group_size == 64
    explicit = plan_export("gemma4_e2b", "vulkan", random_config="tiny", group_size=32)
    assert (explicit.options.group_size, explicit.options.table_group_size) == (32, 32)
