"""Parity of rne_tools.models.llama with transformers' LlamaForCausalLM on random tiny configs."""

import pytest
import torch

from rne_tools.checkpoints import load_model
from rne_tools.models import llama

# fp32 on CPU: differences come from summation order only.
ATOL = 1e-4


@pytest.fixture(params=sorted(llama.RANDOM_CONFIGS))
def reference_checkpoint(request, tmp_path):
    torch.manual_seed(0)
    cfg = llama.RANDOM_CONFIGS[request.param]
    ref = llama.reference_model(cfg)
    ref.save_pretrained(tmp_path)
    return cfg, ref, tmp_path


def _chunked_logits(model, tokens, chunk):
    """Per-position logits via chunked prefill: each chunk's last logits + T=1 steps inside."""
    out = []
    for start in range(0, tokens.shape[1], chunk):
        piece = tokens[:, start : start + chunk]
        # Feed the chunk minus its last token one position at a time, then the rest as a chunk
        # so multi-token chunks (T > 1) and decode steps (T = 1) are both exercised.
        for i in range(piece.shape[1] - 1):
            out.append(model(piece[:, i : i + 1], torch.tensor([start + i]))[0])
        out.append(model(piece[:, -1:], torch.tensor([start + piece.shape[1] - 1]))[0])
    return torch.stack(out)


def test_logits_match_reference_per_position(reference_checkpoint):
    cfg, ref, path = reference_checkpoint
    model, args = load_model(path, "llama", max_context=96, max_chunk=16, progress=False)
    assert args.tie_word_embeddings == cfg["tie_word_embeddings"]
    tokens = torch.randint(
        0, cfg["vocab_size"], (1, 70), generator=torch.Generator().manual_seed(1)
    )
    with torch.no_grad():
        expected = ref(tokens).logits[0]
        ours = _chunked_logits(model, tokens, chunk=16)
    torch.testing.assert_close(ours, expected, atol=ATOL, rtol=0)


def test_chunked_prefill_then_greedy_matches_reference(reference_checkpoint):
    cfg, ref, path = reference_checkpoint
    model, _ = load_model(path, "llama", max_context=96, max_chunk=16, progress=False)
    prompt = torch.randint(
        0, cfg["vocab_size"], (1, 37), generator=torch.Generator().manual_seed(2)
    )
    with torch.no_grad():
        expected = ref.generate(
            prompt, max_new_tokens=20, do_sample=False, eos_token_id=None, pad_token_id=0
        )[0, prompt.shape[1] :]
        pos = 0
        for chunk in prompt.split(16, dim=1):  # chunks of 16, 16, 5
            logits = model(chunk, torch.tensor([pos]))
            pos += chunk.shape[1]
        last_prefill = ref(prompt).logits[0, -1]
        torch.testing.assert_close(logits[0], last_prefill, atol=ATOL, rtol=0)
        generated = []
        for _ in range(20):
            token = logits.argmax(-1)
            generated.append(int(token))
            logits = model(token.view(1, 1), torch.tensor([pos]))
            pos += 1
    assert generated == expected.tolist()


def test_bf16_checkpoint_loads_into_fp32_model(reference_checkpoint):
    cfg, ref, path = reference_checkpoint
    bf16_dir = path / "bf16"
    ref.to(torch.bfloat16).save_pretrained(bf16_dir)
    model, _ = load_model(bf16_dir, "llama", max_context=32, max_chunk=8, progress=False)
    ref.float()  # the reference now holds the same bf16-rounded weights, in fp32
    tokens = torch.arange(8).view(1, 8) % cfg["vocab_size"]
    with torch.no_grad():
        ours = model(tokens, torch.tensor([0]))
        expected = ref(tokens).logits[:, -1]
    torch.testing.assert_close(ours, expected, atol=ATOL, rtol=0)
