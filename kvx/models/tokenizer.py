"""The tokenizer every part of kvx uses: a transformers fast tokenizer plus the model facts around it."""
from __future__ import annotations

from pathlib import Path
from typing import Any


class Tokenizer:
    """`.hf` is the transformers fast tokenizer; `.vocab_size` counts the model's embedding rows (>= len(hf));
    `.context_length` is the model's context in tokens (None where unknown)."""

    def __init__(self, hf: Any, vocab_size: int, eos_token_ids: list[int], bos_token_id: int | None,
                 context_length: int | None = None):
        self.hf = hf
        self.vocab_size = max(int(vocab_size), len(hf))
        self.eos_token_ids = list(eos_token_ids)
        self.bos_token_id = bos_token_id
        self.context_length = context_length

    @classmethod
    def for_model(cls, hf: Any, vocab_size: int, eos_token_ids: list[int], bos_token_id: int | None,
                  context_length: int | None = None) -> "Tokenizer":
        """The model config's EOS/BOS ids win; the tokenizer's own are the fallback."""
        eos = eos_token_ids or ([hf.eos_token_id] if hf.eos_token_id is not None else [])
        return cls(hf, vocab_size, eos, bos_token_id if bos_token_id is not None else hf.bos_token_id, context_length)

    @staticmethod
    def hf_from_dir(path: Path) -> Any:
        from transformers import PreTrainedTokenizerFast

        return PreTrainedTokenizerFast.from_pretrained(str(path))

    def __len__(self) -> int:
        return len(self.hf)

    def encode(self, text: str) -> list[int]:
        """Token ids of `text`, no BOS/EOS added (chat_prompt already spells out the special tokens)."""
        return self.hf.encode(text, add_special_tokens=False)

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return self.hf.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def chat_prompt(self, messages: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        """The model's chat template applied to [{"role": ..., "content": ...}]; plain text if it has none."""
        if getattr(self.hf, "chat_template", None):
            return self.hf.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt)
        text = "".join(f"{m['role']}: {m['content']}\n" for m in messages)
        return text + ("assistant: " if add_generation_prompt else "")
