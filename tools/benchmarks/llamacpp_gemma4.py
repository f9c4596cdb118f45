"""llama.cpp on Gemma 4 (issue 36, item 6): a GGUF written from our weights with the pinned
``gguf`` package, checked against transformers, then E2B at full depth on this CPU.

llama-cpp-python 0.3.36 bundles llama.cpp 0c1e57098, which implements the ``gemma4``
architecture, and gguf 0.19.0 (tools/requirements.txt) names its tensors and metadata. Commands:

``parity``: a tiny random Gemma 4 (transformers' ``Gemma4ForCausalLM``, seeded as the tests seed
    it) written as an F32 GGUF; llama.cpp's logits at every position of a prefill followed by T=1
    decode steps must match transformers eager (fp32). Exits non-zero when they do not.
``e2b``: Gemma 4 E2B's text decoder at full depth (35 layers) with the seeded random weights our
    exporter gives it (``random_model``'s stream, drawn tensor by tensor: one chunk in memory at a
    time; never a trained checkpoint), as a Q4_0 GGUF (4-bit blocks of 32 with int8 activations on
    x86, the nearest to our 8da4w with 4-bit embeddings); then llama.cpp's prefill of 512 tokens and
    decode at 128 and 2,000 tokens of context through llamacpp_bench.py, each with its peak RSS.
    Refuses to start when the estimated RSS passes ``--max-rss-gb``.

Runs under the project's Python; llama.cpp runs under ``--llamacpp-python``, a throwaway venv outside
the repo (llama.cpp is a comparison point, not a dependency), as for decode_context_benchmark.py:

    python3.11 -m venv /tmp/llamacpp-venv
    /tmp/llamacpp-venv/bin/pip install numpy==2.4.6 llama-cpp-python==0.3.36   # builds llama.cpp
    # A VM whose CPU reports AMX without enabling it: the native build dies with SIGILL at its
    # first tile instruction. Rebuild without AMX (add -DGGML_AVX512=ON where the CPU has it):
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON" \
        /tmp/llamacpp-venv/bin/pip install --force-reinstall --no-deps --no-cache-dir \
        llama-cpp-python==0.3.36
    .venv/bin/python tools/benchmarks/llamacpp_gemma4.py parity --llamacpp-python /tmp/llamacpp-venv/bin/python
    .venv/bin/python tools/benchmarks/llamacpp_gemma4.py e2b --llamacpp-python /tmp/llamacpp-venv/bin/python

llama.cpp cannot express every Gemma 4 layout (checked before anything is written): its KV-shared
layers read the last non-shared layer (full attention) or the one before it (sliding), where
transformers reads the last non-shared layer of the same type. E2B satisfies this; the project's
``tiny`` config (its last two non-shared layers are both sliding) does not, so ``parity`` runs
``tiny`` with its layer types reordered (the same features, a layout llama.cpp supports).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
LLAMACPP_BENCH = HERE.parent / "llamacpp_bench.py"
SLIDING, FULL = "sliding_attention", "full_attention"
Q4_0_BLOCK, Q4_0_BYTES = 32, 18  # elements per Q4_0 block, bytes per block (fp16 scale + 16)
# The tiny config's layer types with its last two non-shared layers sliding then full (see above).
PARITY_LAYER_TYPES = [SLIDING, FULL, SLIDING, SLIDING, FULL, SLIDING, SLIDING, FULL]
# Agreement bound for the F32 GGUF, in standard deviations of the eager logits: fp32 throughout, but
# ggml's GELU reads an fp16 lookup table (about 1e-3 relative), so not bit-exact.
PARITY_MAX_DIFF_STD = 0.01


class LlamaCppGemma4Error(Exception):
    """A Gemma 4 config or run llama.cpp cannot take; the message says what to change."""


# ---------------------------------------------------------------------------------------------
# The config, as llama.cpp's gemma4 loader reads it


@dataclass(frozen=True)
class GGUFConfig:
    """A Gemma 4 decoder as llama.cpp's gemma4 loader describes it."""

    args: Any  # rne_tools.models.gemma4.ModelArgs
    head_dim_swa: int
    head_dim_full: int
    context_length: int

    @property
    def n_layers(self) -> int:
        return int(self.args.n_layers)


