// The IEEE half type of the kernel tests: GCC's C++ front end has _Float16 on x86-64 but, before
// GCC 13, not on aarch64 (Debian bookworm's cross compiler is GCC 12), whose half type is __fp16.
#pragma once

#if defined(__aarch64__)
using Half = __fp16;
#else
using Half = _Float16;
#endif
