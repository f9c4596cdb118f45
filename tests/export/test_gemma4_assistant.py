"""Gemma 4's assistant drafter (rne_tools.models.gemma4_assistant) against transformers'
``Gemma4AssistantForCausalLM``: for the same target state (our tiny Gemma 4 and transformers'
with identical weights, the same prompt), the assistant's logits and drafted tokens agree, for
several draft steps of a round and prompts longer than the sliding window. The assistant is a
tiny random checkpoint written with ``save_pretrained`` and loaded back by our loader.

transformers 5.23 cannot build an assistant: ``Gemma4TextConfig.kv_sharing_modes`` refuses a
config whose every layer is KV-shared, which is what an assistant is. ``hf_assistant_configs``
patches that property to say "reuse" for every layer, the meaning the assistant's own code
(``Gemma4TextAttention`` reading ``shared_kv_states``) relies on.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from rne_tools.errors import CheckpointError
from rne_tools.models import gemma4, gemma4_assistant

ATOL = 1e-3  # float32, as tests/parity/test_gemma4_parity.py (observed: ~1e-5)


@contextlib.contextmanager
def hf_assistant_configs() -> Iterator[None]:
    from transformers import Gemma4TextConfig

    original = Gemma4TextConfig.kv_sharing_modes

    def modes(self):  # every layer of an assistant reads the target's states
        if self.num_kv_shared_layers == self.num_hidden_layers:
            return ["reuse"] * self.num_hidden_layers
        return original.fget(self)

    Gemma4TextConfig.kv_sharing_modes = property(modes)
    try:
        yield
    finally:
        Gemma4TextConfig.kv_sharing_modes = original


def hf_assistant(config: dict, seed: int):
    """transformers' assistant for ``config`` with seeded random weights (norms around 1, a
    random token ordering), as the reference of our loader."""
    from transformers import Gemma4AssistantConfig, Gemma4AssistantForCausalLM

    fields = {k: v for k, v in config.items() if k != "model_type"}
    with hf_assistant_configs():
        cfg = Gemma4AssistantConfig(**fields)
        cfg.text_config._attn_implementation = "eager"
        model = Gemma4AssistantForCausalLM(cfg).eval()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 1:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(p.shape[-1]))
        for layer in model.model.layers:
            layer.layer_scalar.copy_(0.5 + torch.rand(1, generator=g))
        ordering = model.masked_embedding.token_ordering
        ordering.copy_(torch.randperm(ordering.numel(), generator=g))
    model.generation_config.num_assistant_tokens = 4
    return model


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """(HF target, HF assistant, our target, our assistant loaded from a saved checkpoint)."""
    target_cfg = gemma4.RANDOM_CONFIGS["tiny"]
    ref = gemma4.reference_model(target_cfg, seed=0)
    args = gemma4.ModelArgs.from_hf_config(target_cfg)
    ours = gemma4.Transformer(args, max_context=64, max_chunk=8)
    state = {gemma4.hf_to_local_name(k): v for k, v in ref.state_dict().items()}
    ours.load_state_dict({k: v for k, v in state.items() if k is not None}, strict=True)
    hf = hf_assistant(gemma4_assistant.tiny_config(target_cfg), seed=1)
    directory = tmp_path_factory.mktemp("assistant")
    with hf_assistant_configs():
        hf.save_pretrained(directory)
    assistant, _ = gemma4_assistant.load_assistant(directory)
    return ref, hf, ours.eval(), assistant


def hf_drafts(ref, hf, prompt: torch.Tensor, steps: int):
    """transformers' first round of drafts after the prompt: per step, (logits, token)."""
    out = ref(prompt, output_hidden_states=True, return_shared_kv_states=True)
    token = out.logits[:, -1:].argmax(-1)
    hidden = out.hidden_states[-1][:, -1:]
    position = torch.tensor([[prompt.shape[1]]])
    drafts = []
    for _ in range(steps):
        embedding = ref.get_input_embeddings()(token)
        step = hf(inputs_embeds=torch.cat([embedding, hidden], dim=-1), position_ids=position,
                  shared_kv_states=out.shared_kv_states, attention_mask=None)
        token = step.logits.argmax(-1)
        hidden = step.last_hidden_state
        drafts.append((step.logits[0, 0], int(token)))
    return drafts


def our_drafts(target, assistant, prompt: torch.Tensor, steps: int):
    """The same round from our target's caches and our assistant (forward and propose)."""
    from rne_tools.models.layers import reset_caches

    reset_caches(target)
    n = prompt.shape[1]
    with gemma4_assistant.returning_hidden(target):
        for start in range(0, n, target.max_chunk):  # prefill in chunks, as the runner does
            logits, hidden = target(prompt[:, start : start + target.max_chunk],
                                    torch.tensor([start]))
    hidden = hidden.reshape(1, 1, -1)
    token = logits.argmax(-1).reshape(1, 1)
    drafts = []
    for _ in range(steps):
        embedding = target.tok_embeddings(token) * target.embed_scale
        step_logits, next_hidden = assistant(embedding, hidden, torch.tensor([n]), target)
        chosen, same_hidden = assistant.propose(embedding, hidden, torch.tensor([n]), target)
        torch.testing.assert_close(same_hidden, next_hidden)
        assert int(chosen) == int(step_logits.argmax())
        drafts.append((step_logits, int(chosen)))
        token, hidden = chosen.reshape(1, 1), next_hidden
    return drafts


