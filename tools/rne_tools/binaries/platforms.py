"""Build plans for each platform: what gets configured, built, merged and staged, exactly.

- ``ios``: ExecuTorch built three times with CMake's Xcode generator (device arm64 with MLX,
  simulator arm64 and x86_64 without it), each slice's static libraries merged into one
  ``libexecutorch.a`` (``libtool``), the two simulator slices joined (``lipo``), and one
  ``ExecuTorch.xcframework`` made with ``xcodebuild -create-xcframework``; staged with MLX's
  ``mlx.metallib`` into ``third-party/ios/``.
- ``android``: per ABI, ExecuTorch's static libraries (Vulkan + XNNPACK backends,
  optimized/quantized/LLM kernels) built with the NDK and linked into our own shared library by
  ``cpp/shared_library`` (``shared_library``: archive list, export list, SONAME), staged as
  ``third-party/android/<abi>/libexecutorch.so`` with the headers in ``third-party/android/include``.
- ``linux``: ExecuTorch itself built from the locked source (written out of local git mirrors
  into the cache outside the work tree, see ``source_cache``): XNNPACK, Vulkan (its shaders
  compiled with a glslc built from the locked shaderc), MLX on MLX's CPU backend, the optimized,
  quantized and LLM kernels; installed into the cache, then our C++ core built against it into
  ``build/linux``, and our ``libexecutorch.so`` linked from the same archives by the Android
  recipe (``shared_library``) into ``build/linux-shared/so``. Every build directory is kept, so
  a second run is an incremental no-op.
- ``host``: our own C++ core (``packages/react-native-executorch/cpp``) configured and built
  against the pip ``executorch`` wheel's C++ SDK into ``build/host``, exactly as its README says.
- ``linux-arm64``: the same core cross-compiled for aarch64 Linux with Debian's toolchain
  (``cpp/cmake/aarch64-linux-gnu.toolchain.cmake``) against the C++ SDK of the same ExecuTorch
  release's aarch64 wheel (pinned by sha256, ``wheel_sdk``), GoogleTest cross-built from
  Debian's source package, into ``build/linux-arm64``; its tests run under qemu-user.

Flags are listed explicitly (on top of ExecuTorch's own platform preset file) so the manifest
records every switch that shaped a binary.
"""

from __future__ import annotations

from dataclasses import dataclass

from rne_tools.backend_catalog import BackendCatalog, load_catalog
from rne_tools.binaries import shared_library, wheel_sdk
from rne_tools.binaries.errors import BuildError
from rne_tools.binaries.lock import SourceLock
from rne_tools.binaries.plan import ApplyPatches, Plan, Run, Stage, Step, WriteManifest

PLATFORMS = ("ios", "android", "linux", "host", "linux-arm64")
ANDROID_ABIS = ("arm64-v8a", "x86_64")
ANDROID_PLATFORM = "android-26"
IOS_DEPLOYMENT_TARGET = "17.0"  # MLX needs iOS 17
BUILD_TYPE = "Release"

# CMake 4 refuses projects declaring cmake_minimum_required < 3.5, which some of ExecuTorch's
# third-party submodules still do; this keeps them configuring with today's CMake.
_POLICY_FLOOR = "-DCMAKE_POLICY_VERSION_MINIMUM=3.5"


# The runtime API our runner calls (Module, tensors, the data loaders), on every platform.
_RUNTIME_EXTENSIONS = tuple(
    f"-DEXECUTORCH_BUILD_EXTENSION_{name}=ON"
    for name in ("DATA_LOADER", "FLAT_TENSOR", "MODULE", "NAMED_DATA_MAP", "TENSOR")
)


def _on(flag: bool) -> str:
    return "ON" if flag else "OFF"


def backend_flags(backends: tuple[str, ...], built: tuple[str, ...],
                  catalog: BackendCatalog | None = None) -> tuple[str, ...]:
    """The CMake switch of each of ``backends`` (its ``build_flag`` in the catalog, in the
    catalog's order): ON for those in ``built``, OFF for the others."""
    catalog = catalog or load_catalog()
    return tuple(f"-D{b.build_flag}={_on(b.name in built)}"
                 for b in catalog.backends if b.name in backends)


# ---------------------------------------------------------------------------------------------
# iOS


@dataclass(frozen=True)
class IosSlice:
    name: str  # build subdirectory
    platform: str  # ios-cmake PLATFORM value
    simulator: bool
    arm64: bool


IOS_SLICES = (
    IosSlice("ios-device", "OS64", simulator=False, arm64=True),
    IosSlice("ios-simulator-arm64", "SIMULATORARM64", simulator=True, arm64=True),
    IosSlice("ios-simulator-x86_64", "SIMULATOR64", simulator=True, arm64=False),
)


def delegates_flag(catalog: BackendCatalog | None = None) -> str:
    """Every backend's delegate target, for ``cmake/executorch_source.cmake``, which links those
    a from-source ExecuTorch build has."""
    catalog = catalog or load_catalog()
    return "-DRNE_EXECUTORCH_DELEGATES=" + ";".join(b.cmake_target for b in catalog.backends)


def ios_backends(simulator: bool, catalog: BackendCatalog | None = None) -> tuple[str, ...]:
    """The backends an iOS slice builds: the catalog's iOS backends, but on a simulator slice
    not those whose rule there is `never` (MLX: the simulator's Metal cannot run it)."""
    catalog = catalog or load_catalog()
    return tuple(b.name for b in catalog.backends if "ios" in b.platforms
                 and not (simulator and b.simulator_rule("ios") == "never"))

