"""The one recipe for our ``libexecutorch.so``: which of ExecuTorch's static libraries go in.

Android stages it per ABI (``third-party/android/<abi>/libexecutorch.so``); Linux builds it from
the same lists, which is how this machine proves the recipe (``tests/test_native_packaging_so.py``).
The link itself (version script, SONAME, ``--no-undefined``) is the CMake project
``packages/react-native-executorch/cpp/shared_library``; this module says what it links.

Paths are relative to an ExecuTorch CMake build directory made with the Ninja generator (the
same layout on Android and Linux).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rne_tools.backend_catalog import load_catalog

# Relative to the repository root, like every step's working directory.
PROJECT = "packages/react-native-executorch/cpp/shared_library"
EXPORTS_MAP = f"{PROJECT}/exports.map"


@dataclass(frozen=True)
class Component:
    """Archives of one part of ExecuTorch.

    ``whole`` register kernels or backends from static initializers, so they are linked whole
    (otherwise the linker drops those objects and programs fail with "Missing operator" or
    "backend not found"); ``linked`` are taken as needed.
    """

    whole: tuple[str, ...]
    linked: tuple[str, ...]


COMPONENTS: dict[str, Component] = {
    # The API our runner calls is linked whole too: nothing inside the library references
    # Module or the tensor helpers, and the linker only exports what it pulled in.
    "runtime": Component(
        whole=(
            "libexecutorch.a",
            "libexecutorch_core.a",
            "extension/module/libextension_module_static.a",
            "extension/tensor/libextension_tensor.a",
            "extension/data_loader/libextension_data_loader.a",
            "extension/flat_tensor/libextension_flat_tensor.a",
            "extension/named_data_map/libextension_named_data_map.a",
        ),
        linked=(
            "extension/threadpool/libextension_threadpool.a",
            "backends/xnnpack/third-party/cpuinfo/libcpuinfo.a",
            "backends/xnnpack/third-party/pthreadpool/libpthreadpool.a",
        ),
    ),
    "kernels": Component(
        whole=(
            "configurations/liboptimized_native_cpu_ops_lib.a",
            "kernels/quantized/libquantized_ops_lib.a",
            "extension/llm/custom_ops/libcustom_ops.a",
        ),
        linked=(
            "kernels/optimized/liboptimized_kernels.a",
            "kernels/optimized/libcpublas.a",
            "kernels/optimized/libeigen_blas.a",
            "kernels/portable/libportable_kernels.a",
            "kernels/portable/cpu/util/libkernels_util_all_deps.a",
            "kernels/quantized/libquantized_kernels.a",
        ),
    ),
    "xnnpack": Component(
        whole=("backends/xnnpack/libxnnpack_backend.a",),
        linked=(
            "backends/xnnpack/third-party/XNNPACK/libXNNPACK.a",
            "backends/xnnpack/third-party/XNNPACK/libxnnpack-microkernels-prod.a",
        ),
    ),
    "vulkan": Component(whole=("backends/vulkan/libvulkan_backend.a",), linked=()),
    # Linux only (MLX runs on Apple GPUs; Linux proves the delegate on MLX's CPU backend).
    "mlx": Component(
        whole=("backends/mlx/libmlxdelegate.a",),
        linked=("extension/llm/cache/libextension_llm_cache.a", "backends/mlx/mlx/libmlx.a"),
    ),
}

# The runtime, the CPU kernels and every backend the catalog runs on Android.
ANDROID_COMPONENTS = (
    "runtime",
    "kernels",
    *(b.name for b in load_catalog().backends if "android" in b.platforms),
)
# XNNPACK's Arm KleidiAI kernels exist only in arm64 builds (XNNPACK adds them to the top-level
# build directory: ${CMAKE_BINARY_DIR}/kleidiai).
ARM64_ARCHIVES = ("kleidiai/libkleidiai.a",)


def component_of_archive() -> dict[str, str]:
    """Archive file name -> its component: how a link map's bytes are attributed (sizes.py)."""
    names = {Path(a).name: c for c, comp in COMPONENTS.items() for a in comp.whole + comp.linked}
    names.update({Path(a).name: "xnnpack" for a in ARM64_ARCHIVES})
    return names


def link_map(so: str) -> str:
    """The linker map the shared-library project writes next to ``so``."""
    return so[: -len(".so")] + ".map"


def archives(build_dir: str, components: tuple[str, ...],
             extra_linked: tuple[str, ...] = ()) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(whole, linked) archive paths under ``build_dir`` for ``components``, in link order."""
    unknown = [c for c in components if c not in COMPONENTS]
    if unknown:
        raise ValueError(f"unknown shared-library component {', '.join(unknown)}; "
                         f"choose from {', '.join(COMPONENTS)}")
    whole = tuple(f"{build_dir}/{a}" for c in components for a in COMPONENTS[c].whole)
    linked = tuple(f"{build_dir}/{a}" for c in components for a in COMPONENTS[c].linked)
    return whole, linked + tuple(f"{build_dir}/{a}" for a in extra_linked)


def configure_argv(out_dir: str, whole: tuple[str, ...], linked: tuple[str, ...],
                   *, system_libraries: tuple[str, ...] = (),
                   toolchain_flags: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The ``cmake`` configure command of the shared-library project into ``out_dir``."""
    return (
        "cmake", "-S", PROJECT, "-B", out_dir, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
        *toolchain_flags,
        f"-DRNE_WHOLE_ARCHIVES={';'.join(whole)}",
        f"-DRNE_ARCHIVES={';'.join(linked)}",
        *((f"-DRNE_SYSTEM_LIBRARIES={';'.join(system_libraries)}",) if system_libraries else ()),
    )


def build_argv(out_dir: str) -> tuple[str, ...]:
    """The ``cmake --build`` command that links ``out_dir/libexecutorch.so``."""
    return ("cmake", "--build", out_dir, "--target", "executorch")
