"""The export cache keys a program by what determines it (``rne_tools.export.cache``).

- A pure refactor (a model helper, a lowering helper and the encoders' bias split moved to new
  modules, locals renamed) changes the recipe keys (the code's text) but no program key, the
  encoders' included (``rne_tools.encoders.export``): nothing is exported again. The lowering is
  keyed by its values (``rne_tools.export.lowering``), so building it another way re-keys
  nothing either, while another value, another ``lower`` or another backend hook re-keys.
- A change to one transform (Gemma's final softcap written as a multiplication; the encoders'
  split bias added before the linear instead of after) changes exactly the program keys of the
  exports whose graphs it changes: Gemma's, and the quantized audio encoder's (only a quantized
  encoder splits its biases, and only the audio tower has a biased linear).
- In the cache: a request whose recipe is new but whose program exists reuses it without
  lowering; a changed verification re-verifies the program instead of exporting it again, and
  the same verification in a checkout at another path does not.

The key tests run the tooling from edited copies of ``tools/rne_tools`` in subprocesses, as a
refactoring commit would leave the tree.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rne_tools.export import cache, pipeline
from rne_tools.export.plan import plan_export

REPO = Path(__file__).resolve().parents[2]
TOOLS = REPO / "tools"
TINY = {"random_config": "tiny", "max_context": 64, "max_chunk": 16}
REQUESTS = {
    "llama": ("smollm2_135m", "xnnpack", "fp32", TINY),
    "gemma": ("gemma4_e2b", "xnnpack", "fp32", {**TINY, "max_chunk": 5}),
}
# The smallest encoder exports (kind, config, the encoder's option, quantization).
ENCODERS = {
    "vision": ("vision", "tiny", {"max_soft_tokens": 70}, "fp32"),
    "audio": ("audio", "tiny", {"max_seconds": 1}, "fp32"),
    "audio_8w": ("audio", "tiny", {"max_seconds": 1}, "8w"),
}

KEYS_SCRIPT = """
import json, sys
from rne_tools.runtime.quiet import configure_python_noise
configure_python_noise()
from rne_tools.export import cache
from rne_tools.export.pipeline import trace_export
from rne_tools.export.plan import plan_export
from rne_tools.encoders import audio_export, export
out = {}
for name, (model, backend, quant, request) in json.loads(sys.argv[1]).items():
    plan = plan_export(model, backend, quant, **request)
    traced = trace_export(plan, progress=False)
    out[name] = {"recipe": cache.recipe_key(plan), "program": cache.program_key(traced),
                 "checks": cache.check_fingerprint(plan)}
for name, (kind, config, options, quant) in json.loads(sys.argv[2]).items():
    encoder = export.VISION if kind == "vision" else audio_export.AUDIO
    _, recipe = export.encoder_recipe_key(encoder, config, options, quantization=quant, seed=0)
    traced = encoder.trace(config, quantization=quant, seed=0, **options)
    out[name] = {"recipe": recipe, "program": export.encoder_program_key(traced),
                 "checks": export.code_fingerprint(encoder.verifier)}