# Static libraries of ExecuTorch's CMake targets that go into our merged libexecutorch.a, by
# component (each backend's come from its declaration: ios_archives). Our own runner (cpp/runner) and tokenizer (cpp/tokenizer) replace ExecuTorch's
# LLM runner and its tokenizers (abseil, re2, sentencepiece), so from the LLM extension only
# its custom ops (kernels_llm: sdpa, KV-cache update) are linked.
IOS_ARCHIVES: dict[str, tuple[str, ...]] = {
    "runtime": (
        "libexecutorch.a",
        "libexecutorch_core.a",
        "libextension_data_loader.a",
        "libextension_flat_tensor.a",
        "libextension_module.a",
        "libextension_named_data_map.a",
        "libextension_tensor.a",
    ),
    "threadpool": ("libcpuinfo.a", "libextension_threadpool.a", "libpthreadpool.a"),
    "kernels_optimized": (
        "libcpublas.a",
        "liboptimized_kernels.a",
        "liboptimized_native_cpu_ops_lib.a",
        "libportable_kernels.a",
    ),
    "kernels_quantized": ("libquantized_kernels.a", "libquantized_ops_lib.a"),
    "kernels_llm": ("libcustom_ops.a",),
}


def _ios_configure_flags(s: IosSlice) -> tuple[str, ...]:
    return (
        "-G",
        "Xcode",
        "-DCMAKE_TOOLCHAIN_FILE=$SOURCE/third-party/ios-cmake/ios.toolchain.cmake",
        f"-DPLATFORM={s.platform}",
        f"-DDEPLOYMENT_TARGET={IOS_DEPLOYMENT_TARGET}",
        f"-DCMAKE_BUILD_TYPE={BUILD_TYPE}",
        "-DPYTHON_EXECUTABLE=$PYTHON",
        _POLICY_FLOOR,
        f"-DCMAKE_ARCHIVE_OUTPUT_DIRECTORY=$BUILD/{s.name}/lib",
        "-DEXECUTORCH_BUILD_PRESET_FILE=$SOURCE/tools/cmake/preset/ios.cmake",
        "-DBUILD_TESTING=OFF",
        "-DEXECUTORCH_BUILD_EXECUTOR_RUNNER=OFF",
        "-DEXECUTORCH_ENABLE_LOGGING=ON",
        "-DEXECUTORCH_BUILD_COREML=OFF",
        "-DEXECUTORCH_BUILD_MPS=OFF",
        "-DEXECUTORCH_BUILD_EXTENSION_APPLE=OFF",
        "-DEXECUTORCH_BUILD_EXTENSION_LLM_APPLE=OFF",
        *_RUNTIME_EXTENSIONS,
        "-DEXECUTORCH_BUILD_EXTENSION_LLM=ON",
        "-DEXECUTORCH_BUILD_EXTENSION_LLM_RUNNER=OFF",
        "-DEXECUTORCH_XNNPACK_SHARED_WORKSPACE=ON",
        "-DEXECUTORCH_BUILD_KERNELS_OPTIMIZED=ON",
        "-DEXECUTORCH_BUILD_KERNELS_QUANTIZED=ON",
        "-DEXECUTORCH_BUILD_KERNELS_LLM=ON",
        *backend_flags(ios_backends(simulator=False), ios_backends(s.simulator)),
    )


def ios_archives(s: IosSlice, catalog: BackendCatalog | None = None) -> tuple[str, ...]:
    """What the slice's merged archive holds. The Xcode build collects every CMake target's
    archive in lib/ (``CMAKE_ARCHIVE_OUTPUT_DIRECTORY``); a backend's ``external`` archives stay
    in their ExternalProject's tree."""
    catalog = catalog or load_catalog()
    libdir = f"$BUILD/{s.name}/lib/{BUILD_TYPE}"  # the Xcode generator adds the config dir
    backends = [catalog.backend(n).archives for n in ios_backends(s.simulator, catalog)]
    in_lib = [n for ns in IOS_ARCHIVES.values() for n in ns] + [
        a.rsplit("/", 1)[-1]
        for arc in backends
        for a in arc.whole + arc.linked + (arc.arm64 if s.arm64 else ())
    ]
    external = [f"$BUILD/{s.name}/{a}" for arc in backends for a in arc.external]
    return tuple(f"{libdir}/{n}" for n in in_lib) + tuple(external)


MLX_METALLIB = "$BUILD/ios-device/backends/mlx/mlx/mlx/backend/metal/kernels/mlx.metallib"


