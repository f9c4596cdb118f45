# rne_executorch from one shared libexecutorch.so (cpp/shared_library: the recipe of the Android
# binary, built on Linux from the same source build) with the headers of that build's install
# prefix, RNE_EXECUTORCH_PREFIX. Nothing else of ExecuTorch is linked, so a symbol the library
# does not export fails the link. The include path and define are those ExecuTorch's own
# package puts on executorch_core (its c10 copy needs them), set here directly: the package
# refuses to load unless every archive it lists is installed, and none is linked here.
if(NOT EXISTS "${RNE_EXECUTORCH_SHARED_LIBRARY}")
  message(FATAL_ERROR "RNE_EXECUTORCH_SHARED_LIBRARY=${RNE_EXECUTORCH_SHARED_LIBRARY} does not "
                      "exist; link it first (tools/rne_tools/binaries/shared_library.py)")
endif()
set(_rne_et_include "${RNE_EXECUTORCH_PREFIX}/include")
if(NOT EXISTS "${_rne_et_include}/executorch/extension/module/module.h")
  message(FATAL_ERROR "${_rne_et_include} has no ExecuTorch headers; install the source build")
endif()
add_library(rne_executorch INTERFACE)
target_include_directories(rne_executorch INTERFACE
  "${_rne_et_include}" "${_rne_et_include}/executorch/runtime/core/portable_type/c10")
target_compile_definitions(rne_executorch INTERFACE C10_USING_CUSTOM_GENERATED_MACROS)
target_link_libraries(rne_executorch INTERFACE "${RNE_EXECUTORCH_SHARED_LIBRARY}")
add_library(executorch::runtime ALIAS rne_executorch)  # the name the runner links
message(STATUS "rne_executorch: ${RNE_EXECUTORCH_SHARED_LIBRARY} (headers: ${_rne_et_include})")