print(json.dumps(out))
"""


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{path.name} changed: the refactoring below no longer applies"
    path.write_text(text.replace(old, new, 1))


def _keys(tools: Path, hash_seed: str) -> dict[str, dict[str, str]]:
    env = {**os.environ, "PYTHONPATH": str(tools), "PYTHONDONTWRITEBYTECODE": "1",
           "PYTHONHASHSEED": hash_seed}
    proc = subprocess.run(
        [sys.executable, "-c", KEYS_SCRIPT, json.dumps(REQUESTS), json.dumps(ENCODERS)], env=env,
        capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _copy_tools(tmp_path: Path, name: str) -> Path:
    """A checkout whose ``tools/rne_tools`` is a copy to edit; the rest links to this one."""
    root = tmp_path / name
    root.mkdir()
    for entry in REPO.iterdir():
        if entry.name not in ("tools", ".git"):
            (root / entry.name).symlink_to(entry)
    tools = root / "tools"
    shutil.copytree(TOOLS / "rne_tools", tools / "rne_tools",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return tools


def _refactor(tools: Path) -> None:
    """Move a model helper, a lowering helper and the encoders' bias split to modules of their
    own, renaming locals, and build the text models' lowering another way."""
    models, export = tools / "rne_tools" / "models", tools / "rne_tools" / "export"
    encoders = tools / "rne_tools" / "encoders"
    text = (encoders / "export.py").read_text()
    start = text.index("class BiasAfterLinear(")
    end = text.index("\ndef quantized_reference(")
    (encoders / "bias_split.py").write_text("import torch\n\n\n" + text[start:end].replace(
        "targets", "found").replace("for name, linear in", "for path, lin in").replace(
        "name.rpartition", "path.rpartition").replace("BiasAfterLinear(linear))",
                                                      "BiasAfterLinear(lin))"))
    (encoders / "export.py").write_text(text[:start] + text[end:].replace(
        "def quantized_reference(",
        "from rne_tools.encoders.bias_split import _split_biases  # noqa: E402\n\n\n"
        "def quantized_reference(", 1))
    _edit(models / "layers.py", '''def apply_rope(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, rotate_half: nn.Module
) -> torch.Tensor:
    """x: [1, H, T, D]; cos/sin: [T, D]."""
    return x * cos + rotate_half(x) * sin
''', "from rne_tools.models.rope_math import apply_rope  # noqa: E402\n")
    (models / "rope_math.py").write_text('''import torch
from torch import nn


def apply_rope(
    hidden: torch.Tensor, c: torch.Tensor, s: torch.Tensor, rotate: nn.Module
) -> torch.Tensor:
    return hidden * c + rotate(hidden) * s
''')
    quantize = (export / "quantize.py").read_text()
    start = quantize.index("def spell_out_lookup_dtypes(")
    end = quantize.index("\ndef ", start + 1)
    helper = quantize[start:end].replace("changed", "count")
    (export / "quantize.py").write_text(quantize[:start] + quantize[end:])
    (export / "lookup_dtypes.py").write_text("import torch\n\n\n" + helper)
    _edit(export / "pipeline.py", "from rne_tools.export.quantize import spell_out_lookup_dtypes",
          "from rne_tools.export.lookup_dtypes import spell_out_lookup_dtypes")
    # The text models' lowering built another way: its emit config made by a helper of its own
    # module, the fields in another order, locals renamed. The values are the same.
    pipeline = (export / "pipeline.py").read_text()
    start = pipeline.index("def plan_lowering(")
    end = pipeline.index("\ndef ", start + 1)
    (export / "pipeline.py").write_text(pipeline[:start] + """def plan_lowering(plan):
    from rne_tools.export.emit_config import emit_config

    opts = plan.options
    impl = plan.backend
    return Lowering(
        compile_config=impl.compile_config(),
        partitioners=impl.partitioners(opts),
        emit_config=emit_config(shared=opts.verify_tokens > 0),
        edge_passes=(spell_out_lookup_dtypes,),
        transform_passes=impl.transform_passes(opts),
    )

""" + pipeline[end:])
    (export / "emit_config.py").write_text("""def emit_config(shared):
    from executorch.exir import ExecutorchBackendConfig
    from executorch.exir.passes import MemoryPlanningPass
    from executorch.exir.passes.sym_shape_eval_pass import ConstraintBasedSymShapeEvalPass

    planning = MemoryPlanningPass(share_mutable_buffers=shared, alloc_graph_input=False)
    return ExecutorchBackendConfig(
        sym_shape_eval_pass=ConstraintBasedSymShapeEvalPass(),
        memory_planning_pass=planning,
        do_quant_fusion_and_const_prop=True,
        emit_mutable_buffer_names=True,
        extract_delegate_segments=True,
    )
""")


# Two string-hashing seeds under which Python orders a set of Gemma's layer kinds differently:
# a program key must not depend on the process it was computed in.
HASH_SEEDS = ("0", "1")