def _ios_steps(jobs: int) -> tuple[list[Step], dict[str, tuple[str, ...]]]:
    steps: list[Step] = [
        Run("create the directories the merged archives go to",
            ("cmake", "-E", "make_directory", *(f"$BUILD/{s.name}/merged" for s in IOS_SLICES),
             "$BUILD/ios-simulator"))
    ]
    flags: dict[str, tuple[str, ...]] = {}
    for s in IOS_SLICES:
        cfg = _ios_configure_flags(s)
        flags[s.name] = cfg
        steps.append(
            Run(f"configure ExecuTorch for {s.name} ({s.platform})",
                ("cmake", "-S", "$SOURCE", "-B", f"$BUILD/{s.name}", *cfg))
        )
        steps.append(
            Run(f"build ExecuTorch for {s.name}",
                ("cmake", "--build", f"$BUILD/{s.name}", "--config", BUILD_TYPE, "-j", str(jobs)))
        )
        archives = ios_archives(s)
        steps.append(
            Run(f"merge the {s.name} static libraries into one archive",
                ("xcrun", "libtool", "-static", "-o", f"$BUILD/{s.name}/merged/libexecutorch.a",
                 *archives),
                inputs=archives)
        )
    steps.append(
        Run("install ExecuTorch headers (from the device build)",
            ("cmake", "--install", "$BUILD/ios-device", "--config", BUILD_TYPE,
             "--prefix", "$BUILD/ios-device/install"))
    )
    sims = tuple(f"$BUILD/{s.name}/merged/libexecutorch.a" for s in IOS_SLICES if s.simulator)
    steps.append(
        Run("join the simulator slices (arm64 + x86_64) into one fat archive",
            ("xcrun", "lipo", "-create", *sims, "-output",
             "$BUILD/ios-simulator/libexecutorch.a"),
            inputs=sims)
    )
    steps.append(
        Run("remove a previous xcframework (xcodebuild refuses to overwrite)",
            ("cmake", "-E", "rm", "-rf", "$BUILD/ExecuTorch.xcframework"))
    )
    headers = "$BUILD/ios-device/install/include"
    device_lib = "$BUILD/ios-device/merged/libexecutorch.a"
    steps.append(
        Run("create ExecuTorch.xcframework (device + simulator)",
            ("xcodebuild", "-create-xcframework",
             "-library", device_lib, "-headers", headers,
             "-library", "$BUILD/ios-simulator/libexecutorch.a", "-headers", headers,
             "-output", "$BUILD/ExecuTorch.xcframework"),
            inputs=(device_lib, "$BUILD/ios-simulator/libexecutorch.a", headers))
    )
    steps.append(Stage("stage the xcframework", "$BUILD/ExecuTorch.xcframework",
                       "$REPO/third-party/ios/ExecuTorch.xcframework"))
    steps.append(Stage("stage MLX's Metal kernel library", MLX_METALLIB,
                       "$REPO/third-party/ios/mlx.metallib"))
    return steps, flags


# ---------------------------------------------------------------------------------------------
# Android


# What an Android libexecutorch.so can hold; an app that ships no Vulkan model builds without it
# (--components), which removes the delegate and its SPIR-V from the library (docs/building-binaries.md).
ANDROID_BUILD_COMPONENTS = tuple(c for c in shared_library.ANDROID_COMPONENTS if c != "runtime")


def _android_configure_flags(abi: str, components: tuple[str, ...]) -> tuple[str, ...]:
    vulkan = "vulkan" in components
    backends = tuple(c for c in ANDROID_BUILD_COMPONENTS if c != "kernels")
    return (
        "-G",
        "Ninja",
        "-DCMAKE_TOOLCHAIN_FILE=$NDK/build/cmake/android.toolchain.cmake",
        f"-DANDROID_ABI={abi}",
        f"-DANDROID_PLATFORM={ANDROID_PLATFORM}",
        # React Native links libc++ as a shared library; one C++ runtime per process.
        "-DANDROID_STL=c++_shared",
        f"-DCMAKE_BUILD_TYPE={BUILD_TYPE}",
        "-DPYTHON_EXECUTABLE=$PYTHON",
        _POLICY_FLOOR,
        f"-DCMAKE_INSTALL_PREFIX=$BUILD/android-{abi}/install",
        "-DEXECUTORCH_BUILD_PRESET_FILE=$SOURCE/tools/cmake/preset/android.cmake",
        "-DBUILD_TESTING=OFF",
        "-DEXECUTORCH_BUILD_EXECUTOR_RUNNER=OFF",
        "-DEXECUTORCH_PAL_DEFAULT=android",
        "-DEXECUTORCH_ENABLE_LOGGING=ON",
        # Our JSI binding replaces ExecuTorch's JNI library, which the preset turns on; off, the
        # configure step no longer downloads fbjni from Maven (React Native's prefab fbjni is
        # what the app links).
        "-DEXECUTORCH_BUILD_ANDROID_JNI=OFF",
        "-DEXECUTORCH_BUILD_DEVTOOLS=OFF",
        "-DEXECUTORCH_BUILD_EXTENSION_TRAINING=OFF",
        "-DEXECUTORCH_BUILD_QNN=OFF",
        "-DEXECUTORCH_BUILD_NEURON=OFF",
        *backend_flags(backends, components),
        # ExecuTorch looks for glslc on PATH and in $VULKAN_SDK/bin only, and the NDK's glslc
        # cannot compile its shaders (no GL_EXT_integer_dot_product): the LunarG SDK's, named.
        *(("-DGLSLC_PATH=$VULKAN_SDK/bin/glslc",) if vulkan else ()),
        "-DEXECUTORCH_XNNPACK_SHARED_WORKSPACE=ON",
        *_RUNTIME_EXTENSIONS,
        # Our runner and tokenizer replace ExecuTorch's LLM runner and its tokenizers; of the
        # LLM extension only the custom ops (KERNELS_LLM) are built, as on linux.
        "-DEXECUTORCH_BUILD_EXTENSION_LLM=OFF",
        "-DEXECUTORCH_BUILD_EXTENSION_LLM_RUNNER=OFF",
        "-DEXECUTORCH_BUILD_KERNELS_OPTIMIZED=ON",
        "-DEXECUTORCH_BUILD_KERNELS_QUANTIZED=ON",
        "-DEXECUTORCH_BUILD_KERNELS_LLM=ON",
    )


