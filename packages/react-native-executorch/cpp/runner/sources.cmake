# The source files of cpp/runner's parser libraries, named once for runner/CMakeLists.txt and for
# cpp/fuzz (which compiles the same parsers alone, under sanitizers). Paths are relative to
# cpp/runner.
# rne_grammar: JSON Schema, GBNF and regex -> token constraints; no ExecuTorch dependency.
set(RNE_GRAMMAR_SOURCES
  src/gbnf.cpp
  src/gbnf_constraint.cpp
  src/json_constraint.cpp
  src/json_grammar.cpp
  src/json_schema.cpp
  src/regex.cpp
  src/token_trie.cpp)
# The .pte program check and the error type of rne_runner_core: no ExecuTorch dependency either.
set(RNE_PROGRAM_CHECK_SOURCES
  src/program_check.cpp
  src/result.cpp)
