# rne_executorch from a from-source ExecuTorch build installed at RNE_EXECUTORCH_PREFIX
# (tools/build_binaries.py --platform linux). The installed package names its targets without a
# namespace (executorch, xnnpack_backend, ...). Every backend and kernel library the build has is
# linked: their static registrations are kept by the whole-archive link options ExecuTorch's own
# package puts on them, except custom_ops (see below).
find_package(executorch CONFIG REQUIRED PATHS "${RNE_EXECUTORCH_PREFIX}" NO_DEFAULT_PATH)
foreach(_required executorch extension_module_static extension_tensor)
  if(NOT TARGET ${_required})
    message(FATAL_ERROR "The ExecuTorch build at ${RNE_EXECUTORCH_PREFIX} lacks ${_required}; "
                        "rebuild it with tools/build_binaries.py --platform linux")
  endif()
endforeach()

add_library(rne_executorch INTERFACE)
target_link_libraries(rne_executorch INTERFACE executorch extension_module_static extension_tensor)
add_library(executorch::runtime ALIAS rne_executorch)  # the name the runner links
# The delegates' targets come from model-registry/backends.yaml (tools/build_binaries.py derives
# RNE_EXECUTORCH_DELEGATES from each backend's whole archive), so a new backend needs no edit here.
if(NOT DEFINED RNE_EXECUTORCH_DELEGATES)
  message(FATAL_ERROR "RNE_EXECUTORCH_DELEGATES is not set: configure a from-source build through "
                      "tools/build_binaries.py --platform linux, which derives it from "
                      "model-registry/backends.yaml")
endif()
set(RNE_EXECUTORCH_COMPONENTS "")
foreach(_component optimized_native_cpu_ops_lib quantized_ops_lib ${RNE_EXECUTORCH_DELEGATES})
  if(TARGET ${_component})
    target_link_libraries(rne_executorch INTERFACE ${_component})
    list(APPEND RNE_EXECUTORCH_COMPONENTS ${_component})
  endif()
endforeach()
# ExecuTorch's LLM custom ops (llama::custom_sdpa.out, llama::update_cache.out, ...) register from
# static initializers, and nothing else references libcustom_ops.a, but its package target carries
# no whole-archive option (ExecuTorch's own llama runner adds it itself): linked plainly, the
# linker drops every object and an LLM export fails to load with OperatorMissing.
if(TARGET custom_ops)
  target_link_libraries(rne_executorch INTERFACE "$<LINK_LIBRARY:WHOLE_ARCHIVE,custom_ops>")
  list(APPEND RNE_EXECUTORCH_COMPONENTS custom_ops)
endif()
if(TARGET mlxdelegate)
  # ExecuTorch's package declares libmlx's link dependencies for Apple only; on Linux MLX's CPU
  # backend needs the system BLAS/LAPACK (third-party/patches/0001-mlx-cpu-backend-off-apple).
  target_link_libraries(rne_executorch INTERFACE extension_llm_cache mlx)
  if(NOT APPLE)
    find_package(BLAS REQUIRED)
    find_package(LAPACK REQUIRED)
    target_link_libraries(rne_executorch INTERFACE ${LAPACK_LIBRARIES} ${BLAS_LIBRARIES})
  endif()
endif()
message(STATUS "rne_executorch: ExecuTorch from source at ${RNE_EXECUTORCH_PREFIX} "
               "(${RNE_EXECUTORCH_COMPONENTS})")