def _android_shared_library_flags(abi: str) -> tuple[str, ...]:
    return (
        "-DCMAKE_TOOLCHAIN_FILE=$NDK/build/cmake/android.toolchain.cmake",
        f"-DANDROID_ABI={abi}",
        f"-DANDROID_PLATFORM={ANDROID_PLATFORM}",
        "-DANDROID_STL=c++_shared",
        # Release library without DWARF: the app's Gradle build strips symbols anyway.
        "-DCMAKE_SHARED_LINKER_FLAGS=-Wl,--strip-debug",
    )


def _android_steps(abis: tuple[str, ...], jobs: int,
                   components: tuple[str, ...]) -> tuple[list[Step], dict[str, tuple[str, ...]]]:
    steps: list[Step] = []
    flags: dict[str, tuple[str, ...]] = {}
    env = (("ANDROID_NDK", "$NDK"),)
    for abi in abis:
        bdir = f"$BUILD/android-{abi}"
        cfg = _android_configure_flags(abi, components)
        steps.append(Run(f"configure ExecuTorch for Android {abi}",
                         ("cmake", "-S", "$SOURCE", "-B", bdir, *cfg), env=env))
        steps.append(Run(f"build ExecuTorch's static libraries for Android {abi}",
                         ("cmake", "--build", bdir, "-j", str(jobs)), env=env))
        steps.append(Run(f"install ExecuTorch's headers for Android {abi}",
                         ("cmake", "--install", bdir), env=env))
        whole, linked = shared_library.archives(
            bdir, ("runtime", *components), arm64=abi == "arm64-v8a")
        so_dir = f"{bdir}/shared"
        so_cfg = shared_library.configure_argv(
            so_dir, whole, linked, toolchain_flags=_android_shared_library_flags(abi))
        flags[abi] = cfg + so_cfg[4:]
        steps.append(Run(f"configure libexecutorch.so for Android {abi} (cpp/shared_library)",
                         so_cfg, env=env, inputs=(*whole, *linked)))
        steps.append(Run(f"link libexecutorch.so for Android {abi}",
                         shared_library.build_argv(so_dir), env=env))
        steps.append(Stage(f"stage libexecutorch.so for {abi}", f"{so_dir}/libexecutorch.so",
                           f"$REPO/third-party/android/{abi}/libexecutorch.so"))
    # The headers are the same for every ABI: android/CMakeLists.txt reads them from here.
    steps.append(Stage("stage ExecuTorch's headers", f"$BUILD/android-{abis[0]}/install/include",
                       "$REPO/third-party/android/include"))
    return steps, flags


# ---------------------------------------------------------------------------------------------
# Host

# Relative to the repository root (every step's working directory), as the README writes them.
HOST_PROJECT = "packages/react-native-executorch/cpp"
HOST_BUILD = "build/host"


def host_configure_argv() -> tuple[str, ...]:
    """The configure command of packages/react-native-executorch/cpp/README.md."""
    return ("cmake", "-S", HOST_PROJECT, "-B", HOST_BUILD, "-G", "Ninja",
            f"-DCMAKE_BUILD_TYPE={BUILD_TYPE}")


def host_build_argv(jobs: int) -> tuple[str, ...]:
    """The build command of packages/react-native-executorch/cpp/README.md."""
    return ("cmake", "--build", HOST_BUILD, "-j", str(jobs))


def _host_steps(jobs: int) -> tuple[list[Step], dict[str, tuple[str, ...]]]:
    cfg = host_configure_argv()
    query = f"{HOST_BUILD}/.cmake/api/v1/query"
    steps: list[Step] = [
        # CMake's file API then reports every target's artifacts for the manifest.
        Run("ask CMake to report the build's artifacts", ("cmake", "-E", "make_directory", query)),
        Run("create the file-API codemodel query", ("cmake", "-E", "touch", f"{query}/codemodel-v2")),
        Run("configure the C++ core against the executorch wheel's SDK", cfg),
        Run("build the C++ core, its CLI and its tests", host_build_argv(jobs)),
    ]
    return steps, {"host": cfg[5:]}


# ---------------------------------------------------------------------------------------------
# Linux (from source, this machine)

LINUX_BUILD = "build/linux"
# Our libexecutorch.so linked from the linux build's archives by the Android recipe
# (shared_library), which is how this machine proves that recipe.
LINUX_SHARED_LIBRARY_BUILD = "build/linux-shared/so"
# The same recipe without the GPU delegates: what opting out of Vulkan (and MLX) saves an app.
LINUX_CPU_SHARED_LIBRARY_BUILD = "build/linux-shared/cpu"
CPU_COMPONENTS = ("kernels", *(b.name for b in load_catalog().backends if b.processor == "CPU"))
_ET_BUILD = "$CACHE/build/executorch-{short}"
_GLSLC_BUILD = "$CACHE/build/glslc-{short}"