@pytest.fixture(scope="module")
def base_keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str]]:
    return _keys(_copy_tools(tmp_path_factory.mktemp("base"), "tools"), HASH_SEEDS[0])


def test_a_refactor_keeps_every_program_key(tmp_path, base_keys):
    tools = _copy_tools(tmp_path, "tools")
    _refactor(tools)
    after = _keys(tools, HASH_SEEDS[1])
    for name in [*REQUESTS, *ENCODERS]:
        assert after[name]["recipe"] != base_keys[name]["recipe"], name  # the text did change
        assert after[name]["program"] == base_keys[name]["program"], name
        # The two trees are checkouts at different paths: the verdict's key must not see that
        # (the verification code names build outputs by their path in the checkout).
        assert after[name]["checks"] == base_keys[name]["checks"], name


def test_a_transform_change_re_keys_only_the_graphs_it_changes(tmp_path, base_keys):
    tools = _copy_tools(tmp_path, "tools")
    # Gemma's final softcap, the same function written as a multiplication: another graph.
    _edit(tools / "rne_tools" / "models" / "layers.py",
          "return torch.tanh(x / self.cap) * self.cap",
          "return torch.tanh(x * (1.0 / self.cap)) * self.cap")
    # The encoders' split bias, added on the other side: another graph, for quantized encoders.
    _edit(tools / "rne_tools" / "encoders" / "export.py",
          "return self.linear(x) + self.bias", "return self.bias + self.linear(x)")
    after = _keys(tools, HASH_SEEDS[1])
    assert after["audio_8w"]["program"] != base_keys["audio_8w"]["program"]
    # The float encoders run the same edited file and keep their programs.
    for name in ("vision", "audio"):
        assert after[name]["recipe"] != base_keys[name]["recipe"], name
        assert after[name]["program"] == base_keys[name]["program"], name
    assert after["gemma"]["program"] != base_keys["gemma"]["program"]
    # Llama has no softcap: its shared file changed, its program did not.
    assert after["llama"]["recipe"] != base_keys["llama"]["recipe"]
    assert after["llama"]["program"] == base_keys["llama"]["program"]


def test_a_lowering_change_re_keys_the_program(monkeypatch):
    """A changed lowering value, a changed ``lower`` and a changed backend hook each re-key."""
    from dataclasses import replace

    from executorch.exir import ExecutorchBackendConfig
    from executorch.exir.passes import MemoryPlanningPass

    from rne_tools.export import lowering

    plan = plan_export("smollm2_135m", "xnnpack", "fp32", **TINY)
    before = cache.plan_lowering_fingerprint(plan)
    assert cache.plan_lowering_fingerprint(plan) == before  # built afresh, the same values
    built = pipeline.plan_lowering

    def lowering_with(**emit: object):
        return lambda p: replace(built(p), emit_config=ExecutorchBackendConfig(**emit))

    # One field of one pass: the graph's inputs planned into the program's memory.
    same = {"extract_delegate_segments": True, "emit_mutable_buffer_names": True,
            "do_quant_fusion_and_const_prop": True,
            "sym_shape_eval_pass": built(plan).emit_config.sym_shape_eval_pass}
    with monkeypatch.context() as m:
        m.setattr(pipeline, "plan_lowering", lowering_with(
            memory_planning_pass=MemoryPlanningPass(alloc_graph_input=False), **same))
        assert cache.plan_lowering_fingerprint(plan) == before
        m.setattr(pipeline, "plan_lowering", lowering_with(
            memory_planning_pass=MemoryPlanningPass(alloc_graph_input=True), **same))
        assert cache.plan_lowering_fingerprint(plan) != before
    with monkeypatch.context() as m:
        original = lowering.lower

        def lower(methods, how, constants):  # another lowering than the real one
            return original(methods, how, {**constants, "extra": 1})

        m.setattr(lowering, "lower", lower)
        assert cache.plan_lowering_fingerprint(plan) != before
    with monkeypatch.context() as m:
        backend = type(plan.backend)
        hook = backend.partitioners

        def partitioners(self, options):  # the same values, another side effect
            print("patched")
            return hook(self, options)

        m.setattr(backend, "partitioners", partitioners)
        assert cache.plan_lowering_fingerprint(plan) != before
    assert cache.plan_lowering_fingerprint(plan) == before


