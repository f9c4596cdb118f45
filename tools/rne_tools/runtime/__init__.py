"""Host-side helpers for running exported models: the chat tokenizer (``text``) and the filters
that keep library noise off the terminal (``quiet``, ``native_stderr``). The runners that execute
a ``.pte`` are checks (``rne_tools.checks.runner``, ``rne_tools.checks.cpp_runtime``)."""