def linux_paths(lock: SourceLock) -> dict[str, str]:
    """The cache directories of a linux build (placeholder form), keyed by the locked commits."""
    shaderc = next(s for s in lock.extra_sources if s.name == "shaderc")
    fmt = next(s for s in lock.extra_sources if s.name == "fmt")
    et_build = _ET_BUILD.format(short=lock.short)
    glslc_build = _GLSLC_BUILD.format(short=shaderc.commit[:12])
    return {
        "et_build": et_build,
        "et_install": f"{et_build}/install",
        "glslc_build": glslc_build,
        "glslc": f"{glslc_build}/glslc/glslc",
        "shaderc_source": f"$CACHE/sources/shaderc-{shaderc.commit[:12]}",
        "fmt_source": f"$CACHE/sources/fmt-{fmt.commit[:12]}",
    }


def _glslc_configure_flags() -> tuple[str, ...]:
    # Only the glslc executable is built: no tests, examples, or glslang/SPIRV-Tools tools.
    return (
        "-G", "Ninja", f"-DCMAKE_BUILD_TYPE={BUILD_TYPE}", _POLICY_FLOOR,
        "-DCMAKE_C_COMPILER_LAUNCHER=ccache", "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache",
        "-DSHADERC_SKIP_TESTS=ON", "-DSHADERC_SKIP_EXAMPLES=ON", "-DSHADERC_SKIP_COPYRIGHT_CHECK=ON",
        "-DSPIRV_SKIP_TESTS=ON", "-DSPIRV_SKIP_EXECUTABLES=ON", "-DENABLE_GLSLANG_BINARIES=OFF",
        "-DSPIRV_HEADERS_SKIP_EXAMPLES=ON",
    )


# What a linux build can hold: the CPU kernels and every backend of the catalog (Linux proves
# each delegate); --components picks a subset (all by default). The CPU kernels are what
# non-delegated ops (and our XNNPACK exports' custom ops) need; an MLX or Vulkan program that is
# delegated whole runs without them.
LINUX_COMPONENTS = ("kernels", *load_catalog().names())


def _linux_configure_flags(paths: dict[str, str], components: tuple[str, ...]) -> tuple[str, ...]:
    kernels, vulkan, mlx = ("kernels" in components, "vulkan" in components, "mlx" in components)
    backends = load_catalog().names()
    return (
        "-G", "Ninja",
        f"-DCMAKE_BUILD_TYPE={BUILD_TYPE}",
        "-DPYTHON_EXECUTABLE=$PYTHON",
        _POLICY_FLOOR,
        f"-DCMAKE_INSTALL_PREFIX={paths['et_install']}",
        # CI rebuilds on the same machine hit ccache for every unchanged translation unit.
        "-DCMAKE_C_COMPILER_LAUNCHER=ccache",
        "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache",
        "-DBUILD_TESTING=OFF",
        "-DEXECUTORCH_BUILD_EXECUTOR_RUNNER=OFF",
        "-DEXECUTORCH_ENABLE_LOGGING=ON",
        *_RUNTIME_EXTENSIONS,
        # Our runner and tokenizer replace the LLM runner and its tokenizers; of the LLM
        # extension only the KV-cache registry (MLX, patch 0002) and custom ops are built.
        "-DEXECUTORCH_BUILD_EXTENSION_LLM=OFF",
        "-DEXECUTORCH_BUILD_EXTENSION_LLM_RUNNER=OFF",
        f"-DEXECUTORCH_BUILD_PORTABLE_OPS={_on(kernels)}",
        f"-DEXECUTORCH_BUILD_KERNELS_OPTIMIZED={_on(kernels)}",
        f"-DEXECUTORCH_BUILD_KERNELS_QUANTIZED={_on(kernels)}",
        f"-DEXECUTORCH_BUILD_KERNELS_LLM={_on(kernels)}",
        *backend_flags(backends, components),
        *((f"-DGLSLC_PATH={paths['glslc']}",) if vulkan else ()),
        # MLX's own configure would download these; the locked local copies instead.
        *(("-DFETCHCONTENT_SOURCE_DIR_JSON=$SOURCE/third-party/json",
           f"-DFETCHCONTENT_SOURCE_DIR_FMT={paths['fmt_source']}") if mlx else ()),
    )


