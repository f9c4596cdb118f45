"""The real SmolLM2-135M-Instruct: GGUF import, parity with transformers, exported fp32, 8w and
8da4w programs answering a question through the reference runner, and the quality of the
demo's quantized recipe against fp32 (exports cached)."""

import json

import pytest
import torch

from rne_tools.checkpoints import load_model
from rne_tools.checks.runner import PteRunner
from rne_tools.runtime.text import ChatTokenizer

QUESTION = "What is the capital of France?"


def test_import_writes_a_complete_checkpoint(smollm2_checkpoint):
    names = {p.name for p in smollm2_checkpoint.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= names
    config = json.loads((smollm2_checkpoint / "config.json").read_text())
    assert config["model_type"] == "llama" and config["num_hidden_layers"] == 30
    assert "quantization_config" not in config
    tok_config = json.loads((smollm2_checkpoint / "tokenizer_config.json").read_text())
    assert "<|im_start|>" in tok_config["chat_template"]
    assert tok_config["eos_token"] == "<|im_end|>"


def test_real_weights_match_transformers(smollm2_checkpoint):
    from transformers import AutoModelForCausalLM

    tok = ChatTokenizer(smollm2_checkpoint)
    ids = tok.user_prompt_ids(QUESTION)
    ours, _ = load_model(smollm2_checkpoint, "llama", 128, 64, progress=False)
    ref = AutoModelForCausalLM.from_pretrained(smollm2_checkpoint, dtype=torch.float32).eval()
    with torch.no_grad():
        expected = ref(torch.tensor([ids])).logits[0, -1]
        got = ours(torch.tensor([ids]), torch.tensor([0]))[0]
    torch.testing.assert_close(got, expected, atol=2e-3, rtol=0)
    assert int(got.argmax()) == int(expected.argmax())


@pytest.mark.parametrize("fixture", ["smollm2_fp32", "smollm2_8w", "smollm2_8da4w"])
def test_exported_smollm2_answers_paris(fixture, smollm2_checkpoint, request):
    result = request.getfixturevalue(fixture)
    assert result.report["verification"]["passed"] is True
    runner = PteRunner(result.pte_path)
    assert runner.info.max_chunk == result.report["max_chunk"]
    tok = ChatTokenizer(smollm2_checkpoint)
    prompt = tok.user_prompt_ids(QUESTION)
    out = runner.generate(prompt, max_new_tokens=24)
    text = tok.decode(out.tokens)
    assert "Paris" in text, text
    if fixture == "smollm2_fp32":
        # fp32 reproduces transformers' greedy answer, which ends its turn right after it.
        assert out.stopped_at_eos, f"no <|im_end|> within 24 tokens: {text!r}"


def test_the_demo_recipe_keeps_the_fp32_answers(smollm2_fp32, smollm2_8w, smollm2_checkpoint):
    """8w (int8 weights, float activations) is the demo's default because it holds the bar a
    default needs: teacher-forced top-1 agreement with fp32 over chat answers >= 95% (measured
    97.4% over both prompt sets, 96.8% over the 10 the recipe was chosen on; 8da8w 91%, 8da4w
    65%: tools/benchmarks/quant_quality.py)."""
    from rne_tools.checks.quality import MORE_PROMPTS, PROMPTS, top1_agreement

    result = top1_agreement(
        smollm2_fp32.pte_path,
        smollm2_8w.pte_path,
        smollm2_checkpoint,
        PROMPTS + MORE_PROMPTS,
        progress=False,
    )
    # The answers really ran (50 prompts, up to 32 tokens each).
    assert result.positions >= 1000
    assert result.agreement >= 0.95, result