@pytest.mark.parametrize("length", [3, 6, 20])  # shorter than, equal to, past the window (6)
def test_drafts_match_transformers(pair, length):
    ref, hf, ours, assistant = pair
    prompt = torch.randint(3, 256, (1, length), generator=torch.Generator().manual_seed(length))
    with torch.no_grad():
        expected = hf_drafts(ref, hf, prompt, steps=4)
        got = our_drafts(ours, assistant, prompt, steps=4)
    for (want_logits, want_token), (logits, token) in zip(expected, got, strict=True):
        torch.testing.assert_close(logits, want_logits, atol=ATOL, rtol=0)
        assert token == want_token


def test_checkpoint_for_another_target_is_refused(pair):
    _, _, ours, assistant = pair
    assert assistant.args.target_problem(ours.args) is None
    other = gemma4.ModelArgs.from_hf_config(gemma4.RANDOM_CONFIGS["tiny_mqa"])
    problem = assistant.args.target_problem(other)
    assert problem is not None and "kv heads" in problem


def test_non_assistant_checkpoint_is_refused(tmp_path: Path):
    (tmp_path / "config.json").write_text('{"model_type": "gemma4_text"}')
    with pytest.raises(CheckpointError, match="gemma4_assistant"):
        gemma4_assistant.load_assistant(tmp_path)


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory) -> Path:
    return gemma4_assistant.write_random_checkpoint(tmp_path_factory.mktemp("tiny_assistant"))


def plan(checkpoint: Path, **overrides):
    from rne_tools.export import plan_export

    request = {"random_config": "tiny", "max_context": 64, "max_chunk": 6, "verify_tokens": 5,
               "assistant": checkpoint, **overrides}
    backend = request.pop("backend", "xnnpack")
    quantization = "fp32" if backend == "xnnpack" else None  # the variant's
    return plan_export(request.pop("model", "gemma4_e2b"), backend, quantization, **request)


def test_export_plan_keys_the_assistant_only_when_set(tiny_checkpoint):
    with_assistant = plan(tiny_checkpoint)
    assert with_assistant.assistant == tiny_checkpoint
    assert with_assistant.options.key_fields()["assistant_digest"]
    without = plan(tiny_checkpoint, assistant=None)
    assert "assistant_digest" not in without.options.key_fields()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"backend": "vulkan", "verify_tokens": None}, "XNNPACK only: a Vulkan program"),
        ({"backend": "mlx", "verify_tokens": None}, "XNNPACK only: an MLX program"),
        ({"verify_tokens": None}, "needs --verify-tokens"),
        ({"verify_tokens": 6}, "below the max chunk"),
        ({"random_config": "tiny_mqa"}, "is for another model"),
        ({"model": "smollm2_135m"}, "Gemma 4 only"),
    ],
)
def test_export_refuses_what_cannot_draft(tiny_checkpoint, overrides, message):
    from rne_tools.errors import ExportError

    with pytest.raises(ExportError, match=message):
        plan(tiny_checkpoint, **overrides)


def test_rne_llm_greedy_text_equals_transformers_assisted_generate(
    rne_llm, byte_tokenizer, tmp_path
):
    """The exported tiny Gemma 4 with the tiny assistant as its draft method, through rne_llm
    with --speculative assistant: the greedy tokens equal transformers' ``generate`` with
    ``assistant_model`` on the same weights (and plain decoding), and the assistant drafted."""
    import json
    import subprocess

    from rne_tools.checkpoints import random_model
    from rne_tools.export import cached_export

    checkpoint = gemma4_assistant.write_random_checkpoint(tmp_path / "assistant")
    export = cached_export("gemma4_e2b", "xnnpack", "fp32", random_config="tiny",
                           max_context=64, max_chunk=6, verify_tokens=5, assistant=checkpoint,
                           progress=False)
    assert export.report["verification"]["draft_method"]["status"] == "passed"

    # transformers' models with the exported weights: the seeded random target, our checkpoint.
    config = gemma4.RANDOM_CONFIGS["tiny"]
    ours, _, _ = random_model("gemma4", "tiny", 64, 6)
    ref = gemma4.reference_model(config)
    local = ours.state_dict()
    with torch.no_grad():
        for name, tensor in ref.state_dict().items():
            mapped = gemma4.hf_to_local_name(name)
            if mapped in local:
                tensor.copy_(local[mapped])
    from transformers import Gemma4AssistantForCausalLM

    with hf_assistant_configs():
        hf = Gemma4AssistantForCausalLM.from_pretrained(checkpoint).eval()
    hf.generation_config.num_assistant_tokens = 4

    prompt = [(i * 29 + 7) % 253 + 3 for i in range(17)]  # past the window, three chunks
    new_tokens = 20
    ref.generation_config.eos_token_id = None  # as --ignore-eos: EOS is a token like others
    with torch.no_grad():
        assisted = ref.generate(torch.tensor([prompt]), assistant_model=hf, do_sample=False,
                                max_new_tokens=new_tokens)
        plain = ref.generate(torch.tensor([prompt]), do_sample=False, max_new_tokens=new_tokens)
    assert torch.equal(assisted, plain)
    want = assisted[0, len(prompt):].tolist()

    done = subprocess.run(
        [rne_llm, "--json", "--model", str(export.pte_path), "--tokenizer", str(byte_tokenizer),
         "--prompt-ids", ",".join(map(str, prompt)), "--max-new-tokens", str(new_tokens),
         "--ignore-eos", "--speculative", "assistant", "--max-draft-tokens", "4"],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout)
    assert got["tokens"] == want
    assert got["stats"]["drafted_tokens"] > 0