def gguf_config(cfg: dict[str, Any]) -> GGUFConfig:
    """Our parse of an HF config dict (``gemma4.ModelArgs``), with llama.cpp's limits checked."""
    from rne_tools.models import gemma4

    a = gemma4.ModelArgs.from_hf_config(cfg)
    dims = {kind: {a.head_dims[i] for i in range(a.n_layers) if a.layer_types[i] == kind}
            for kind in (SLIDING, FULL)}
    problems = []
    if len(dims[SLIDING]) != 1 or len(dims[FULL]) != 1:
        problems.append(f"it needs one head size per layer type, not {dims}")
    if a.ple_dim and a.ple_vocab_size != a.vocab_size:
        problems.append("its per-layer table has one row per token of the vocabulary "
                        f"({a.vocab_size}), not {a.ple_vocab_size}")
    if any(scale != 1.0 for scale in a.rope_scale.values()):
        problems.append(f"scaled RoPE ({a.rope_scale}) is not written by this script")
    first = a.first_shared_layer
    # llama.cpp's KV reuse rule (llama-model.cpp): a shared layer reads layer first-2 if it is
    # sliding, first-1 if full; transformers reads the last earlier layer of its type.
    for i in range(first, a.n_layers):
        reads = first - 2 if a.layer_types[i] == SLIDING else first - 1
        if a.kv_source[i] != i and a.kv_source[i] != reads:
            problems.append(f"shared layer {i} ({a.layer_types[i]}) reads layer {a.kv_source[i]}, "
                            f"but llama.cpp has it read layer {reads}; reorder layer_types so the "
                            "last two non-shared layers are sliding then full")
            break
    if any(a.kv_source[i] == i for i in range(first, a.n_layers)):
        problems.append("llama.cpp shares the KV of every layer after the first shared one")
    if problems:
        raise LlamaCppGemma4Error("llama.cpp cannot run this Gemma 4 config: " + "; ".join(problems))
    return GGUFConfig(a, dims[SLIDING].pop(), dims[FULL].pop(),
                      int(cfg.get("max_position_embeddings", 131072)))


def write_metadata(writer: Any, c: GGUFConfig) -> None:
    """The ``gemma4.*`` keys llama.cpp's loader reads (src/models/gemma4.cpp), and a vocabulary
    of ``vocab_size`` nameless tokens: the runs feed token ids, no text."""
    a = c.args
    swa = [t == SLIDING for t in a.layer_types]
    writer.add_name("gemma4 (random weights)")
    writer.add_context_length(c.context_length)
    writer.add_embedding_length(a.dim)
    writer.add_block_count(a.n_layers)
    writer.add_feed_forward_length(list(a.ffn_dims))
    writer.add_head_count(a.n_heads)
    writer.add_head_count_kv(list(a.n_kv_heads))
    # Full layers have the wider head; llama.cpp keeps the sliding one in the *_swa keys.
    writer.add_key_length(c.head_dim_full)
    writer.add_value_length(c.head_dim_full)
    writer.add_key_length_swa(c.head_dim_swa)
    writer.add_value_length_swa(c.head_dim_swa)
    # Full layers rotate every dim, rope_freqs silencing the unrotated ones (see rope_freqs).
    writer.add_rope_dimension_count(c.head_dim_full)
    writer.add_rope_dimension_count_swa(a.rope_dims[SLIDING])
    writer.add_rope_freq_base(a.rope_theta[FULL])
    writer.add_rope_freq_base_swa(a.rope_theta[SLIDING])
    writer.add_layer_norm_rms_eps(a.norm_eps)
    writer.add_sliding_window(a.sliding_window)
    writer.add_sliding_window_pattern(swa)
    writer.add_shared_kv_layers(a.n_layers - a.first_shared_layer)
    writer.add_embedding_length_per_layer_input(a.ple_dim)
    if a.final_softcap:
        writer.add_final_logit_softcapping(a.final_softcap)
    writer.add_vocab_size(a.vocab_size)
    writer.add_tokenizer_model("none")