def _linux_steps(lock: SourceLock, jobs: int,
                 components: tuple[str, ...]) -> tuple[list[Step], dict[str, tuple[str, ...]]]:
    paths = linux_paths(lock)
    flags: dict[str, tuple[str, ...]] = {}
    steps: list[Step] = []
    if "vulkan" in components:
        glslc_cfg = _glslc_configure_flags()
        flags["glslc"] = glslc_cfg
        steps += [
            Run("configure glslc (shaderc) from the locked source",
                ("cmake", "-S", paths["shaderc_source"], "-B", paths["glslc_build"], *glslc_cfg)),
            Run("build glslc", ("cmake", "--build", paths["glslc_build"], "--target", "glslc_exe",
                                "-j", str(jobs))),
        ]
    et_cfg = _linux_configure_flags(paths, components)
    flags["executorch"] = et_cfg
    steps += [
        Run("configure ExecuTorch for this machine",
            ("cmake", "-S", "$SOURCE", "-B", paths["et_build"], *et_cfg)),
        Run("build ExecuTorch", ("cmake", "--build", paths["et_build"], "-j", str(jobs))),
        Run("install ExecuTorch into the cache", ("cmake", "--install", paths["et_build"])),
    ]
    whole, linked = shared_library.archives(paths["et_build"], ("runtime", *components))
    so_cfg = shared_library.configure_argv(
        LINUX_SHARED_LIBRARY_BUILD, whole, linked,
        # MLX's CPU backend links the system BLAS/LAPACK (patch 0001).
        system_libraries=("lapack", "blas") if "mlx" in components else ())
    steps += [
        Run("configure libexecutorch.so from those archives (the Android recipe, cpp/shared_library)",
            so_cfg, inputs=(*whole, *linked)),
        Run("link libexecutorch.so", shared_library.build_argv(LINUX_SHARED_LIBRARY_BUILD)),
    ]
    cpu = tuple(c for c in components if c in CPU_COMPONENTS)
    if cpu != components and cpu:
        whole, linked = shared_library.archives(paths["et_build"], ("runtime", *cpu))
        steps += [
            Run("configure libexecutorch.so without the GPU delegates (the backend opt-out)",
                shared_library.configure_argv(LINUX_CPU_SHARED_LIBRARY_BUILD, whole, linked),
                inputs=(*whole, *linked)),
            Run("link libexecutorch.so without the GPU delegates",
                shared_library.build_argv(LINUX_CPU_SHARED_LIBRARY_BUILD)),
        ]
    query = f"{LINUX_BUILD}/.cmake/api/v1/query"
    core_cfg = ("-G", "Ninja", f"-DCMAKE_BUILD_TYPE={BUILD_TYPE}",
                f"-DRNE_EXECUTORCH_PREFIX={paths['et_install']}",
                delegates_flag())
    flags["core"] = core_cfg
    steps += [
        Run("ask CMake to report the build's artifacts", ("cmake", "-E", "make_directory", query)),
        Run("create the file-API codemodel query", ("cmake", "-E", "touch", f"{query}/codemodel-v2")),
        Run("configure the C++ core against the source-built ExecuTorch",
            ("cmake", "-S", HOST_PROJECT, "-B", LINUX_BUILD, *core_cfg)),
        Run("build the C++ core, its CLI and its tests",
            ("cmake", "--build", LINUX_BUILD, "-j", str(jobs))),
    ]
    return steps, flags


# ---------------------------------------------------------------------------------------------
# Linux arm64 (cross-compiled here, run under qemu-user)

LINUX_ARM64_BUILD = "build/linux-arm64"
ARM64_TOOLCHAIN = f"$REPO/{HOST_PROJECT}/cmake/aarch64-linux-gnu.toolchain.cmake"
# Debian's googletest package: GoogleTest's source, built here for the target like our tests.
GTEST_SOURCE = "/usr/src/googletest"
_ARM64_GTEST_BUILD = f"{LINUX_ARM64_BUILD}/deps/googletest"
_ARM64_SDK_ROOT = "$CACHE/sdk"
_ARM64_SDK_PIN = "$REPO/third-party/executorch-sdk-aarch64.lock.json"


def _cross_flags() -> tuple[str, ...]:
    return ("-G", "Ninja", f"-DCMAKE_BUILD_TYPE={BUILD_TYPE}",
            f"-DCMAKE_TOOLCHAIN_FILE={ARM64_TOOLCHAIN}",
            "-DCMAKE_C_COMPILER_LAUNCHER=ccache", "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache")


# --from-source: ExecuTorch itself cross-built from the locked source (the CPU components a phone
# runs: kernels with our LLM custom ops, XNNPACK), linked into one libexecutorch.so by the Android
# recipe, and our core built against that library as the app's is.
LINUX_ARM64_SHARED_LIBRARY_BUILD = "build/linux-arm64-shared/so"
_ET_ARM64_BUILD = "$CACHE/build/executorch-{short}-aarch64"


def linux_arm64_paths(lock: SourceLock) -> dict[str, str]:
    """The cache directories of the arm64 source build (placeholder form)."""
    et_build = _ET_ARM64_BUILD.format(short=lock.short)
    kleidiai = next(s for s in lock.extra_sources if s.name == "kleidiai")
    return {"et_build": et_build, "et_install": f"{et_build}/install",
            "kleidiai_source": f"$CACHE/sources/kleidiai-{kleidiai.commit[:12]}"}


def _linux_arm64_executorch_steps(lock: SourceLock, jobs: int) -> tuple[list[Step], dict, str, str]:
    """Steps that build ExecuTorch for aarch64 and link its libexecutorch.so; with the flags,
    the install prefix and the library's path."""
    paths = linux_arm64_paths(lock)
    et_cfg = (f"-DCMAKE_TOOLCHAIN_FILE={ARM64_TOOLCHAIN}",
              *_linux_configure_flags(paths, CPU_COMPONENTS),
              # XNNPACK would download KleidiAI at configure time; the locked copy instead.
              f"-DKLEIDIAI_SOURCE_DIR={paths['kleidiai_source']}",
              # GCC 12's loop vectoriser crashes on one KleidiAI kernel (the file says which).
              f"-DCMAKE_PROJECT_KleidiAI_INCLUDE=$REPO/{HOST_PROJECT}/cmake/kleidiai_gcc12.cmake")
    whole, linked = shared_library.archives(paths["et_build"], ("runtime", *CPU_COMPONENTS),
                                            arm64=True)
    so_cfg = shared_library.configure_argv(
        LINUX_ARM64_SHARED_LIBRARY_BUILD, whole, linked,
        toolchain_flags=(f"-DCMAKE_TOOLCHAIN_FILE={ARM64_TOOLCHAIN}",))
    steps: list[Step] = [
        Run("configure ExecuTorch for aarch64 (kernels, XNNPACK)",
            ("cmake", "-S", "$SOURCE", "-B", paths["et_build"], *et_cfg)),
        Run("build ExecuTorch for aarch64", ("cmake", "--build", paths["et_build"], "-j", str(jobs))),
        Run("install ExecuTorch for aarch64 into the cache", ("cmake", "--install", paths["et_build"])),
        Run("configure the aarch64 libexecutorch.so (the Android recipe, cpp/shared_library)",
            so_cfg, inputs=(*whole, *linked)),
        Run("link the aarch64 libexecutorch.so",
            shared_library.build_argv(LINUX_ARM64_SHARED_LIBRARY_BUILD)),
    ]
    so = f"$REPO/{LINUX_ARM64_SHARED_LIBRARY_BUILD}/libexecutorch.so"
    return steps, {"executorch": et_cfg, "shared_library": so_cfg[4:]}, paths["et_install"], so


