# The sources of rne_grammar, named once for grammar/CMakeLists.txt and for cpp/fuzz (which
# compiles the same parsers alone, under sanitizers). Paths are relative to cpp/grammar.
set(RNE_GRAMMAR_SOURCES
  src/gbnf.cpp
  src/gbnf_constraint.cpp
  src/json_constraint.cpp
  src/json_grammar.cpp
  src/json_schema.cpp
  src/regex.cpp
  src/token_trie.cpp)
