# rne_executorch from the C++ SDK inside the Python `executorch` wheel in the repo's .venv.
# Locate the wheel's CMake package unless the caller pointed at one (-Dexecutorch_DIR=...).
if(NOT executorch_DIR)
  execute_process(
    COMMAND "${RNE_PYTHON}" -c
            "import executorch; print(list(executorch.__path__)[0])"
    OUTPUT_VARIABLE RNE_EXECUTORCH_ROOT
    OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE _rne_py_result
    ERROR_QUIET)
  if(NOT _rne_py_result EQUAL 0)
    message(FATAL_ERROR
      "Cannot import executorch with ${RNE_PYTHON}. Run scripts/setup.sh to create .venv, or "
      "pass -DRNE_PYTHON=<python with executorch> or -Dexecutorch_DIR=<dir of executorch-config.cmake>.")
  endif()
  set(executorch_DIR "${RNE_EXECUTORCH_ROOT}/lib/cmake/executorch")
endif()
find_package(executorch CONFIG REQUIRED)
foreach(_component kernels_optimized backend_xnnpack threadpool)
  if(NOT TARGET executorch::${_component})
    message(FATAL_ERROR "The executorch wheel at ${executorch_DIR} lacks executorch::${_component}")
  endif()
endforeach()

# Everything ExecuTorch a host binary needs to run our .pte files: the runtime (Module API),
# CPU kernels, XNNPACK, and the quantized kernels for 8da4w's quantized embeddings. Linked into
# executables only (the registration libraries must be kept by the linker).
add_library(rne_executorch INTERFACE)
target_link_libraries(rne_executorch INTERFACE executorch::runtime executorch::kernels_optimized
                                               executorch::backend_xnnpack)
if(TARGET executorch::kernels_quantized)
  target_link_libraries(rne_executorch INTERFACE executorch::kernels_quantized)
endif()
# The wheel has no C++ library with the LLM custom ops (llama::custom_sdpa, update_cache) our
# XNNPACK exports call, so the host build brings its own (host/llm_custom_ops.cpp, whose
# attention is kernels/attention_span.h, the source build's too). The object file goes into
# every executable: nothing references it, so an archive member would be dropped.
add_library(rne_host_llm_ops OBJECT host/llm_custom_ops.cpp)
target_include_directories(rne_host_llm_ops PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/kernels)
# Host-only (the binaries run where they are built): the attention loops vectorise for this
# CPU's widest vector unit instead of the x86-64 baseline's SSE2. A cross build (linux-arm64)
# keeps its target's baseline: the build machine's CPU says nothing about the phone's.
include(CheckCXXCompilerFlag)
if(NOT CMAKE_CROSSCOMPILING)
  check_cxx_compiler_flag(-march=native RNE_HAS_MARCH_NATIVE)
endif()
if(RNE_HAS_MARCH_NATIVE)
  target_compile_options(rne_host_llm_ops PRIVATE -march=native -O3)
endif()
# The attention items run on ExecuTorch's shared thread pool (the one XNNPACK uses).
target_link_libraries(rne_host_llm_ops PRIVATE executorch::runtime executorch::threadpool)
target_sources(rne_executorch INTERFACE $<TARGET_OBJECTS:rne_host_llm_ops>)
# An object library's own link dependencies do not reach its consumers: name the pool here.
target_link_libraries(rne_executorch INTERFACE executorch::threadpool)
