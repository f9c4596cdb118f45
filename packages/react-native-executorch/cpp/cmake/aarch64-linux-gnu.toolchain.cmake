# Cross-compile for 64-bit Arm Linux with Debian's toolchain (crossbuild-essential-arm64), and
# run what the build and ctest execute through qemu-user (qemu-user), so the arm64 binaries are
# tested on an x86-64 machine: tools/build_binaries.py --platform linux-arm64, docs/arm64.md.
# The CPU qemu emulates is picked at run time with QEMU_CPU (max: the ISA extensions current
# phones have, dotprod/i8mm/SVE; cortex-a53: the ARMv8.0 baseline).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(RNE_CROSS_TRIPLE aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${RNE_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${RNE_CROSS_TRIPLE}-g++)

# Debian's multiarch cross root: the target's libc, libstdc++ and loader.
set(RNE_CROSS_SYSROOT /usr/${RNE_CROSS_TRIPLE} CACHE PATH "Root of the aarch64 runtime libraries")
set(CMAKE_FIND_ROOT_PATH ${RNE_CROSS_SYSROOT})
# Programs (python, node, the exporter) are the build machine's; libraries the target's, except
# packages named by an explicit <Package>_DIR (the ExecuTorch SDK, GoogleTest). Headers are
# looked up in the target's root first, then the build machine's: what is found there are
# header-only libraries (stb_image), the same for every CPU.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

find_program(RNE_QEMU_AARCH64 qemu-aarch64)
if(RNE_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR "${RNE_QEMU_AARCH64};-L;${RNE_CROSS_SYSROOT}")
endif()
