"""A small, deterministic stand-in for the engine, so CLI / IO / resume logic is tested without a model.

Tokens are Unicode code points. Per record text markers choose the behaviour:
  FAKE:invalid       every attempt answers a record that violates the schema
  FAKE:flaky         the greedy attempt answers broken JSON, sampled retries answer a valid record
  FAKE:engine-error  the engine reports an error for the sequence
  FAKE:slow          takes KVX_FAKE_SLOW seconds (a replica whose work was underestimated)
  FAKE:die           the process exits at once, the first time any process meets such a record
                     (KVX_FAKE_DIE_ONCE names the flag file that makes it once): a killed replica
  FAKE:surrogate     every attempt answers a record holding a lone surrogate escape
  FAKE:overflow      every attempt answers a record whose number overflows a float (1e999: inf to json.loads)
  FAKE:name          the answer names the customer "Ada Lovelace" (whether the text does or not)
  FAKE:long          the summary runs into the ticket schema's maxLength (160) mid-sentence: LONG_SUMMARY
  FAKE:bigint        the record has one key more, "order_number": 2**70 (an integer past int64)
Otherwise the answer is a valid support-ticket record. Results come back in a scrambled order
(windows of 4, reversed), like a real continuous-batching engine. KVX_FAKE_DELAY (seconds) slows
each result down so a test can kill the process mid-run.
"""
from __future__ import annotations

import json
import os
import time

from kvx.job.runtime import EngineOptions, Runtime
from kvx.engine.api import PAUSE, Result, Usage

CONTEXT = 4096
LONG_SUMMARY = ("My order 7 never came. I wrote to support twice and nobody answered me. " * 3)[:160]


class FakeTokenizer:
    vocab_size = 0x110000
    eos_token_ids = [0]
    bos_token_id = None

    def encode(self, text: str) -> list[int]:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: what HF tokenizers raise for it
            raise TypeError("TextEncodeInput must be Union[TextInputSequence, Tuple[InputSequence, InputSequence]]") from None
        return [ord(c) for c in text]

    def decode(self, ids) -> str:
        return "".join(chr(i) for i in ids)

    def chat_prompt(self, messages, add_generation_prompt=True) -> str:
        text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
        return text + ("<|im_start|>assistant\n" if add_generation_prompt else "")


def answer(user_text: str, temperature: float) -> tuple[str, str]:
    """(text, finish_reason) the fake model produces for this record."""
    if "FAKE:surrogate" in user_text:  # half an emoji, as a JSON escape: valid JSON, not valid text
        return '{"category": "billing", "priority": "low", "sentiment": "neutral", "summary": "cut \\ud83d", ' \
               '"requires_refund": false}', "stop"
    if "FAKE:overflow" in user_text:  # valid JSON text; as a Python float, inf (no JSON writer can store it)
        return '{"category": "billing", "priority": "low", "sentiment": "neutral", "summary": "big", ' \
               '"requires_refund": false, "amount": 1e999}', "stop"
    if "FAKE:invalid" in user_text:
        return json.dumps({"category": "weather", "priority": "high"}), "stop"
    if "FAKE:flaky" in user_text and temperature == 0:
        return '{"category": "billing", "priority":', "length"
    record = {
        "category": "billing" if "refund" in user_text.lower() else "technical",
        "priority": "high",
        "sentiment": "negative",
        "product": None,
        "customer_name": "Ada Lovelace" if "FAKE:name" in user_text else None,
        "order_id": None,
        "summary": user_text[:60].strip() or "empty ticket",
        "requires_refund": "refund" in user_text.lower(),
        "tags": ["fake"],
    }
    if len(record["summary"]) < 5:
        record["summary"] = (record["summary"] + " ticket")[:60]
    if "FAKE:long" in user_text:
        record["summary"] = LONG_SUMMARY
    if "FAKE:bigint" in user_text:
        record["order_number"] = 2**70
    return json.dumps(record), "stop"


class FakeMetrics:
    def __init__(self):
        self.done = 0
        self.generated = 0

    def snapshot(self) -> dict:
        return {"requests_done": self.done, "generated_tokens": self.generated, "output_tokens_per_s": 0.0,
                "cache_hit_rate": 0.0, "batch_utilisation": 0.0, "kv_pool_pressure": 0.0,
                "peak_kv_pool_pressure": 0.0}


class FakeEngine:
    def __init__(self, tokenizer: FakeTokenizer):
        self.tokenizer = tokenizer
        self.metrics = FakeMetrics()
        self.delay = float(os.environ.get("KVX_FAKE_DELAY", "0"))
        self.seen_requests = []

    def generate(self, requests, reset_metrics=True):
        window = []
        for request in requests:
            if request is PAUSE:  # a replica's source has nothing new: finish what is held
                yield from self._finish(reversed(window))
                window = []
                continue
            if request.sampling.score_from is not None:  # --choices channel: a score, at once
                usage = Usage(prompt_tokens=len(request.prompt_ids))
                yield Result(request.id, [], "", "stop", usage, user_data=request.user_data,
                             prompt_logprob=-float(sum(request.prompt_ids[request.sampling.score_from:]) % 97))
                continue
            self.seen_requests.append(request)
            window.append(request)
            if len(window) == 4:
                yield from self._finish(reversed(window))
                window = []
        yield from self._finish(reversed(window))

    def _finish(self, batch):
        for r in list(batch):
            if self.delay:
                time.sleep(self.delay)
            prompt = self.tokenizer.decode(r.prompt_ids)
            user = prompt.rsplit("<|im_start|>user\n", 1)[-1]
            usage = Usage(prompt_tokens=len(r.prompt_ids))
            if "FAKE:slow" in user:
                time.sleep(float(os.environ.get("KVX_FAKE_SLOW", "0.05")))
            if "FAKE:die" in user:
                _die_once()
            self.metrics.done += 1
            if "FAKE:engine-error" in user:
                yield Result(r.id, [], "", "error", usage, error="sequence failed in the engine", user_data=r.user_data)
                continue
            text, reason = answer(user, r.sampling.temperature)
            usage.generated_tokens = len(text)
            self.metrics.generated += len(text)
            yield Result(r.id, self.tokenizer.encode(text), text, reason, usage, user_data=r.user_data)


def _die_once() -> None:
    flag = os.environ.get("KVX_FAKE_DIE_ONCE")
    if flag:
        try:
            os.close(os.open(flag, os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            return
        os._exit(1)


def fake_runtime(schema: dict, opts: EngineOptions) -> Runtime:
    tokenizer = FakeTokenizer()
    return Runtime(tokenizer, FakeEngine(tokenizer), CONTEXT, f"fake:{opts.model}")