def rope_freqs(c: GGUFConfig) -> Any:
    """Per-pair frequency divisors of the full layers: 1 for the pairs transformers'
    "proportional" RoPE rotates, 1e30 (angle ~0) for the rest."""
    import numpy as np

    pairs, rotated = c.head_dim_full // 2, c.args.rope_dims[FULL] // 2
    return np.array([1.0] * rotated + [1e30] * (pairs - rotated), dtype=np.float32)


# ---------------------------------------------------------------------------------------------
# Writing the GGUF, one row chunk at a time


@dataclass(frozen=True)
class TensorPlan:
    name: str  # GGUF name
    shape: tuple[int, ...]  # torch order (rows, columns)
    q4_0: bool

    @property
    def nbytes(self) -> int:
        count = 1
        for d in self.shape:
            count *= d
        return count // Q4_0_BLOCK * Q4_0_BYTES if self.q4_0 else count * 4


def gguf_name(tensor_map: Any, hf_name: str) -> str:
    """GGUF name of an HF Gemma 4 tensor (gguf's own table); every tensor here is a ``.weight``."""
    name = tensor_map.get_name(hf_name, try_suffixes=(".weight",))
    if name is None:
        raise LlamaCppGemma4Error(f"gguf {_gguf_version()} has no GGUF name for {hf_name}.")
    return name if name.endswith(".weight") else name + ".weight"


def plan_tensor(name: str, shape: tuple[int, ...], quantize: bool) -> TensorPlan:
    # Q4_0 for matrices (rows of whole blocks); vectors, scalars and odd widths stay F32.
    return TensorPlan(name, shape, quantize and len(shape) == 2 and shape[-1] % Q4_0_BLOCK == 0)


