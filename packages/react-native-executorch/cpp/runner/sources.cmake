# The sources of rne_runner_core with no ExecuTorch dependency (the .pte program check and the
# error type), named once for runner/CMakeLists.txt and for cpp/fuzz (which compiles them alone,
# under sanitizers). Paths are relative to cpp/runner.
set(RNE_PROGRAM_CHECK_SOURCES
  src/program_check.cpp
  src/result.cpp)
