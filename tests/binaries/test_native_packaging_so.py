"""Our libexecutorch.so, linked on this machine by the Android recipe (cpp/shared_library +
rne_tools.binaries.shared_library) from the archives of the source build: the linux plan
(``build_binaries.py --platform linux``) links it into build/linux-shared/so with the
components that build holds, exactly as the Android plan links each ABI's.

What Linux proves for Android: the archive list links with ``--no-undefined`` (nothing missing),
the SONAME, an export list holding every ExecuTorch symbol our runner and JSI binding use and
nothing else, and that ``rne_llm`` and the JSI binding test, linked against that one library
and no other ExecuTorch code, answer the Paris prompt (so the whole-archived registrations of
kernels, custom ops and the XNNPACK backend survived). The runner builds live under
build/linux-shared (incremental on reruns).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rne_tools.binaries import build_plan, platform_series
from rne_tools.binaries.lock import load_lock
from rne_tools.binaries.plan import Run, expand
from rne_tools.binaries.platforms import LINUX_COMPONENTS, LINUX_SHARED_LIBRARY_BUILD, linux_paths
from rne_tools.paths import PACKAGE_DIR, REPO_ROOT, cache_root

pytestmark = [pytest.mark.executorch_source, pytest.mark.slow]

BIN = Path(sys.executable).parent  # the venv's cmake and ninja
BUILD = REPO_ROOT / "build" / "linux-shared"
PARIS = "What is the capital of France?"
# Everything libexecutorch.so may export (exports.map), as `nm -C` prints it.
_EXPORTED = re.compile(r"^((vtable|typeinfo|typeinfo name) for )?executorch::(runtime|extension)::")


def _run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(cmd, capture_output=True, text=True, check=False, **kwargs)
    assert result.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{result.stdout[-6000:]}\n{result.stderr[-6000:]}"
    return result


def _et_paths() -> dict[str, Path]:
    placeholders = linux_paths(load_lock())
    return {k: Path(v.replace("$CACHE", str(cache_root()))) for k, v in placeholders.items()}


# The CMake switch of each linux component, as the ExecuTorch build's cache records it.
_COMPONENT_FLAGS = {"kernels": "EXECUTORCH_BUILD_KERNELS_OPTIMIZED", "xnnpack": "EXECUTORCH_BUILD_XNNPACK",
                    "vulkan": "EXECUTORCH_BUILD_VULKAN", "mlx": "EXECUTORCH_BUILD_MLX"}


def _cmake_cache(build: Path) -> dict[str, str]:
    text = (build / "CMakeCache.txt").read_text()
    return dict(re.findall(r"^([A-Za-z_][\w-]*):\w+=(.*)$", text, re.M))


@pytest.fixture(scope="module")
def libexecutorch() -> Path:
    """The library the linux plan linked, checked to be the plan's recipe for the components
    the ExecuTorch build holds and newer than every archive in it."""
    so_dir = REPO_ROOT / LINUX_SHARED_LIBRARY_BUILD
    so = so_dir / "libexecutorch.so"
    if not so.is_file():
        pytest.fail(f"{so} is missing: the linux plan links it; run "
                    "`.venv/bin/python tools/build_binaries.py --platform linux --jobs 2`")
    built = _cmake_cache(_et_paths()["et_build"])
    components = tuple(c for c in LINUX_COMPONENTS if built.get(_COMPONENT_FLAGS[c]) == "ON")
    plan = build_plan("linux", lock=load_lock(), patches=[p.name for p in platform_series("linux")],
                      jobs=2, components=components)
    configure = next(s for s in plan.steps
                     if isinstance(s, Run) and s.description.startswith("configure libexecutorch.so"))
    values = {"$CACHE": cache_root(), "$REPO": REPO_ROOT}
    expected = dict(a[2:].split("=", 1) for a in configure.argv if a.startswith("-DRNE_"))
    linked = _cmake_cache(so_dir)
    for name, archives in expected.items():
        assert linked.get(name) == expand(archives, values), f"{so} was not linked by the plan's {name}"
    newest = max(Path(expand(a, values)).stat().st_mtime for a in configure.inputs)
    assert so.stat().st_mtime >= newest, f"{so} is older than the archives it links; rerun the linux build"
    return so


def _core_build(name: str, source: Path, target: str, so: Path) -> Path:
    build = BUILD / name
    _run([str(BIN / "cmake"), "-S", str(source), "-B", str(build), "-G", "Ninja",
          f"-DCMAKE_MAKE_PROGRAM={BIN / 'ninja'}", "-DCMAKE_BUILD_TYPE=Release",
          "-DRNE_BUILD_TESTS=OFF", f"-DRNE_EXECUTORCH_PREFIX={_et_paths()['et_install']}",
          f"-DRNE_EXECUTORCH_SHARED_LIBRARY={so}"])
    _run([str(BIN / "cmake"), "--build", str(build), "--target", target, "--parallel", "2"])
    return next(build.rglob(target))


@pytest.fixture(scope="module")
def rne_llm_shared(libexecutorch: Path) -> Path:
    return _core_build("core", PACKAGE_DIR / "cpp", "rne_llm", libexecutorch)


@pytest.fixture(scope="module")
def jsi_binding_shared(libexecutorch: Path) -> Path:
    return _core_build("jsi", PACKAGE_DIR / "cpp" / "jsi" / "tests", "rne_jsi_binding_tests",
                       libexecutorch)


def _dynamic_symbols(binary: Path, *flags: str) -> set[str]:
    out = _run(["nm", "-D", "-C", *flags, str(binary)]).stdout
    # "<address> <type> <name>", the address absent for undefined symbols; names have spaces.
    return {m.group(1) for m in re.finditer(r"^\s*(?:[0-9a-f]+\s+)?[A-Za-z]\s+(.+)$", out, re.M)}


def _executorch_libraries(binary: Path) -> dict[str, str]:
    """ExecuTorch-ish libraries ``binary`` loads, name -> resolved path (ldd)."""
    libs = {}
    for line in _run(["ldd", str(binary)]).stdout.splitlines():
        name, _, where = line.strip().partition(" => ")
        if re.search(r"executorch|xnnpack|vulkan|mlx|portable|kernels", name, re.I):
            libs[name] = where.split(" (")[0]
    return libs


def test_soname_and_dependencies(libexecutorch: Path) -> None:
    dynamic = _run(["readelf", "-d", str(libexecutorch)]).stdout
    assert "Library soname: [libexecutorch.so]" in dynamic
    needed = set(re.findall(r"Shared library: \[(.+?)\]", dynamic))
    # Only the C/C++ runtimes and MLX's BLAS/LAPACK: nothing of ExecuTorch is loaded separately.
    assert not {n for n in needed if re.search(r"executorch|xnnpack|mlx", n)}, needed


def test_exports_are_the_executorch_api_and_nothing_else(libexecutorch: Path) -> None:
    exported = _dynamic_symbols(libexecutorch, "--defined-only")
    stray = sorted(s for s in exported if not _EXPORTED.match(s))
    assert stray == [], stray[:40]
    for needed in ("executorch::extension::module::Module::load_method(",
                   "executorch::runtime::runtime_init()",
                   "executorch::runtime::get_backend_class(",
                   "executorch::extension::make_tensor_ptr("):
        assert any(s.startswith(needed) for s in exported), needed


def test_rne_llm_links_only_our_library_and_answers_paris(
        libexecutorch: Path, rne_llm_shared: Path, smollm2_fp32, smollm2_checkpoint: Path) -> None:
    assert _executorch_libraries(rne_llm_shared) == {"libexecutorch.so": str(libexecutorch)}
    # Every ExecuTorch symbol the runner (and its CLI) uses comes from the export list.
    used = {s for s in _dynamic_symbols(rne_llm_shared, "--undefined-only") if "executorch::" in s}
    assert used and used <= _dynamic_symbols(libexecutorch, "--defined-only")
    done = _run([str(rne_llm_shared), "--json", "--model", str(smollm2_fp32.pte_path),
                 "--tokenizer", str(smollm2_checkpoint / "tokenizer.json"), PARIS], timeout=600)
    out = json.loads(done.stdout)
    assert "Paris" in out["text"], out["text"]
    assert out["stats"]["stop_reason"] == "eos"


def test_jsi_binding_links_only_our_library_and_runs_smollm2(
        libexecutorch: Path, jsi_binding_shared: Path, smollm2_fp32,
        smollm2_checkpoint: Path) -> None:
    assert _executorch_libraries(jsi_binding_shared) == {"libexecutorch.so": str(libexecutorch)}
    env = dict(os.environ, RNE_JSI_TEST_PTE=str(smollm2_fp32.pte_path),
               RNE_JSI_TEST_TOKENIZER=str(smollm2_checkpoint / "tokenizer.json"))
    result = subprocess.run([str(jsi_binding_shared), "--gtest_brief=1"], capture_output=True,
                            text=True, env=env, cwd=REPO_ROOT, check=False, timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-8000:]
    assert "FAILED" not in output and "PASSED" in output, output[-4000:]
