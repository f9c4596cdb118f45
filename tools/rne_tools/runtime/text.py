"""Chat prompts and detokenization for a checkpoint's tokenizer (Hugging Face tokenizers)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


class ChatTokenizer:
    """The tokenizer and chat template of a checkpoint directory (tokenizer.json +
    tokenizer_config.json), as the reference for what the app-side tokenizer must produce."""

    def __init__(self, checkpoint_dir: Path | str) -> None:
        from transformers import AutoTokenizer

        self._tok = AutoTokenizer.from_pretrained(str(checkpoint_dir))

    def chat_ids(self, messages: Sequence[dict[str, str]]) -> list[int]:
        """Token ids of ``messages`` rendered with the chat template, ready for the reply."""
        ids = self._tok.apply_chat_template(
            list(messages), add_generation_prompt=True, tokenize=True, return_dict=False
        )
        return list(ids)

    def user_prompt_ids(self, text: str) -> list[int]:
        return self.chat_ids([{"role": "user", "content": text}])

    def decode(self, ids: Sequence[int]) -> str:
        return self._tok.decode(list(ids), skip_special_tokens=True)
