"""Dry-run plans: exact comparison with the reviewed expected plans, determinism, options."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rne_tools.binaries import (
    ANDROID_ABIS,
    BuildError,
    build_plan,
    load_lock,
    platform_series,
    shared_library,
)
from rne_tools.binaries.plan import ApplyPatches, Run, Stage, expand
from rne_tools.binaries.platforms import LINUX_COMPONENTS, LINUX_SHARED_LIBRARY_BUILD
from rne_tools.paths import REPO_ROOT

EXPECTED = Path(__file__).parents[1] / "fixtures" / "build_plans"
CLI = [sys.executable, str(REPO_ROOT / "tools" / "build_binaries.py")]


def _plan(platform, **kw):
    kw.setdefault("abis", ANDROID_ABIS)
    return build_plan(
        platform, lock=load_lock(), patches=[p.name for p in platform_series(platform)], jobs=4,
        **kw,
    )


@pytest.mark.parametrize(
    ("platform", "abis", "fixture"),
    [
        ("ios", ANDROID_ABIS, "ios.json"),
        ("android", ("arm64-v8a",), "android-arm64-v8a.json"),
        ("android", ("x86_64",), "android-x86_64.json"),
        ("linux", ANDROID_ABIS, "linux.json"),
    ],
)
def test_plan_matches_reviewed_expected_plan(platform, abis, fixture):
    expected = json.loads((EXPECTED / fixture).read_text())
    actual = _plan(platform, abis=abis).to_json()
    assert len(actual["steps"]) == len(expected["steps"])
    for i, (a, e) in enumerate(zip(actual["steps"], expected["steps"], strict=True)):
        assert a == e, f"step {i + 1} ({e['description']}) differs from {fixture}"
    assert actual == expected


def test_cli_dry_run_prints_the_expected_plan():
    out = subprocess.run(
        [*CLI, "--platform", "android", "--abi", "x86_64", "--dry-run", "--json", "--jobs", "4"],
        capture_output=True, text=True, check=True,
    ).stdout
    assert out == (EXPECTED / "android-x86_64.json").read_text()


def test_cli_dry_run_text_lists_every_command_in_order():
    out = subprocess.run(
        [*CLI, "--platform", "ios", "--dry-run", "--jobs", "4"],
        capture_output=True, text=True, check=True,
    ).stdout
    plan = _plan("ios")
    headers = [line for line in out.splitlines() if line.startswith("# [")]
    assert len(headers) == len(plan.steps)
    assert "xcodebuild -create-xcframework" in out
    assert out.index("-DPLATFORM=OS64") < out.index("-DPLATFORM=SIMULATORARM64") < out.index("-create-xcframework")


def test_same_inputs_same_plan_and_no_machine_paths():
    for platform in ("ios", "android", "host"):
        a, b = _plan(platform).dumps(), _plan(platform).dumps()
        assert a == b
        assert str(REPO_ROOT) not in a
        for step in json.loads(a)["steps"]:
            for arg in step.get("argv", []) + [c for cmd in step.get("commands", []) for c in cmd]:
                value = arg.split("=", 1)[1] if arg.startswith("-D") and "=" in arg else arg
                assert not value.startswith("/"), f"absolute path {arg!r} in the {platform} plan"


def test_android_plan_per_abi_and_vulkan_on():
    plan = _plan("android")
    configures = [s for s in plan.steps if isinstance(s, Run) and s.argv[:3] == ("cmake", "-S", "$SOURCE")]
    assert [next(a for a in s.argv if a.startswith("-DANDROID_ABI=")) for s in configures] == [
        "-DANDROID_ABI=arm64-v8a", "-DANDROID_ABI=x86_64",
    ]
    for s in configures:
        assert "-DEXECUTORCH_BUILD_VULKAN=ON" in s.argv and "-DEXECUTORCH_BUILD_XNNPACK=ON" in s.argv
        # The LunarG SDK's glslc, named (ExecuTorch would otherwise search PATH / $VULKAN_SDK).
        assert "-DGLSLC_PATH=$VULKAN_SDK/bin/glslc" in s.argv
        # No ExecuTorch JNI library: it is not what the app loads, and its configure step
        # downloads fbjni from Maven (the preset turns it on, so it must be turned off).
        assert "-DEXECUTORCH_BUILD_ANDROID_JNI=OFF" in s.argv
        assert dict(s.env) == {"ANDROID_NDK": "$NDK"}


def test_android_links_its_libexecutorch_so_with_the_shared_library_recipe():
    plan = _plan("android")
    links = [s for s in plan.steps if isinstance(s, Run) and shared_library.PROJECT in s.argv]
    assert len(links) == 2
    for link, abi in zip(links, ANDROID_ABIS, strict=True):
        whole, linked = shared_library.archives(
            f"$BUILD/android-{abi}", shared_library.ANDROID_COMPONENTS, arm64=abi == "arm64-v8a")
        assert f"-DRNE_WHOLE_ARCHIVES={';'.join(whole)}" in link.argv
        assert f"-DRNE_ARCHIVES={';'.join(linked)}" in link.argv
        assert f"-DANDROID_ABI={abi}" in link.argv and "-DANDROID_STL=c++_shared" in link.argv
        assert set(link.inputs) == {*whole, *linked}
    whole_names = {a.rsplit("/", 1)[1] for a in whole}
    assert {"libxnnpack_backend.a", "libvulkan_backend.a", "libcustom_ops.a",
            "liboptimized_native_cpu_ops_lib.a", "libquantized_ops_lib.a"} <= whole_names
    staged = {s.dest: s.src for s in plan.steps if isinstance(s, Stage)}
    for abi in ANDROID_ABIS:
        assert staged[f"$REPO/third-party/android/{abi}/libexecutorch.so"] == (
            f"$BUILD/android-{abi}/shared/libexecutorch.so")
    assert staged["$REPO/third-party/android/include"] == "$BUILD/android-arm64-v8a/install/include"
    assert not any("executorch_jni" in " ".join(getattr(s, "argv", ())) for s in plan.steps)


def test_android_without_vulkan_drops_the_delegate_and_its_shader_compiler():
    """The opt-out of an app that ships no Vulkan model: nothing of Vulkan is built or linked."""
    plan = _plan("android", components=("kernels", "xnnpack"))
    for step in plan.steps:
        argv = " ".join(getattr(step, "argv", ()))
        assert "vulkan_backend" not in argv and "GLSLC_PATH" not in argv
        if getattr(step, "argv", ())[:3] == ("cmake", "-S", "$SOURCE"):
            assert "-DEXECUTORCH_BUILD_VULKAN=OFF" in step.argv
            assert "-DEXECUTORCH_BUILD_XNNPACK=ON" in step.argv
    with pytest.raises(BuildError, match="unknown Android component mlx"):
        _plan("android", components=("kernels", "mlx"))
    out = subprocess.run([*CLI, "--platform", "android", "--abi", "arm64-v8a", "--components",
                          "kernels,xnnpack", "--dry-run"], capture_output=True, text=True,
                         check=True).stdout
    assert "-DEXECUTORCH_BUILD_VULKAN=OFF" in out and "libvulkan_backend.a" not in out


def test_ios_archives_include_the_llm_cache_the_mlx_delegate_needs():
    merge = next(s for s in _plan("ios").steps
                 if isinstance(s, Run) and "libtool" in s.argv and "$BUILD/ios-device/lib/Release/libmlxdelegate.a" in s.argv)
    assert "$BUILD/ios-device/lib/Release/libextension_llm_cache.a" in merge.argv


def test_ios_mlx_only_on_device():
    configures = {s.argv[4]: s.argv for s in _plan("ios").steps if isinstance(s, Run) and "-S" in s.argv}
    assert "-DEXECUTORCH_BUILD_MLX=ON" in configures["$BUILD/ios-device"]
    assert "-DEXECUTORCH_BUILD_MLX=OFF" in configures["$BUILD/ios-simulator-arm64"]
    assert "-DEXECUTORCH_BUILD_MLX=OFF" in configures["$BUILD/ios-simulator-x86_64"]


def test_patches_are_applied_after_checkout_and_before_any_build():
    plan = build_plan("android", lock=load_lock(), patches=["0001-a.patch", "0002-b.patch"],
                      abis=("x86_64",), jobs=2)
    kinds = [s.kind for s in plan.steps]
    i = kinds.index("patches")
    assert all(k == "run" for k in kinds[:i])
    assert not any("-S" in s.argv for s in plan.steps[:i] if isinstance(s, Run))
    step = plan.steps[i]
    assert isinstance(step, ApplyPatches)
    assert step.to_json()["commands"] == [
        ["git", "-C", "$SOURCE", "apply", "--whitespace=nowarn", "$REPO/third-party/patches/0001-a.patch"],
        ["git", "-C", "$SOURCE", "apply", "--whitespace=nowarn", "$REPO/third-party/patches/0002-b.patch"],
    ]


def test_ref_and_source_options():
    lock = load_lock()
    default = _plan("android", abis=("x86_64",))
    assert any(lock.commit in s.argv for s in default.steps if isinstance(s, Run))
    with_ref = _plan("android", abis=("x86_64",), ref="v1.5.0")
    fetch = next(s for s in with_ref.steps if isinstance(s, Run) and "fetch" in s.argv)
    assert fetch.argv[-1] == "v1.5.0"
    existing = _plan("android", abis=("x86_64",), use_existing_source=True)
    assert existing.steps[0].kind == "patches"
    assert not any("git" == s.argv[0] for s in existing.steps if isinstance(s, Run))


def test_bad_options_are_clear_errors():
    with pytest.raises(BuildError, match="unknown Android ABI armeabi-v7a"):
        _plan("android", abis=("armeabi-v7a",))
    with pytest.raises(BuildError, match="--jobs must be at least 1"):
        build_plan("ios", lock=load_lock(), patches=[], jobs=0)
    with pytest.raises(BuildError, match="unknown platform"):
        _plan("windows")
    result = subprocess.run([*CLI, "--platform", "ios", "--abi", "x86_64", "--dry-run"],
                            capture_output=True, text=True)
    assert result.returncode == 1
    assert "--abi only applies to --platform android" in result.stderr


def test_expand_placeholders():
    values = {"$REPO": "/r", "$BUILD": "/b"}
    assert expand("-DX=$BUILD/lib:$REPO", values) == "-DX=/b/lib:/r"
    assert expand("$BUILDER", values) == "$BUILDER"  # only whole placeholder names
    with pytest.raises(BuildError, match=r"\$NDK.*ANDROID_NDK"):
        expand("$NDK/build", values)


def test_lock_pins_the_wheel_commit():
    lock = load_lock()
    assert len(lock.commit) == 40 and lock.wheel == "executorch==1.5.1"
    from executorch import version

    # The source commit moved off the wheel's (the lock's note says why); the wheel stays pinned.
    assert version.git_version == lock.wheel_commit


def test_linux_plan_builds_the_chosen_components_from_the_cache():
    lock = load_lock()
    full = _plan("linux")
    assert full.platform == "linux" and full.steps[0].kind == "patches"
    runs = [s for s in full.steps if isinstance(s, Run)]
    assert "glslc_exe" in runs[1].argv  # Vulkan needs the locked glslc, built first
    et_configure = next(s for s in runs if s.description.startswith("configure ExecuTorch"))
    assert et_configure.argv[4] == f"$CACHE/build/executorch-{lock.short}"
    for flag in ("XNNPACK", "VULKAN", "MLX", "KERNELS_LLM"):
        assert f"-DEXECUTORCH_BUILD_{flag}=ON" in et_configure.argv
    assert not any("$REPO/.cache" in a or a.startswith("/") for s in runs for a in s.argv)
    mlx_only = _plan("linux", components=("mlx",))
    configure = next(s for s in mlx_only.steps if isinstance(s, Run) and "configure ExecuTorch" in s.description)
    assert "-DEXECUTORCH_BUILD_VULKAN=OFF" in configure.argv and "-DEXECUTORCH_BUILD_MLX=ON" in configure.argv
    assert not any("glslc" in s.description for s in mlx_only.steps)
    with pytest.raises(BuildError, match="unknown linux component cuda"):
        _plan("linux", components=("cuda",))


def test_linux_plan_links_libexecutorch_so_with_the_android_recipe():
    """The same archive lists, export list and SONAME as Android, for the components built."""
    et_build = f"$CACHE/build/executorch-{load_lock().short}"
    for components in (LINUX_COMPONENTS, ("kernels", "xnnpack", "vulkan")):
        steps = _plan("linux", components=components).steps
        names = [s.description for s in steps]
        configure = names.index(
            "configure libexecutorch.so from those archives (the Android recipe, cpp/shared_library)")
        assert names[configure - 1] == "install ExecuTorch into the cache"
        assert names[configure + 1] == "link libexecutorch.so"
        whole, linked = shared_library.archives(et_build, ("runtime", *components))
        system = ("lapack", "blas") if "mlx" in components else ()
        assert steps[configure].argv == shared_library.configure_argv(
            LINUX_SHARED_LIBRARY_BUILD, whole, linked, system_libraries=system)
        assert set(steps[configure].inputs) == {*whole, *linked}
        assert steps[configure + 1].argv == shared_library.build_argv(LINUX_SHARED_LIBRARY_BUILD)