def _linux_arm64_steps(jobs: int, lock: SourceLock | None) -> tuple[list[Step], dict[str, tuple[str, ...]]]:
    """``lock`` given: ExecuTorch from that source; otherwise the pinned aarch64 wheel's SDK."""
    gtest_install = f"$REPO/{_ARM64_GTEST_BUILD}/install"
    gtest_cfg = (*_cross_flags(), f"-DCMAKE_INSTALL_PREFIX={gtest_install}")
    steps: list[Step] = []
    flags: dict[str, tuple[str, ...]] = {}
    if lock is None:
        pin = wheel_sdk.load_pin()
        steps.append(Run(
            f"fetch the ExecuTorch C++ SDK of {pin.file} (sha256-pinned) into the cache",
            ("$PYTHON", "-m", "rne_tools.binaries.wheel_sdk", _ARM64_SDK_PIN, _ARM64_SDK_ROOT),
            env=(("PYTHONPATH", "$REPO/tools"),)))
        # Empty prefix and library: a build directory that was configured from source before
        # goes back to the wheel.
        executorch = (f"-Dexecutorch_DIR={pin.cmake_dir(_ARM64_SDK_ROOT)}",
                      "-DRNE_EXECUTORCH_PREFIX=", "-DRNE_EXECUTORCH_SHARED_LIBRARY=")
        against = "the aarch64 wheel's SDK"
    else:
        et_steps, flags, prefix, so = _linux_arm64_executorch_steps(lock, jobs)
        steps += et_steps
        executorch = (f"-DRNE_EXECUTORCH_PREFIX={prefix}", f"-DRNE_EXECUTORCH_SHARED_LIBRARY={so}")
        against = "the aarch64 libexecutorch.so"
    core_cfg = (*_cross_flags(), *executorch, f"-DGTest_DIR={gtest_install}/lib/cmake/GTest",
                # Off by default when cross-compiling; the parity tests run it under qemu.
                "-DRNE_TOKENIZER_BUILD_TOOLS=ON")
    query = f"{LINUX_ARM64_BUILD}/.cmake/api/v1/query"
    steps += [
        Run("configure GoogleTest for aarch64 (Debian's googletest source)",
            ("cmake", "-S", GTEST_SOURCE, "-B", _ARM64_GTEST_BUILD, *gtest_cfg)),
        Run("build GoogleTest for aarch64", ("cmake", "--build", _ARM64_GTEST_BUILD, "-j", str(jobs))),
        Run("install GoogleTest into the build tree", ("cmake", "--install", _ARM64_GTEST_BUILD)),
        Run("ask CMake to report the build's artifacts", ("cmake", "-E", "make_directory", query)),
        Run("create the file-API codemodel query", ("cmake", "-E", "touch", f"{query}/codemodel-v2")),
        Run(f"configure the C++ core for aarch64 against {against}",
            ("cmake", "-S", HOST_PROJECT, "-B", LINUX_ARM64_BUILD, *core_cfg)),
        Run("build the C++ core, its CLI and its tests for aarch64",
            ("cmake", "--build", LINUX_ARM64_BUILD, "-j", str(jobs))),
    ]
    return steps, {**flags, "googletest": gtest_cfg, "core": core_cfg}


# ---------------------------------------------------------------------------------------------


def manifest_path(platform: str) -> str:
    """Where ``platform``'s manifest lives (placeholder form)."""
    if platform in ("host", "linux", "linux-arm64"):
        return f"$REPO/build/{platform}/manifest.json"
    return f"$REPO/third-party/{platform}/manifest.json"


def _source_steps(lock: SourceLock, ref: str, jobs: int) -> list[Step]:
    """Fetch exactly ``ref`` with its submodules into $SOURCE, discarding any local change."""
    git = ("git", "-C", "$SOURCE")
    return [
        Run("create the ExecuTorch checkout (no-op if it exists)", ("git", "init", "--quiet", "$SOURCE")),
        Run("point it at the locked repository", (*git, "config", "remote.origin.url", lock.repository)),
        Run(f"fetch {ref}", (*git, "fetch", "--depth", "1", "--no-tags", "origin", ref)),
        Run("check it out, discarding local changes", (*git, "checkout", "--force", "--detach", "FETCH_HEAD")),
        Run("remove untracked files", (*git, "clean", "-ffdx", "--quiet")),
        Run("sync submodule URLs", (*git, "submodule", "sync", "--recursive", "--quiet")),
        Run("fetch and check out the submodules",
            (*git, "submodule", "update", "--init", "--recursive", "--force", "--depth", "1",
             "--jobs", str(jobs))),
        Run("remove untracked files in submodules",
            (*git, "submodule", "foreach", "--recursive", "--quiet", "git clean -ffdx --quiet")),
    ]


