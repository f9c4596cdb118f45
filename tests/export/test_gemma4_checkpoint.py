"""Loading Gemma 4 checkpoints from disk: multimodal names, shards, bf16, shared-layer leftovers."""

import json

import pytest
import torch
from safetensors.torch import save_file

from rne_tools.checkpoints import load_model
from rne_tools.errors import CheckpointError
from rne_tools.models import gemma4


def write_multimodal_checkpoint(directory, ref, config, dtype):
    """Write ``ref`` the way google/gemma-4-E2B ships: Gemma4ForConditionalGeneration names,
    two shards, a vision tensor, and k/v projections for the KV-shared layers."""
    state = {
        k.replace("model.", "model.language_model.", 1): v.to(dtype).contiguous()
        for k, v in ref.state_dict().items()
        if k != "lm_head.weight"  # tied
    }
    args = gemma4.ModelArgs.from_hf_config(config)
    for i in range(args.first_shared_layer, args.n_layers):
        width = args.n_kv_heads[i] * args.head_dims[i]
        prefix = f"model.language_model.layers.{i}.self_attn"
        state[f"{prefix}.k_proj.weight"] = torch.zeros(width, args.dim, dtype=dtype)
        state[f"{prefix}.v_proj.weight"] = torch.zeros(width, args.dim, dtype=dtype)
        state[f"{prefix}.k_norm.weight"] = torch.ones(args.head_dims[i], dtype=dtype)
    state["model.vision_tower.patch_embedder.input_proj.weight"] = torch.zeros(4, 4, dtype=dtype)
    names = sorted(state)
    shards = {
        "model-00001-of-00002.safetensors": names[::2],
        "model-00002-of-00002.safetensors": names[1::2],
    }
    weight_map = {}
    for file, keys in shards.items():
        save_file({k: state[k] for k in keys}, str(directory / file))
        weight_map.update(dict.fromkeys(keys, file))
    (directory / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    text = {k: v for k, v in config.items() if k != "model_type"}
    (directory / "config.json").write_text(
        json.dumps({"model_type": "gemma4", "text_config": text, "vision_config": {}})
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_load_sharded_multimodal_checkpoint(tmp_path, dtype):
    config = gemma4.RANDOM_CONFIGS["tiny"]
    ref = gemma4.reference_model(config, seed=5)
    write_multimodal_checkpoint(tmp_path, ref, config, dtype)

    model, args = load_model(
        tmp_path, "gemma4", max_context=32, max_chunk=8, dtype=dtype, progress=False
    )
    tokens = torch.randint(
        3, config["vocab_size"], (1, 8), generator=torch.Generator().manual_seed(0)
    )
    with torch.no_grad():
        got = model(tokens, torch.tensor([0]))
        expected = ref.to(dtype)(tokens).logits[:, -1].float()
    # bf16 weights and activations: compare loosely there, tightly in fp32.
    atol = 1e-3 if dtype == torch.float32 else 0.25
    torch.testing.assert_close(got, expected, atol=atol, rtol=0)
    assert int(got.argmax()) == int(expected.argmax())
    assert model.tok_embeddings.weight.dtype == dtype


def test_bf16_checkpoint_keeps_its_per_layer_table_in_bf16(tmp_path):
    config = {**gemma4.RANDOM_CONFIGS["tiny"], "dtype": "bfloat16"}
    # The values a bf16 checkpoint holds (every saved tensor, layer_scalar too), computed in
    # float32 by the reference; its unsaved buffers (embedding scales) stay exact.
    ref = gemma4.reference_model(config, seed=5)
    ref.load_state_dict({k: v.bfloat16().float() for k, v in ref.state_dict().items()})
    write_multimodal_checkpoint(tmp_path, ref, config, torch.bfloat16)

    model, args = load_model(tmp_path, "gemma4", 32, 8, dtype=torch.float32, progress=False)
    assert args.ple_dtype == torch.bfloat16
    assert model.ple_embeddings.weight.dtype == torch.bfloat16
    assert model.tok_embeddings.weight.dtype == torch.float32
    tokens = torch.randint(3, config["vocab_size"], (1, 8), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        got = model(tokens, torch.tensor([0]))
        expected = ref(tokens).logits[:, -1].float()
    torch.testing.assert_close(got, expected, atol=1e-3, rtol=0)

    # Cast to a 16-bit dtype (MLX), the table follows; back to float32, it stays 16-bit.
    model.to_dtype(torch.float16)
    assert model.ple_embeddings.weight.dtype == torch.float16
    model.to_dtype(torch.float32)
    assert model.ple_embeddings.weight.dtype == torch.float16
    assert model.norm.weight.dtype == torch.float32


def test_missing_tensor_is_named(tmp_path):
    config = gemma4.RANDOM_CONFIGS["tiny"]
    ref = gemma4.reference_model(config)
    state = {k: v for k, v in ref.state_dict().items() if "layers.3.mlp.up_proj" not in k}
    state.pop("lm_head.weight")
    save_file({k: v.contiguous() for k, v in state.items()}, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=r"layers\.3\.feed_forward\.w3\.weight"):
        load_model(tmp_path, "gemma4", max_context=32, max_chunk=8, progress=False)


def test_llama_checkpoint_is_refused(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 8}))
    with pytest.raises(CheckpointError, match="model_type 'llama'"):
        load_model(tmp_path, "gemma4", max_context=32, max_chunk=8, progress=False)
