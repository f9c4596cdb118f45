"""Parity of the Gemma 4 decoder with transformers' Gemma4ForCausalLM on tiny random configs.

Tolerance: float32 logits (soft-capped to |5| in the tiny configs) agree within 1e-3 absolute.
Observed differences are 1e-5 typical, 2.5e-4 worst: the implementations differ only in operation
order, and Gemma's attention scale of 1.0 makes the softmax sharp, which amplifies float32 rounding.
Greedy tokens must be identical.
"""

import pytest
import torch

from rne_tools.errors import CheckpointError
from rne_tools.models import gemma4

ATOL = 1e-3


def build_pair(name: str, max_context: int, max_chunk: int, seed: int = 0):
    """(reference HF model, our Transformer) with identical random weights."""
    config = gemma4.RANDOM_CONFIGS[name]
    ref = gemma4.reference_model(config, seed)
    args = gemma4.ModelArgs.from_hf_config(config)
    ours = gemma4.Transformer(args, max_context=max_context, max_chunk=max_chunk)
    state = {}
    for hf_name, tensor in ref.state_dict().items():
        local = gemma4.hf_to_local_name(hf_name)
        if local is not None:
            state[local] = tensor
    ours.load_state_dict(state, strict=True)
    return ref.eval(), ours.eval()


def run_chunks(model: gemma4.Transformer, tokens: torch.Tensor, sizes: list[int]):
    """Feed ``tokens`` in chunks of the given sizes; return {last position: logits}."""
    out, pos = {}, 0
    for size in sizes:
        chunk = tokens[:, pos : pos + size]
        out[pos + size - 1] = model(chunk, torch.tensor([pos]))
        pos += size
    assert pos == tokens.shape[1]
    return out


@pytest.mark.parametrize("name", sorted(gemma4.RANDOM_CONFIGS))
def test_chunked_logits_match_reference(name):
    config = gemma4.RANDOM_CONFIGS[name]
    window = config["sliding_window"]
    max_chunk = 4
    ring = window + max_chunk - 1
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(3, config["vocab_size"], (1, 5 * ring), generator=g)
    ref, ours = build_pair(name, max_context=64, max_chunk=max_chunk)

    with torch.no_grad():
        expected = ref(tokens).logits[0]  # [N, V], full sequence without cache
        # Mixed sizes so chunk boundaries land at every offset of the ring, decode steps included.
        sizes = [4, 3, 4, 1, 4, 2, 4, 1, 1, 4, 3]
        sizes.append(tokens.shape[1] - sum(sizes))
        while sizes[-1] > max_chunk:
            sizes.insert(-1, max_chunk)
            sizes[-1] -= max_chunk
        got = run_chunks(ours, tokens, sizes)

    # Some chunk must straddle the ring's wrap (write slots [.., ring-1, 0, ..]).
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    assert any(s % ring + n > ring for s, n in zip(starts, sizes, strict=True))
    assert tokens.shape[1] > 4 * window
    for pos, logits in got.items():
        torch.testing.assert_close(logits[0], expected[pos], atol=ATOL, rtol=0, msg=f"pos {pos}")


@pytest.mark.parametrize("name", sorted(gemma4.RANDOM_CONFIGS))
def test_greedy_tokens_match_reference(name):
    config = gemma4.RANDOM_CONFIGS[name]
    max_chunk = 5
    ref, ours = build_pair(name, max_context=96, max_chunk=max_chunk, seed=3)
    g = torch.Generator().manual_seed(2)
    prompt = torch.randint(
        3, config["vocab_size"], (1, 3 * config["sliding_window"] + 2), generator=g
    )
    n_new = 24

    with torch.no_grad():
        ref_out = ref.generate(
            prompt, max_new_tokens=n_new, do_sample=False, eos_token_id=None, pad_token_id=0
        )
        expected = ref_out[0, prompt.shape[1] :].tolist()

        pos, logits = 0, None
        while pos < prompt.shape[1]:
            chunk = prompt[:, pos : pos + max_chunk]
            logits = ours(chunk, torch.tensor([pos]))
            pos += chunk.shape[1]
        got = []
        for _ in range(n_new):
            token = int(logits.argmax(-1))
            got.append(token)
            logits = ours(torch.tensor([[token]]), torch.tensor([pos]))
            pos += 1
    assert len(set(expected)) > 3, "degenerate reference output; pick another seed"
    assert got == expected


def test_config_parsing_covers_every_feature():
    args = gemma4.ModelArgs.from_hf_config(gemma4.RANDOM_CONFIGS["tiny"])
    assert args.layer_types.count("sliding_attention") and args.layer_types.count("full_attention")
    assert args.head_dims == (16, 16, 32, 16, 16, 32, 16, 32)
    assert args.kv_source == (0, 1, 2, 3, 4, 2, 4, 2)
    assert args.ffn_dims == (96,) * 5 + (192,) * 3
    assert args.rope_dims == {"sliding_attention": 16, "full_attention": 8}
    assert args.ple_dim == 8 and args.final_softcap == 5.0 and args.tie_word_embeddings
    assert args.eos_ids == (1, 106) and args.bos_id == 2


def test_shared_layers_allocate_no_cache():
    args = gemma4.ModelArgs.from_hf_config(gemma4.RANDOM_CONFIGS["tiny"])
    model = gemma4.Transformer(args, max_context=64, max_chunk=4)
    assert sorted(model.caches.keys(), key=int) == ["0", "1", "2", "3", "4"]
    # Sliding caches are rings of window + max_chunk - 1 slots, full caches span the context.
    assert model.caches["0"].k.shape == (1, 2, 6 + 4 - 1, 16)
    assert model.caches["2"].k.shape == (1, 2, 64, 32)
    cache_buffers = [n for n, _ in model.named_buffers() if n.startswith("caches.")]
    assert len(cache_buffers) == 2 * 5
    for i in (5, 6, 7):
        assert not hasattr(model.layers[i].attention, "wk")


def test_multimodal_config_and_names():
    text = {k: v for k, v in gemma4.RANDOM_CONFIGS["tiny"].items() if k != "model_type"}
    args = gemma4.ModelArgs.from_hf_config({"model_type": "gemma4", "text_config": text})
    assert args == gemma4.ModelArgs.from_hf_config(gemma4.RANDOM_CONFIGS["tiny"])
    assert gemma4.hf_to_local_name("model.language_model.layers.3.self_attn.q_norm.weight") == (
        "layers.3.attention.q_norm.weight"
    )
    assert gemma4.hf_to_local_name("model.layers.0.layer_scalar") == "layers.0.layer_scalar"
    assert gemma4.hf_to_local_name("model.vision_tower.encoder.layers.0.mlp.weight") is None
    assert gemma4.hf_to_local_name("model.embed_audio.embedding_projection.weight") is None


def test_rejects_other_families():
    with pytest.raises(CheckpointError, match="gemma4_text"):
        gemma4.ModelArgs.from_hf_config({"model_type": "llama", "hidden_size": 64})
    moe = dict(gemma4.RANDOM_CONFIGS["tiny"], enable_moe_block=True, num_experts=4, top_k_experts=2)
    with pytest.raises(CheckpointError, match="mixture-of-experts"):
        gemma4.ModelArgs.from_hf_config(moe)


def test_chunk_above_context_is_refused():
    args = gemma4.ModelArgs.from_hf_config(gemma4.RANDOM_CONFIGS["tiny"])
    with pytest.raises(ValueError, match=r"max chunk \(16\) is above max context \(8\)"):
        gemma4.Transformer(args, max_context=8, max_chunk=16)
