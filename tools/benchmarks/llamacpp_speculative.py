"""llama.cpp's greedy generation with and without llama-cpp-python's prompt lookup decoding
(``LlamaPromptLookupDecoding``), one request per line (a helper of speculative_benchmark.py).

Runs under a Python that has llama-cpp-python (the throwaway venv of llamacpp_bench.py), so it
imports nothing from the repo. It loads the GGUF once per mode and then answers JSON lines on
stdin, so the benchmark can interleave llama.cpp's runs with ours on a warm model:

    {"prompt_ids": [1, 2, 3], "max_new_tokens": 256, "num_pred_tokens": null}
    {"prompt_ids": [1, 2, 3], "max_new_tokens": 256, "num_pred_tokens": 10, "max_ngram_size": 2}

and prints one JSON line per request: the generated ids (the end-of-turn token included when it
came), the time to the first token and the decode rate over the tokens after it, as our runner
counts it (the last token is produced, not fed).

With a draft model llama-cpp-python keeps the logits of every position (``logits_all``), as its
verify step needs them; that cost is part of what it ships, so it is measured as is.
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gguf", required=True)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--context", type=int, default=2048)
    args = parser.parse_args()

    import llama_cpp
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

    def load(draft: object | None) -> llama_cpp.Llama:
        # n_batch = n_ctx as in llamacpp_bench.py: a prompt longer than n_batch would not fit the
        # scores rows llama-cpp-python keeps without logits_all.
        return llama_cpp.Llama(model_path=args.gguf, n_ctx=args.context, n_batch=args.context,
                               n_threads=args.threads, n_threads_batch=args.threads,
                               draft_model=draft, verbose=False)

    plain = load(None)
    # The draft model is an attribute generate() reads each round: one speculative instance
    # serves every draft length.
    speculative = load(LlamaPromptLookupDecoding())
    eos = plain.token_eos()
    print(json.dumps({"ready": True, "llama_cpp_version": llama_cpp.__version__}), flush=True)

    for line in sys.stdin:
        request = json.loads(line)
        if request["num_pred_tokens"] is None:
            llm = plain
        else:
            llm = speculative
            llm.draft_model = LlamaPromptLookupDecoding(
                max_ngram_size=request.get("max_ngram_size", 2),
                num_pred_tokens=request["num_pred_tokens"])
        llm.reset()  # a full prefill each time, as our runner does from a fresh load
        tokens: list[int] = []
        start = time.perf_counter()
        first = last = start
        for token in llm.generate(request["prompt_ids"], temp=0.0, repeat_penalty=1.0):
            last = time.perf_counter()
            if not tokens:
                first = last
            tokens.append(int(token))
            if token == eos or len(tokens) >= request["max_new_tokens"]:
                break
        decode_s = last - first
        print(json.dumps({
            "tokens": tokens,
            "ttft_s": first - start,
            "decode_tok_s": (len(tokens) - 1) / decode_s if decode_s > 0 else 0.0,
        }), flush=True)


if __name__ == "__main__":
    main()