def write_gguf(path: Path, c: GGUFConfig, plan: list[TensorPlan],
               chunks: Iterator[tuple[str, Any]]) -> None:
    """Write ``plan``'s tensors, their data read from ``chunks``: ``(gguf name, float32 rows)`` in
    plan order, a tensor's rows possibly split over several consecutive chunks."""
    import gguf
    import numpy as np
    from gguf.quants import quantize

    writer = gguf.GGUFWriter(str(path), "gemma4")
    write_metadata(writer, c)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_0 if any(t.q4_0 for t in plan)
                         else gguf.LlamaFileType.ALL_F32)
    for t in plan:
        if t.q4_0:
            byte_shape = (t.shape[0], t.shape[1] // Q4_0_BLOCK * Q4_0_BYTES)
            writer.add_tensor_info(t.name, byte_shape, np.dtype(np.uint8), t.nbytes,
                                   raw_dtype=gguf.GGMLQuantizationType.Q4_0)
        else:
            writer.add_tensor_info(t.name, t.shape, np.dtype(np.float32), t.nbytes)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    # gguf's write_tensor_data takes a whole tensor; E2B's per-layer table alone is 2.35 B
    # values, so each tensor's rows are written as they come, with the same alignment padding.
    fout = writer.fout[0]
    pending = iter(chunks)
    for t in plan:
        writer.write_padding(fout, fout.tell())
        rows = 0
        while rows < (t.shape[0] if len(t.shape) > 1 else 1):
            name, data = next(pending)
            if name != t.name:
                raise LlamaCppGemma4Error(f"GGUF writer expected {t.name}, got {name}.")
            data = np.ascontiguousarray(data, dtype=np.float32)
            if t.q4_0:
                quantize(data, gguf.GGMLQuantizationType.Q4_0).tofile(fout)
            else:
                data.tofile(fout)
            rows += data.shape[0] if len(t.shape) > 1 else 1
        writer.write_padding(fout, t.nbytes)
    extra = next(pending, None)
    if extra is not None:
        raise LlamaCppGemma4Error(f"GGUF writer got {extra[0]}, which the plan does not hold.")
    writer.close()


def _gguf_version() -> str:
    from importlib.metadata import version

    return version("gguf")


# ---------------------------------------------------------------------------------------------
# Weight sources


def hf_weights(model: Any, c: GGUFConfig, quantize: bool) -> tuple[list[TensorPlan], Iterator]:
    """Plan and data of a transformers ``Gemma4ForCausalLM`` (whole tensors)."""
    import gguf

    tensor_map = gguf.get_tensor_name_map(gguf.MODEL_ARCH.GEMMA4, c.n_layers)
    items = [(gguf_name(tensor_map, k), v.detach().float().numpy())
             for k, v in model.state_dict().items()
             if not (k == "lm_head.weight" and c.args.tie_word_embeddings)]
    items.append(("rope_freqs.weight", rope_freqs(c)))
    plan = [plan_tensor(name, tuple(v.shape), quantize) for name, v in items]
    return plan, iter(items)


def our_random_weights(
    cfg: dict[str, Any], seed: int
) -> tuple[GGUFConfig, list[TensorPlan], Callable[[], Iterator[tuple[str, Any]]], dict[str, str]]:
    """Plan and data of ``rne_tools.checkpoints.random_model("gemma4", cfg, seed)`` without
    building it: its ``init_random`` stream (``init_like_trained`` then the layer scalars) drawn in
    the same order and chunks, one chunk at a time. ``check_random_stream`` proves the match.
    Returns the config, the plan, the chunk stream and our parameter names' GGUF names."""
    import gguf
    import torch
    from transformers import Gemma4ForCausalLM, Gemma4TextConfig

    from rne_tools.models import gemma4
    from rne_tools.models.layers import like_trained_blocks

    c = gguf_config(cfg)
    with torch.device("meta"):  # names and shapes only: no memory
        ours = gemma4.Transformer(c.args, max_context=16, max_chunk=8)
        hf = Gemma4ForCausalLM(Gemma4TextConfig(**{k: v for k, v in cfg.items()
                                                    if k != "model_type"}))
    to_hf = {gemma4.hf_to_local_name(k): k for k in hf.state_dict()}
    tensor_map = gguf.get_tensor_name_map(gguf.MODEL_ARCH.GEMMA4, c.n_layers)
    params = list(ours.named_parameters())
    unmapped = [local for local, _ in params if local not in to_hf]
    if unmapped:
        raise LlamaCppGemma4Error(f"No transformers name for our {', '.join(unmapped)}: "
                                  "gemma4.hf_to_local_name and this script disagree.")
    names = {local: gguf_name(tensor_map, to_hf[local]) for local, _ in params}
    scalars = [local for local, _ in params if local.endswith("layer_scalar")]
    plan = [plan_tensor(names[local], tuple(p.shape), True) for local, p in params
            if local not in scalars]
    plan += [plan_tensor(names[local], (1,), True) for local in scalars]
    plan.append(plan_tensor("rope_freqs.weight", (c.head_dim_full // 2,), True))

    def chunks() -> Iterator[tuple[str, Any]]:
        g = torch.Generator().manual_seed(seed)
        for local, p in params:
            for block in like_trained_blocks(tuple(p.shape), g):
                if local not in scalars:  # a layer scalar's draw is overwritten below
                    yield names[local], block.to(p.dtype).float().numpy()
        for local in scalars:
            yield names[local], (0.5 + torch.rand(1, generator=g)).numpy()
        yield "rope_freqs.weight", rope_freqs(c)

    return c, plan, chunks, names


def check_random_stream() -> None:
    """Our stream must equal ``random_model``'s weights (else the E2B GGUF would not hold the
    weights our exports hold); checked on the tiny config, where building the model is cheap."""
    import numpy as np

    from rne_tools.checkpoints import random_model
    from rne_tools.models import gemma4

    cfg = dict(gemma4.RANDOM_CONFIGS["tiny"], layer_types=PARITY_LAYER_TYPES)
    model, _, _ = random_model("gemma4", cfg, max_context=16, max_chunk=8, seed=3)
    _, _, chunks, names = our_random_weights(cfg, seed=3)
    streamed: dict[str, list[Any]] = {}
    for name, data in chunks():
        streamed.setdefault(name, []).append(data)
    for local, param in model.named_parameters():
        got = np.concatenate(streamed[names[local]]).reshape(tuple(param.shape))
        if not np.array_equal(got, param.detach().float().numpy()):
            raise LlamaCppGemma4Error(
                f"The E2B weight stream differs from random_model's {local}: init_like_trained or "
                "init_random changed; update our_random_weights to draw as they do.")


# ---------------------------------------------------------------------------------------------
# llama.cpp's side (runs under --llamacpp-python: stdlib, numpy and llama_cpp only)


def llama_logits(args: argparse.Namespace) -> None:
    """Logits at every position: ``--prefill`` ids in one call, then the rest one id per call."""
    import llama_cpp
    import numpy as np

    ids = [int(t) for t in args.ids.split(",")]
    # An F32 KV cache (llama.cpp's default is F16) so that only the conversion is under test.
    llm = llama_cpp.Llama(model_path=args.gguf, n_ctx=len(ids), n_batch=len(ids),
                          n_threads=args.threads, n_threads_batch=args.threads,
                          type_k=llama_cpp.GGML_TYPE_F32, type_v=llama_cpp.GGML_TYPE_F32,
                          logits_all=True, verbose=False)
    llm.eval(ids[: args.prefill])
    for t in ids[args.prefill:]:
        llm.eval([t])
    np.save(args.out, np.asarray(llm.scores[: len(ids)], dtype=np.float32))


def run_measured(cmd: list[str]) -> tuple[str, int]:
    """A child's stdout and its own peak RSS in bytes (the resident pages of a mapped model file
    included)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise LlamaCppGemma4Error(f"{' '.join(cmd[:3])} ... exited with {proc.returncode}.")
    return out, usage.ru_maxrss * 1024


# ---------------------------------------------------------------------------------------------
# Commands


def parity(args: argparse.Namespace) -> None:
    import numpy as np
    import torch

    from rne_tools.models import gemma4

    cfg = dict(gemma4.RANDOM_CONFIGS["tiny"], layer_types=PARITY_LAYER_TYPES)
    c = gguf_config(cfg)
    model = gemma4.reference_model(cfg, seed=args.seed)
    ids = [int(t) for t in torch.randint(0, c.args.vocab_size, (args.tokens,),
                                         generator=torch.Generator().manual_seed(args.seed))]
    with torch.no_grad():
        eager = model(torch.tensor([ids])).logits[0].float().numpy()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "gemma4_tiny_f32.gguf"
        plan, chunks = hf_weights(model, c, quantize=False)
        write_gguf(path, c, plan, chunks)
        out = Path(tmp) / "logits.npy"
        run_measured([str(args.llamacpp_python), str(HERE), "llama-logits", "--gguf", str(path),
                      "--ids", ",".join(map(str, ids)), "--prefill", str(args.prefill),
                      "--out", str(out), "--threads", str(args.threads)])
        ours = np.load(out)
    diff = np.abs(ours - eager).max(axis=-1)
    std = float(eager.std())
    agree = int((ours.argmax(-1) == eager.argmax(-1)).sum())
    print(f"tiny Gemma 4 (seed {args.seed}, layer types {PARITY_LAYER_TYPES}), {len(ids)} tokens "
          f"(prefill {args.prefill}, then T=1): eager logit std {std:.4f}")
    print("max |llama.cpp - eager| per position: " + " ".join(f"{d:.2e}" for d in diff))
    print(f"worst {diff.max():.3e} = {diff.max() / std:.2e} std (bound {PARITY_MAX_DIFF_STD}); "
          f"greedy agreement {agree}/{len(ids)}")
    if diff.max() > PARITY_MAX_DIFF_STD * std:
        raise SystemExit("llama.cpp's logits differ from transformers: the GGUF is not the model.")


def e2b(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(HERE.parent))
    from export_benchmark import E2B_LAYERS, gemma4_e2b_config

    check_random_stream()
    cfg = gemma4_e2b_config(E2B_LAYERS)
    c, plan, chunks, _ = our_random_weights(cfg, seed=args.seed)
    size = sum(t.nbytes for t in plan)
    table = next(t for t in plan if t.name == "per_layer_token_embd.weight").nbytes
    embedding = next(t for t in plan if t.name == "token_embd.weight").nbytes
    # Resident (seen at load): the whole mapped file (llama.cpp populates the mapping), plus the
    # copies its CPU backend repacks the matmul weights into (all but the two tables), plus
    # ~0.5 GB of KV cache, compute buffers and the runtime.
    estimate = 2 * size - table - embedding + 0.5e9
    print(f"E2B, {c.n_layers} layers, random weights (seed {args.seed}), Q4_0: "
          f"{size / 1e9:.2f} GB, of which the per-layer table {table / 1e9:.2f} GB; "
          f"estimated peak RSS {estimate / 1e9:.1f} GB", flush=True)
    if estimate > args.max_rss_gb * 1e9:
        raise LlamaCppGemma4Error(f"Estimated RSS {estimate / 1e9:.1f} GB exceeds --max-rss-gb "
                                  f"{args.max_rss_gb}; run it on a bigger machine.")
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"gemma4_e2b_random{args.seed}_q4_0.gguf"
    if not path.is_file():
        staging = path.with_suffix(".tmp")
        write_gguf(staging, c, plan, chunks())
        staging.rename(path)
    print(f"{path}: {path.stat().st_size / 1e9:.2f} GB", flush=True)
    if args.write_only:
        return
    # (prompt tokens, decoded tokens): prefill at 512, decode at 128 and 2,000 of context. With
    # llama-cpp-python 0.3.36 llamacpp_bench.py's "greedy" steps all feed id 0 (it no longer fills
    # `scores` without logits_all); every step still runs the whole model and its LM head.
    runs = [(args.prefill_tokens, 2), *((n, args.new_tokens) for n in args.contexts)]
    results = []
    for prompt, new in runs:
        # decode_context_benchmark.py's synthetic ids (rne_bench's prompt), so both see the same.
        ids = ",".join(str((i * 7919 + 13) % c.args.vocab_size) for i in range(prompt))
        out, rss = run_measured([str(args.llamacpp_python), str(LLAMACPP_BENCH), "--gguf",
                                 str(path), "--prompt-ids", ids, "--new-tokens", str(new),
                                 "--threads", str(args.threads), "--repeat", "1",
                                 "--context", str(max(2048, prompt + new))])
        r = json.loads(out.strip().splitlines()[-1]) | {"peak_rss_bytes": rss}
        results.append(r)
        print(f"prompt {prompt:>5}: prefill {r['prefill_tok_s']:8.1f} tok/s, decode "
              f"{r['decode_tok_s'] if new > 2 else float('nan'):6.2f} tok/s "
              f"({new - 1} steps), peak RSS {rss / 1e9:.2f} GB", flush=True)
    if args.json:
        print(json.dumps({"gguf_bytes": path.stat().st_size, "runs": results}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("parity", help="tiny Gemma 4 GGUF vs transformers eager")
    p.add_argument("--llamacpp-python", type=Path, required=True)
    p.add_argument("--seed", type=int, default=5)
    p.add_argument("--tokens", type=int, default=24, help="more than the window (6) crosses it")
    p.add_argument("--prefill", type=int, default=13)
    p.add_argument("--threads", type=int, default=1)
    e = sub.add_parser("e2b", help="full-depth E2B (random weights) Q4_0: speed and RSS")
    e.add_argument("--llamacpp-python", type=Path, required=True)
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "rne-llamacpp-gemma4",
                   help="where the GGUF is written (about 3 GB) and kept for reruns")
    e.add_argument("--contexts", type=lambda s: [int(x) for x in s.split(",")],
                   default=[128, 2000], help="prompt lengths decode is measured after")
    e.add_argument("--prefill-tokens", type=int, default=512)
    e.add_argument("--new-tokens", type=int, default=32)
    e.add_argument("--threads", type=int, default=2)
    e.add_argument("--max-rss-gb", type=float, default=10.0)
    e.add_argument("--json", action="store_true")
    e.add_argument("--write-only", action="store_true",
                   help="only write the GGUF (timing wants an otherwise idle machine)")
    ll = sub.add_parser("llama-logits", help="(internal, under --llamacpp-python)")
    ll.add_argument("--gguf", required=True)
    ll.add_argument("--ids", required=True)
    ll.add_argument("--prefill", type=int, required=True)
    ll.add_argument("--out", required=True)
    ll.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    if args.command == "llama-logits":
        llama_logits(args)
        return
    sys.path.insert(0, str(HERE.parents[1]))
    try:
        if args.command == "parity":
            parity(args)
        else:
            e2b(args)
    except LlamaCppGemma4Error as err:
        raise SystemExit(f"error: {err}") from err


if __name__ == "__main__":
    main()
