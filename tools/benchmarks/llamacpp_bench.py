"""llama.cpp's prefill and decode speed on a GGUF, as one JSON line (a helper of
decode_context_benchmark.py).

Runs under a Python that has llama-cpp-python (a throwaway venv outside the repo: llama.cpp is a
comparison point, not a dependency), so it imports nothing from the repo:

    /tmp/llamacpp-venv/bin/python tools/benchmarks/llamacpp_bench.py --gguf FILE \
        --prompt-ids 1,2,3 --new-tokens 32 --threads 2

Prefill: evaluating the prompt ids from an empty cache. Decode: greedy T=1 steps after it,
(new_tokens - 1) of them timed, the same steps our rne_bench times.
"""

from __future__ import annotations

import argparse
import json
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gguf", required=True)
    parser.add_argument("--prompt-ids", required=True, help="comma-separated token ids")
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--context", type=int, default=2048)
    parser.add_argument("--repeat", type=int, default=2, help="best of this many runs")
    args = parser.parse_args()

    import llama_cpp

    prompt = [int(t) for t in args.prompt_ids.split(",")]
    # n_batch = n_ctx: llama-cpp-python keeps n_batch rows of scores when logits_all is off and
    # writes the last logits at row n_tokens - 1, so a smaller n_batch fails past that many tokens.
    # The physical batch (n_ubatch, 512) and so the prefill compute are unchanged.
    llm = llama_cpp.Llama(model_path=args.gguf, n_ctx=args.context, n_batch=args.context,
                          n_threads=args.threads, n_threads_batch=args.threads, verbose=False)
    best_prefill, best_decode = 0.0, 0.0
    for _ in range(args.repeat + 1):  # the first run warms up and is not counted
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(prompt)
        prefill_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        for _ in range(args.new_tokens - 1):
            logits = llm.scores[llm.n_tokens - 1]
            llm.eval([int(logits.argmax())])
        decode_s = time.perf_counter() - t1
        best_prefill = max(best_prefill, len(prompt) / prefill_s)
        best_decode = max(best_decode, (args.new_tokens - 1) / decode_s)
    print(json.dumps({"llama_cpp_version": llama_cpp.__version__, "prompt_tokens": len(prompt),
                      "new_tokens": args.new_tokens, "prefill_tok_s": best_prefill,
                      "decode_tok_s": best_decode}))


if __name__ == "__main__":
    main()
