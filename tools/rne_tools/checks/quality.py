"""Quantization quality: top-1 agreement of a quantized program with its fp32 counterpart.

For each prompt of a fixed set, the fp32 program answers greedily (up to its end-of-sequence
token, which counts, or ``new_tokens``); the quantized program is then fed the same prompt +
answer (teacher forcing) and at every answer position we check whether its top-1 token equals
the fp32 program's. Teacher forcing keeps one early disagreement from changing everything after
it, so the number measures per-step agreement. Nothing past the end-of-sequence token is
compared: a user never sees it, and after the answer ends the model's next tokens are
near-ties that say nothing about the answer's quality.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

PROMPTS: tuple[str, ...] = (
    "What is the capital of France?",
    "Write a haiku about the sea.",
    "Explain photosynthesis in two sentences.",
    "List three uses of a paperclip.",
    "What is 12 times 7?",
    "Give me a tip for learning a new language.",
    "Who wrote Romeo and Juliet?",
    "Describe a cat to someone who has never seen one.",
    "Why is the sky blue?",
    "Suggest a name for a small bakery.",
)

# A broader set: everyday questions, facts, arithmetic, short writing and explanations. 8w's row
# centring was chosen on it (in eager); PROMPTS, which it was not, checks that the gain holds.
MORE_PROMPTS: tuple[str, ...] = (
    "How do I boil an egg?",
    "What is the largest planet in our solar system?",
    "Translate 'good morning' into Spanish.",
    "Write a short poem about autumn leaves.",
    "What are the benefits of regular exercise?",
    "Explain what a black hole is.",
    "Give me three ideas for a birthday party.",
    "What is the difference between weather and climate?",
    "How many legs does a spider have?",
    "Summarize the story of Cinderella in one sentence.",
    "What does a computer's CPU do?",
    "Recommend a book for a long flight.",
    "How can I save money on groceries?",
    "What is the boiling point of water in Fahrenheit?",
    "Write a thank-you note to a teacher.",
    "Why do leaves change color in the fall?",
    "What is 15 plus 27?",
    "Name a famous painting by Leonardo da Vinci.",
    "How do airplanes stay in the air?",
    "What should I pack for a beach vacation?",
    "Tell me a fun fact about octopuses.",
    "What is the capital of Japan?",
    "Describe the taste of a lemon.",
    "How do I make a cup of tea?",
    "What is gravity?",
    "Give me a motivational quote.",
    "What are the primary colors?",
    "Explain how a rainbow forms.",
    "Who was the first person to walk on the moon?",
    "What is a healthy breakfast?",
    "How do bees make honey?",
    "Write a limerick about a cat.",
    "What is the speed of light?",
    "Suggest a name for a pet goldfish.",
    "How do I stay focused while studying?",
    "What causes earthquakes?",
    "What is the tallest mountain in the world?",
    "Explain what DNA is in simple terms.",
    "How many continents are there?",
    "What is your favorite season and why?",
)


@dataclass(frozen=True)
class AgreementResult:
    agreement: float
    matched: int
    positions: int
    per_prompt: tuple[float, ...]


def top1_agreement(
    reference_pte: Path,
    candidate_pte: Path,
    checkpoint_dir: Path,
    prompts: Sequence[str] = PROMPTS,
    new_tokens: int = 32,
    progress: bool = True,
) -> AgreementResult:
    """Top-1 agreement of ``candidate_pte`` with ``reference_pte`` over ``prompts``."""
    from rne_tools.checks.runner import PteRunner
    from rne_tools.runtime.text import ChatTokenizer

    tok = ChatTokenizer(checkpoint_dir)
    reference, candidate = PteRunner(reference_pte), PteRunner(candidate_pte)
    matched = positions = 0
    per_prompt = []
    for text in tqdm(prompts, desc="prompts", disable=not progress):
        prompt = tok.user_prompt_ids(text)
        continuation = reference.generate(prompt, new_tokens, stop_at_eos=True).tokens
        logits = candidate.prefill(prompt)
        hits = 0
        for i, expected in enumerate(continuation):
            hits += int(logits.argmax(-1)[0]) == expected
            if i + 1 < len(continuation):
                logits = candidate.forward([expected], len(prompt) + i)
        matched, positions = matched + hits, positions + len(continuation)
        per_prompt.append(hits / len(continuation))
    return AgreementResult(matched / positions, matched, positions, tuple(per_prompt))
