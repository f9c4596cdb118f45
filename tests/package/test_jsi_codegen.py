"""React Native codegen over the TurboModule spec (src/native/NativeRNExecutorch.ts), checked
against the platform glue that implements it (ios/RNExecutorch.mm, android/.../RNExecutorchModule.kt).

The glue cannot be compiled here (no Xcode, no Android SDK), but the interfaces codegen
generates from the spec can: this runs the installed `@react-native/codegen` exactly as the app
build would and checks that the names and signatures the glue relies on are the generated ones.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from rne_tools.paths import PACKAGE_DIR, REPO_ROOT

CODEGEN = REPO_ROOT / "node_modules" / "@react-native" / "codegen" / "lib" / "cli"


def _node(*args: str) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not on PATH (Node 20 is part of the toolchain).")
    result = subprocess.run([node, *args], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr[-4000:]


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not CODEGEN.is_dir():
        pytest.fail(f"{CODEGEN} is missing: run `npm ci` at the repo root first.")
    out = tmp_path_factory.mktemp("codegen")
    config = json.loads((PACKAGE_DIR / "package.json").read_text())["codegenConfig"]
    schema = out / "schema.json"
    _node(str(CODEGEN / "combine" / "combine-js-to-schema-cli.js"), str(schema),
          str(PACKAGE_DIR / config["jsSrcsDir"]))
    _node(str(CODEGEN / "generators" / "generate-all.js"), str(schema), config["name"],
          str(out), config["name"], config["android"]["javaPackageName"])
    return out


def test_spec_declares_the_installer_module(generated: Path) -> None:
    modules = json.loads((generated / "schema.json").read_text())["modules"]
    assert list(modules) == ["NativeRNExecutorch"]
    spec = modules["NativeRNExecutorch"]
    assert spec["moduleName"] == "RNExecutorch"
    assert [m["name"] for m in spec["spec"]["methods"]] == ["install"]


def test_android_module_implements_the_generated_spec(generated: Path) -> None:
    java = (generated / "java" / "RNExecutorchSpec" / "NativeRNExecutorchSpec.java").read_text()
    assert "public abstract class NativeRNExecutorchSpec" in java
    assert "public abstract boolean install();" in java
    kotlin = (PACKAGE_DIR / "android/src/main/java/com/swmansion/rnexecutorch/RNExecutorchModule.kt").read_text()
    assert "NativeRNExecutorchSpec(context)" in kotlin
    assert "override fun install(): Boolean" in kotlin
    gradle = (PACKAGE_DIR / "android" / "build.gradle").read_text()
    assert 'libraryName = "RNExecutorchSpec"' in gradle
    assert 'codegenJavaPackageName = "com.swmansion.rnexecutorch"' in gradle


def test_ios_module_implements_the_generated_spec(generated: Path) -> None:
    header = (generated / "RNExecutorchSpec" / "RNExecutorchSpec.h").read_text()
    assert "@protocol NativeRNExecutorchSpec" in header
    assert "- (NSNumber *)install;" in header
    assert "class JSI_EXPORT NativeRNExecutorchSpecJSI" in header
    objc_header = (PACKAGE_DIR / "ios" / "RNExecutorch.h").read_text()
    assert "#import <RNExecutorchSpec/RNExecutorchSpec.h>" in objc_header
    assert "<NativeRNExecutorchSpec, RCTTurboModuleWithJSIBindings>" in objc_header
    objc = (PACKAGE_DIR / "ios" / "RNExecutorch.mm").read_text()
    assert "- (NSNumber *)install" in objc
    assert "NativeRNExecutorchSpecJSI>(params)" in objc
    assert "RCT_EXPORT_MODULE(RNExecutorch)" in objc
