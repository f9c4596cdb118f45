"""A head tied to its 4-bit token table, stored once (``rne_tools.export.tied_head``): the op's
definition, the program that reads one packed table for lookups and logits on ExecuTorch's
runtime with the runner's kernel (``build/host/librne_kernels.so``), and the error without it."""

import subprocess
import sys

import pytest
import torch
from torch import nn

from rne_tools.checks.runner import RUNNER_KERNELS
from rne_tools.export import quantize, tied_head
from rne_tools.paths import REPO_ROOT

needs_kernels = pytest.mark.skipif(
    not RUNNER_KERNELS.is_file(),
    reason=f"{RUNNER_KERNELS} is built by tools/build_binaries.py --platform host",
)


class _TiedLm(nn.Module):
    """The tied pair as Gemma 4 and SmolLM2 use it: rows looked up, logits of the last row."""

    def __init__(self, vocab: int = 300, dim: int = 256) -> None:
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab, dim)
        self.output = nn.Linear(dim, vocab, bias=False)
        self.output.weight = self.tok_embeddings.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.tok_embeddings(tokens)
        # No quantized linear between them: XNNPACK rounds its activations unlike eager.
        return self.output(torch.tanh(h)[:, -1] * 3.0).float()


def _double_reference(x: torch.Tensor, packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """The op's definition spelled out in float64, value by value."""
    vocab, width = packed.shape[0], 2 * packed.shape[1]
    group = width // scales.shape[1]
    q = torch.empty(vocab, width, dtype=torch.float64)
    q[:, 0::2] = (packed >> 4).double() - 8
    q[:, 1::2] = (packed & 15).double() - 8
    weight = q * scales.double().repeat_interleave(group, dim=1)
    xq = torch.empty_like(x, dtype=torch.float64)
    for b in range(0, width, tied_head.BLOCK):
        block = x[..., b : b + tied_head.BLOCK]
        s = block.abs().amax(-1, keepdim=True) / 127
        xq[..., b : b + tied_head.BLOCK] = torch.where(s > 0, torch.round(block / s), 0.0).double() * s
    return xq @ weight.T


@pytest.mark.parametrize("scale_dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("group", [32, 128])
def test_op_reference_is_its_definition(scale_dtype, group):
    g = torch.Generator().manual_seed(group)
    vocab, width = 1000, 256
    packed = torch.randint(0, 256, (vocab, width // 2), dtype=torch.uint8, generator=g)
    scales = (torch.rand(vocab, width // group, generator=g) * 0.1 + 0.01).to(scale_dtype)
    x = torch.randn(3, width, generator=g) * 4
    x[1, :32] = 0  # a block of zeros has scale 0 and contributes nothing
    got = torch.ops.rne.tied_head_4bit(x, packed, scales)
    expected = _double_reference(x, packed, scales)
    assert got.shape == (3, vocab) and got.dtype == torch.float32
    torch.testing.assert_close(got.double(), expected, rtol=1e-5, atol=1e-4)


def test_packing_is_the_lookup_kernels_layout():
    """The packed table's rows, unpacked by ExecuTorch's own ``embedding_4bit`` reference, are
    the quantized table's rows."""
    torch.manual_seed(0)
    model = _TiedLm()
    quantize.quantize_8da4w(model, embedding_quantization="4w", tie_head=True,
                            table_group_size=128)
    assert isinstance(model.tok_embeddings, tied_head.PackedTable4bit)
    assert isinstance(model.output, tied_head.TiedHead4bit)
    table = model.tok_embeddings
    tokens = torch.tensor([[5, 299, 0, 7]])
    # fp32 scales: that reference computes rows in its scales' dtype (the kernel in float32).
    kernel_rows = torch.ops.quantized_decomposed.embedding_4bit.dtype(
        table.packed, table.scales.float(), None, -8, 7, tokens, dtype=torch.float32
    )
    assert torch.equal(table(tokens), kernel_rows)


def test_a_table_cast_for_a_low_precision_reference_answers_in_it():
    """Vulkan's export check runs the eager model cast to fp16: the packed table's rows must
    follow, or the next fp16 linear refuses float32 rows."""
    torch.manual_seed(0)
    model = _TiedLm()
    quantize.quantize_8da4w(model, embedding_quantization="4w", tie_head=True)
    tokens = torch.tensor([[5, 299]])
    rows = model.tok_embeddings(tokens)
    assert rows.dtype == torch.float32
    half = model.to(torch.float16).tok_embeddings(tokens)
    assert half.dtype == torch.float16
    torch.testing.assert_close(half.float(), rows, rtol=1e-3, atol=1e-3)


def test_a_table_the_head_shares_is_grouped_like_the_linears():
    """``table_group_size`` groups the tables read by lookups alone, where it divides their width;
    the head's table is a linear's weight, so it keeps the linears' group (the head's precision)."""
    torch.manual_seed(0)
    model = _TiedLm()
    model.side = nn.Embedding(300, 256)
    quantize.quantize_8da4w(model, embedding_quantization="4w", tie_head=True,
                            table_group_size=128)
    assert model.tok_embeddings.scales.shape == (300, 256 // 32)
    assert model.side.weight.scale.shape == (300, 256 // 128)
    # A table narrower than the group (a test model's per-layer table) takes the linears' group.
    narrow = _TiedLm()
    narrow.side = nn.Embedding(300, 64)
    quantize.quantize_8da4w(narrow, embedding_quantization="4w", table_group_size=128)
    assert narrow.side.weight.scale.shape == (300, 64 // 32)


def test_untied_or_eight_bit_tables_keep_their_head():
    torch.manual_seed(0)
    untied = _TiedLm()
    untied.output.weight = nn.Parameter(untied.output.weight.detach().clone())
    quantize.quantize_8da4w(untied, embedding_quantization="4w", tie_head=True)
    assert isinstance(untied.output, nn.Linear)
    eight_bit = _TiedLm()
    quantize.quantize_8da4w(eight_bit, embedding_quantization="8w", tie_head=True)
    assert isinstance(eight_bit.output, nn.Linear)


def _lower(model: nn.Module, tokens: torch.Tensor) -> bytes:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower

    from rne_tools.export.backends.xnnpack import XnnpackBackend

    edge = to_edge_transform_and_lower(
        torch.export.export(model, (tokens,), strict=False),
        partitioner=[XnnpackPartitioner()],
        compile_config=XnnpackBackend().compile_config(),
    )
    quantize.spell_out_lookup_dtypes(edge.exported_program().graph_module)
    program = edge.to_executorch(ExecutorchBackendConfig(do_quant_fusion_and_const_prop=True))
    return program.buffer


@needs_kernels
def test_program_stores_the_table_once_and_computes_eagers_logits(tmp_path):
    from rne_tools.checks.runner import _load_runtime_ops

    _load_runtime_ops()
    from executorch.runtime import Runtime

    tokens = torch.tensor([[3, 17, 250, 9]])
    sizes = {}
    for tie in (False, True):
        torch.manual_seed(0)
        model = _TiedLm(vocab=4096, dim=256)
        quantize.quantize_8da4w(model, embedding_quantization="4w", tie_head=tie)
        with torch.no_grad():
            eager = model(tokens)
        buffer = _lower(model, tokens)
        sizes[tie] = len(buffer)
        got = Runtime.get().load_program(buffer).load_method("forward").execute([tokens])[0]
        if tie:
            # Float summation order only: the op rounds the activations as eager does.
            torch.testing.assert_close(got, eager, rtol=1e-4, atol=1e-4 * float(eager.abs().max()))
    # The second copy of the table was 4,096 x 256 four-bit values with a scale per 32.
    second_copy = 4096 * 256 // 2 + 4096 * 256 // 32 * 2
    assert sizes[False] - sizes[True] >= 0.9 * second_copy, sizes


def test_program_without_the_runner_kernels_says_how_to_build_them(tmp_path):
    """A tied-head program on a Python runtime without librne_kernels.so: a clear error naming
    the build command, not an opaque OperatorMissing."""
    torch.manual_seed(0)
    model = _TiedLm()
    quantize.quantize_8da4w(model, embedding_quantization="4w", tie_head=True)
    pte = tmp_path / "tied.pte"
    pte.write_bytes(_lower(model, torch.tensor([[1, 2]])))
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from rne_tools.checks import runner\n"
        "runner.RUNNER_KERNELS = Path('/nonexistent/librne_kernels.so')\n"
        "from rne_tools.errors import VerificationError\n"
        "runner._load_runtime_ops()\n"
        "from executorch.runtime import Runtime\n"
        f"program = Runtime.get().load_program({str(pte)!r})\n"
        "try:\n"
        f"    runner.load_forward(program, Path({str(pte)!r}))\n"
        "except VerificationError as e:\n"
        "    print('ERROR:', e)\n"
        "    sys.exit(3)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO_ROOT,
        env={"PYTHONPATH": str(REPO_ROOT / "tools"), "PATH": "/usr/bin:/bin"}, timeout=300,
    )
    assert done.returncode == 3, done.stdout + done.stderr[-2000:]
    assert "tools/build_binaries.py --platform host" in done.stdout
