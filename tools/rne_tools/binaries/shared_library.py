"""The one recipe for our ``libexecutorch.so``: which of ExecuTorch's static libraries go in.

Android stages it per ABI (``third-party/android/<abi>/libexecutorch.so``); Linux builds it from
the same lists, which is how this machine proves the recipe (``tests/binaries/test_native_packaging_so.py``).
The link itself (version script, SONAME, ``--no-undefined``) is the CMake project
``packages/react-native-executorch/cpp/shared_library``; this module says what it links.

Paths are relative to an ExecuTorch CMake build directory made with the Ninja generator (the
same layout on Android and Linux).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rne_tools.backend_catalog import BackendCatalog, load_catalog

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


# The parts that are not a backend; each backend's archives are its declaration's (backends.yaml).
_CORE: dict[str, Component] = {
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
}


def components(catalog: BackendCatalog) -> dict[str, Component]:
    """Every component the library can hold: the runtime, the CPU kernels and each backend of
    ``catalog`` (a backend's ``arm64`` archives are added by ``archives`` for arm64 builds)."""
    backends = {
        b.name: Component(whole=b.archives.whole, linked=b.archives.linked + b.archives.external)
        for b in catalog.backends
    }
    return {**_CORE, **backends}


def android_components(catalog: BackendCatalog) -> tuple[str, ...]:
    """The runtime, the CPU kernels and every backend ``catalog`` runs on Android."""
    return ("runtime", "kernels", *(b.name for b in catalog.backends if "android" in b.platforms))


COMPONENTS = components(load_catalog())
ANDROID_COMPONENTS = android_components(load_catalog())


def _arm64_archives(names: tuple[str, ...]) -> dict[str, str]:
    """Archive path -> backend, for the arm64-only archives of the backends in ``names``."""
    catalog = load_catalog()
    return {a: n for n in names if n in catalog.names() for a in catalog.backend(n).archives.arm64}


def component_of_archive() -> dict[str, str]:
    """Archive file name -> its component: how a link map's bytes are attributed (sizes.py)."""
    names = {Path(a).name: c for c, comp in COMPONENTS.items() for a in comp.whole + comp.linked}
    names.update({Path(a).name: c for a, c in _arm64_archives(tuple(COMPONENTS)).items()})
    return names


def link_map(so: str) -> str:
    """The linker map the shared-library project writes next to ``so``."""
    return so[: -len(".so")] + ".map"


def archives(build_dir: str, components: tuple[str, ...], *,
             arm64: bool = False) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(whole, linked) archive paths under ``build_dir`` for ``components``, in link order;
    ``arm64``: an arm64 build, which adds its backends' arm64-only archives."""
    unknown = [c for c in components if c not in COMPONENTS]
    if unknown:
        raise ValueError(f"unknown shared-library component {', '.join(unknown)}; "
                         f"choose from {', '.join(COMPONENTS)}")
    whole = tuple(f"{build_dir}/{a}" for c in components for a in COMPONENTS[c].whole)
    linked = tuple(f"{build_dir}/{a}" for c in components for a in COMPONENTS[c].linked)
    extra = tuple(_arm64_archives(components)) if arm64 else ()
    return whole, linked + tuple(f"{build_dir}/{a}" for a in extra)


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