def test_the_cache_reuses_a_program_and_re_verifies_on_new_checks(
    tmp_path, monkeypatch, tiny_llama_fp32
):
    plan = plan_export("smollm2_135m", "xnnpack", "fp32", **TINY)
    key = tiny_llama_fp32.report["program_key"]
    assert tiny_llama_fp32.pte_path.parent.name == key
    # A cache holding that program under no recipe of this tree (as after a refactor).
    shutil.copytree(tiny_llama_fp32.pte_path.parent, tmp_path / "exports" / key)
    assert cache.find_cached_export(plan, cache_dir=tmp_path) is None

    def no_export(*args, **kwargs):
        raise AssertionError("exported again")

    monkeypatch.setattr(pipeline, "finish_export", no_export)
    reused = cache.run_cached_export(plan, cache_dir=tmp_path, progress=False)
    assert reused.pte_path == tmp_path / "exports" / key / tiny_llama_fp32.pte_path.name
    assert reused.pte_path.read_bytes() == tiny_llama_fp32.pte_path.read_bytes()
    assert (tmp_path / "exports" / "recipes" / cache.recipe_key(plan)).read_text().strip() == key
    assert cache.find_cached_export(plan, cache_dir=tmp_path) is not None

    # New verification code: the same program verified again, its report rewritten.
    calls = []
    real_verify = cache.verify_program

    def verify(*args, **kwargs):
        calls.append(args[0])
        return real_verify(*args, **kwargs)

    monkeypatch.setattr(cache, "verify_program", verify)
    monkeypatch.setattr(cache, "check_fingerprint", lambda p: "new-checks")
    checked = cache.run_cached_export(plan, cache_dir=tmp_path, progress=False)
    assert calls == [reused.pte_path]
    assert checked.report["check_fingerprint"] == "new-checks"
    assert checked.report["verification"]["status"] in ("passed", "executed")
    assert json.loads(reused.report_path.read_text())["check_fingerprint"] == "new-checks"


def test_the_recipe_key_covers_only_the_code_an_export_runs(monkeypatch):
    """Editing Gemma 4 or the Vulkan backend keeps the Llama XNNPACK exports' recipes (found
    without tracing); editing shared export or verification code changes every recipe."""

    llama = plan_export("smollm2_135m", "xnnpack", "fp32", random_config="tiny", max_context=64,
                        max_chunk=16)
    gemma = plan_export("gemma4_e2b", "vulkan", "fp16", random_config="tiny", max_context=64,
                        max_chunk=5)
    before = cache.recipe_key(llama), cache.recipe_key(gemma)
    path_type = type(cache._PACKAGE_ROOT)
    original_read = path_type.read_text

    def edited(path, *args, **kwargs):
        """The file's text, plus a statement for the files in ``edited.paths``."""
        text = original_read(path, *args, **kwargs)
        if not path.is_relative_to(cache._PACKAGE_ROOT):
            return text
        rel = path.relative_to(cache._PACKAGE_ROOT).as_posix()
        return text + f"\n_EDITED = {rel!r}\n" if rel in edited.paths else text

    edited.paths = {"models/gemma4.py", "export/backends/vulkan_ops.py"}
    monkeypatch.setattr(path_type, "read_text", edited)
    assert cache.recipe_key(llama) == before[0]
    assert cache.recipe_key(gemma) != before[1]
    # Checks run on finished exports only, and terminal filters, keep every key.
    edited.paths = {"checks/parity.py", "checks/quality.py", "runtime/quiet.py"}
    assert cache.recipe_key(llama) == before[0]
    edited.paths = {"export/pipeline.py"}
    assert cache.recipe_key(llama) != before[0]
    # The export's own verification decides whether a program is kept.
    edited.paths = {"checks/verify.py"}
    assert cache.recipe_key(llama) != before[0]