def _apply_patches(patches: list[str]) -> ApplyPatches:
    """The step that applies the series ``patches`` (file names under third-party/patches/)."""
    return ApplyPatches("apply the project's patch series (checked first; all or nothing)",
                        "$SOURCE", tuple(f"$REPO/third-party/patches/{p}" for p in patches))


def _chosen(what: str, chosen: tuple[str, ...] | None, known: tuple[str, ...]) -> tuple[str, ...]:
    """``chosen`` (all of ``known`` when None); a ``BuildError`` names what is not known."""
    chosen = known if chosen is None else chosen
    unknown = [c for c in chosen if c not in known]
    if unknown or not chosen:
        raise BuildError(f"unknown {what} {', '.join(unknown) or '(none)'}; "
                         f"choose from {', '.join(known)}")
    return chosen


def build_plan(
    platform: str,
    *,
    lock: SourceLock,
    patches: list[str],
    abis: tuple[str, ...] = ANDROID_ABIS,
    jobs: int,
    ref: str | None = None,
    use_existing_source: bool = False,
    components: tuple[str, ...] | None = None,
    from_source: bool = False,
) -> Plan:
    """The full plan for ``platform``.

    ``patches`` are the series' file names (``third-party/patches/``); ``ref`` overrides the
    locked commit; ``use_existing_source`` (``--source PATH``) skips fetching and uses the tree
    as it is (the patches are still applied, idempotently). ``components`` (linux only) picks
    what of ``LINUX_COMPONENTS`` the ExecuTorch build holds (``vulkan`` adds the glslc build),
    android what of ``ANDROID_BUILD_COMPONENTS`` (all by default). ``from_source`` (linux-arm64)
    builds ExecuTorch from the locked source in the cache instead of using the release's SDK.
    """
    if platform not in PLATFORMS:
        raise BuildError(f"unknown platform {platform!r}; choose one of {', '.join(PLATFORMS)}")
    if jobs < 1:
        raise BuildError(f"--jobs must be at least 1, got {jobs}")
    if platform == "host":
        steps, flags = _host_steps(jobs)
        manifest = WriteManifest(
            "record the host build", manifest_path("host"), "$REPO/build/host",
            "host", (), tuple(flags.items()), sizes="wheel",
        )
        return Plan("host", (*steps, manifest))
    if platform == "linux-arm64":
        if not from_source:  # the aarch64 wheel's SDK
            steps, flags = _linux_arm64_steps(jobs, None)
            return Plan("linux-arm64", (*steps, WriteManifest(
                "record the arm64 build and its size table", manifest_path("linux-arm64"),
                f"$REPO/{LINUX_ARM64_BUILD}", "linux-arm64", (), tuple(flags.items()),
                sizes="wheel")))
        steps, flags = _linux_arm64_steps(jobs, lock)
        return Plan("linux-arm64", (
            _apply_patches(patches),
            *steps,
            WriteManifest("record the arm64 build and its size table", manifest_path("linux-arm64"),
                          f"$REPO/{LINUX_ARM64_BUILD}", "linux-arm64", (), tuple(flags.items()),
                          sizes=f"$REPO/{LINUX_ARM64_SHARED_LIBRARY_BUILD}/libexecutorch.so")))
    if from_source:
        raise BuildError("from_source only applies to linux-arm64 (linux always builds from source)")

    steps: list[Step] = []
    if platform == "linux":  # the source comes from the cache (source_cache), never fetched here
        components = _chosen("linux component", components, LINUX_COMPONENTS)
        steps.append(_apply_patches(patches))
        build_steps, flags = _linux_steps(lock, jobs, components)
        steps += build_steps
        steps.append(WriteManifest(
            "record sources, flags, tools and artifact hashes", manifest_path("linux"),
            f"$REPO/{LINUX_BUILD}", "linux", (), tuple(flags.items()),
            sizes=f"$REPO/{LINUX_SHARED_LIBRARY_BUILD}/libexecutorch.so",
        ))
        return Plan("linux", tuple(steps))
    if not use_existing_source:
        steps += _source_steps(lock, ref or lock.commit, jobs)
    steps.append(_apply_patches(patches))
    if platform == "ios":
        build_steps, flags = _ios_steps(jobs)
        steps += build_steps
        steps.append(WriteManifest(
            "record sources, flags, tools and artifact hashes", manifest_path("ios"),
            "$REPO/third-party/ios", "ios", ("ExecuTorch.xcframework", "mlx.metallib"),
            tuple(flags.items()),
        ))
        return Plan("ios", tuple(steps))

    abis = _chosen("Android ABI", abis, ANDROID_ABIS)
    components = _chosen("Android component", components, ANDROID_BUILD_COMPONENTS)
    build_steps, flags = _android_steps(abis, jobs, components)
    steps += build_steps
    for abi in abis:
        steps.append(WriteManifest(
            f"record sources, flags, tools and artifact hashes for {abi}",
            manifest_path("android"), "$REPO/third-party/android", abi,
            (abi,), ((abi, flags[abi]),),
        ))
    return Plan("android", tuple(steps))
