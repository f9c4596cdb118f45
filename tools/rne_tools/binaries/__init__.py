"""Rebuild the native ExecuTorch binaries the app links (``tools/build_binaries.py``).

- ``lock``: the pinned ExecuTorch source (``third-party/executorch.lock.json``).
- ``source_tree``, ``source_cache``: the locked sources written out of local git mirrors into
  the cache outside the work tree (``--platform linux``).
- ``patches``: the project's patch series (``third-party/patches/``, plus a platform's own
  ``third-party/patches/<platform>/``), applied all or nothing.
- ``plan``: typed steps with exact argument lists; ``platforms``: the plan for ios/android/linux/host.
- ``preflight``: every required tool checked up front, one message listing what is missing.
- ``executor``: runs a plan with progress and per-step logs.
- ``manifest``: ``third-party/<platform>/manifest.json`` write and verify; ``sizes``: the
  per-component size table of the host and linux-arm64 manifests.
- ``wheel_sdk``: the sha256-pinned aarch64 wheel's C++ SDK in the cache (``--platform linux-arm64``).
"""

from rne_tools.binaries.errors import BuildError, ManifestError, PatchError, PreflightError
from rne_tools.binaries.executor import BuildContext, execute
from rne_tools.binaries.lock import SourceLock, load_lock
from rne_tools.binaries.manifest import verify_manifest, write_manifest
from rne_tools.binaries.patches import apply_series, patch_series, platform_series
from rne_tools.binaries.plan import Plan
from rne_tools.binaries.platforms import ANDROID_ABIS, PLATFORMS, build_plan
from rne_tools.binaries.preflight import preflight

__all__ = [
    "ANDROID_ABIS",
    "PLATFORMS",
    "BuildContext",
    "BuildError",
    "ManifestError",
    "PatchError",
    "Plan",
    "PreflightError",
    "SourceLock",
    "apply_series",
    "build_plan",
    "execute",
    "load_lock",
    "patch_series",
    "platform_series",
    "preflight",
    "verify_manifest",
    "write_manifest",
]
