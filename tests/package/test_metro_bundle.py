"""Metro bundles the example app (apps/llm) for Android and iOS as a release build embeds it
(`expo export:embed --dev false`): every import resolves (Metro fails otherwise), the package
comes in through its `react-native` entry (src/), and nothing Node-only is in the bundle: no
Node built-in module, no `node:` specifier, none of the package's jest/Node-addon helpers."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time

import pytest

from rne_tools.paths import REPO_ROOT

APP = REPO_ROOT / "apps" / "llm"
# The package's files that only jest or the Node-API addon load.
NODE_ONLY = re.compile(r"packages/react-native-executorch/(src/testing/|__tests__/|jest|lib/)")


@pytest.fixture(scope="module")
def node_builtins() -> set[str]:
    out = subprocess.run(["node", "-p", "JSON.stringify(require('module').builtinModules)"],
                         capture_output=True, text=True, check=True).stdout
    return {m for m in json.loads(out) if not m.startswith("_")}


@pytest.mark.parametrize("platform", ["android", "ios"])
def test_example_app_bundles_without_node_only_modules(platform, tmp_path, node_builtins):
    bundle, sourcemap = tmp_path / f"{platform}.js", tmp_path / f"{platform}.js.map"
    env = {**os.environ, "CI": "1", "EXPO_NO_TELEMETRY": "1"}
    t = time.monotonic()
    result = subprocess.run(
        ["npx", "expo", "export:embed", "--platform", platform, "--dev", "false",
         "--entry-file", "index.js", "--bundle-output", str(bundle),
         "--assets-dest", str(tmp_path / "assets"), "--sourcemap-output", str(sourcemap)],
        cwd=APP, capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    print(f"\nmetro {platform}: {bundle.stat().st_size} bytes in {time.monotonic() - t:.1f} s")
    sources = json.loads(sourcemap.read_text())["sources"]
    ours = [s for s in sources if "packages/react-native-executorch/" in s]
    assert any(s.endswith("packages/react-native-executorch/src/index.ts") for s in ours)
    assert [s for s in ours if NODE_ONLY.search(s)] == []
    packages = {m.group(1) for s in sources
                if (m := re.search(r"node_modules/((?:@[^/]+/)?[^/]+)/", s))}
    assert sorted(packages & node_builtins) == []
    text = bundle.read_text()
    assert not re.search(r"""require\(["']node:""", text)
    assert "process.dlopen" not in text and ".node\")" not in text
