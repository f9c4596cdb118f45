# Included right after KleidiAI's project() call in the arm64 source build of ExecuTorch
# (CMAKE_PROJECT_KleidiAI_INCLUDE, tools/rne_tools/binaries/platforms.py). GCC 12, Debian
# bookworm's aarch64 cross compiler, stops with an internal compiler error (vect_transform_reduction)
# when its loop vectoriser meets the bf16 reduction in kai_lhs_quant_pack_qai8dxp_bf16_neon.c.
# KleidiAI's kernels are written with NEON intrinsics, so its C sources are built without that
# pass; nothing else of the build changes. The NDK's clang (Android) never reads this file.
if(CMAKE_C_COMPILER_ID STREQUAL "GNU" AND CMAKE_C_COMPILER_VERSION VERSION_LESS 13)
  add_compile_options($<$<COMPILE_LANGUAGE:C>:-fno-tree-loop-vectorize>)
endif()
