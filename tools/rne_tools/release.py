"""A maintainer's release of one package version: binaries, model variants, locks, tarball.

``tools/release.py`` composes the release steps the other tools implement, in an order that
leaves nothing half-published:

1. **Check** that ``package.json`` is at the release version.
2. **Build** what this host can: each of the iOS and Android backend sets ("all", "cpu") that no
   ``--staged`` directory supplies is built with ``tools/build_binaries.py`` where the platform's
   preflight passes (Xcode on macOS, the NDK), and skipped with the preflight's reason where not.
3. **Verify** everything locally: every staging is checked and zipped
   (``binaries.release.plan_release``: manifest, sha256, 16 KB pages, ABI, size budget), every
   model variant's export (from an exports directory, or made now by the export pipeline with
   the registry's recipe) and tokenizer read (``publish.plan_publish``: a passed verification,
   unchanged ``.pte``). Then, read-only, **against the Hub**: the token, and each repository's
   tag: absent (to be created), identical (nothing to upload) or different (refused: a tag is an
   immutable release).
4. **Publish**: the binaries in one commit tagged ``v<version>``, then each model in one commit
   tagged ``v<version>``. Each writer records only what the Hub serves back byte for byte: the
   lock right after the binaries' tag is confirmed, a model's registry entry (YAML and generated
   TypeScript) right after its tag is confirmed.
5. **Pack**: ``npm pack`` of the package, whose tarball must carry this version and the lock.

Guarantees: nothing is uploaded before every artifact and export verified and every tag was
checked; a failed upload leaves its repository unchanged (the Hub makes the commit only once
every file landed); a lock or registry entry is never written for bytes the Hub does not serve.
A failure after the binaries' tag leaves that tag and its lock in place, and re-running the same
command finishes the release: tags holding identical bytes are not uploaded again.

``dry_run``: every local check, zips into a temporary directory, the read-only Hub checks and
``npm pack --dry-run``; no build, no upload, no file written outside the temporary directory
(``npm pack`` compiles the package's ``lib/``, a build output).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from huggingface_hub import HfApi, get_token
from huggingface_hub.errors import RepositoryNotFoundError

from rne_tools import registry
from rne_tools.binaries.executor import build_env, stable_interpreter
from rne_tools.binaries.preflight import preflight
from rne_tools.binaries.release import (
    BACKEND_SETS,
    BUDGET_PATH,
    LOCK_PATH,
    PACKAGE_DIR,
    RELEASE_PLATFORMS,
    Artifact,
    inspect_staging,
    load_budget,
    lock_document,
    package_version,
    plan_release,
    write_lock,
)
from rne_tools.errors import RneError
from rne_tools.paths import REGISTRY_DIR, REPO_ROOT
from rne_tools.publish import PublishPlan, plan_publish, publish
from rne_tools.publish.binaries import DEFAULT_REPO, base_url, planned_files, publish_binaries
from rne_tools.publish.publisher import _NETWORK_ERRORS, PlannedFile, _api, _mismatches
from rne_tools.publish.registry_update import PublishedFile
from rne_tools.registry import codegen

BUILD_TOOL = REPO_ROOT / "tools" / "build_binaries.py"


class ReleaseError(RneError):
    """The release cannot go on; the message says what is wrong and what to do."""


@dataclass(frozen=True)
class ModelRequest:
    """``--model ID[:backend,...]``: a model's variants (all when none named) and its tokenizer."""

    model_id: str
    backends: tuple[str, ...] = ()
    tokenizer_dir: Path | None = None

    @classmethod
    def parse(cls, text: str) -> ModelRequest:
        model_id, _, backends = text.partition(":")
        if not model_id:
            raise ReleaseError(f"--model {text!r}: expected ID or ID:backend[,backend]")
        return cls(model_id, tuple(b for b in backends.split(",") if b))


@dataclass(frozen=True)
class BuildStep:
    """What the release does about one platform's backend set."""

    platform: str
    backend_set: str
    action: str  # "staged", "build", "skip"
    detail: str  # the staging, the build command, or why it is skipped
    command: tuple[str, ...] = ()


@dataclass
class ReleasePlan:
    version: str
    builds: list[BuildStep]
    artifacts: list[Artifact] = field(default_factory=list)
    models: list[PublishPlan] = field(default_factory=list)
    hub: list[str] = field(default_factory=list)  # what the Hub holds now, per repository

    @property
    def tag(self) -> str:
        return f"v{self.version}"

    def upload_bytes(self) -> int:
        files = planned_files(self.artifacts) + [f for m in self.models for f in m.files()]
        return sum(f.size for f in files)


def _log(echo: Callable[[str], None] | None, text: str) -> None:
    if echo is not None:
        echo(text)


def check_version(version: str, package_dir: Path = PACKAGE_DIR) -> None:
    found = package_version(package_dir)
    if found != version:
        raise ReleaseError(
            f"the release is {version} but {package_dir / 'package.json'} is at {found}: bump the "
            f"package first (`npm version {version} --no-git-tag-version -w "
            f"react-native-executorch` at the repository root) or release {found}")


def _build_command(platform: str, backend_set: str) -> tuple[str, ...]:
    cmd = [sys.executable, str(BUILD_TOOL), "--platform", platform]
    if backend_set == "cpu":
        cmd += ["--components", "xnnpack"]
    return tuple(cmd)


def plan_builds(staged: Sequence[Path], build: bool,
                can_build: Callable[[str], str | None] | None = None) -> list[BuildStep]:
    """One step per release platform and backend set: the ``staged`` directory that supplies it,
    a build, or a skip with its reason. ``can_build(platform)`` is None when the host can build
    the platform, else why not (default: the build's own preflight)."""
    can_build = can_build or _preflight_problem
    steps, covered = [], {}
    for root in staged:
        for b in inspect_staging(root):
            covered.setdefault((b.platform, b.backend_set), root)
    reasons: dict[str, str | None] = {}
    for platform in RELEASE_PLATFORMS:
        # cpu first: the "all" build is the one left in third-party/<platform> afterwards.
        for backend_set in reversed(BACKEND_SETS):
            if (platform, backend_set) in covered:
                steps.append(BuildStep(platform, backend_set, "staged",
                                       str(covered[(platform, backend_set)])))
                continue
            if not build:
                steps.append(BuildStep(platform, backend_set, "skip", "--no-build"))
                continue
            if platform == "ios" and backend_set == "cpu":
                steps.append(BuildStep(platform, backend_set, "skip",
                                       "build_binaries.py builds iOS with every backend only; "
                                       "stage a CPU-only xcframework by hand and pass --staged"))
                continue
            if platform not in reasons:
                reasons[platform] = can_build(platform)
            if reasons[platform] is not None:
                steps.append(BuildStep(platform, backend_set, "skip", reasons[platform]))
                continue
            cmd = _build_command(platform, backend_set)
            steps.append(BuildStep(platform, backend_set, "build", " ".join(cmd[1:]), cmd))
    return steps


def _preflight_problem(platform: str) -> str | None:
    python = stable_interpreter()
    report = preflight(platform, python=python, env=build_env(python, os.environ))
    if not report.problems:
        return None
    return "; ".join(f"{p.what} (fix: {p.fix})" for p in report.problems)


def run_builds(steps: list[BuildStep], out_dir: Path,
               echo: Callable[[str], None] | None = None) -> list[Path]:
    """Run the planned builds; each staging is copied aside to ``out_dir/staging/<platform>-
    <set>`` (the next build overwrites ``third-party/<platform>``). The stagings to release."""
    stagings = []
    for step in steps:
        if step.action == "staged":
            stagings.append(Path(step.detail))
        elif step.action == "build":
            _log(echo, f"building {step.platform} {step.backend_set}: {step.detail}")
            done = subprocess.run(step.command, cwd=REPO_ROOT)
            if done.returncode != 0:
                raise ReleaseError(
                    f"building {step.platform} ({step.backend_set}) failed (exit "
                    f"{done.returncode}; its output is above): fix it and re-run, or build it "
                    "yourself and pass the staging with --staged. Nothing was uploaded.")
            target = out_dir / "staging" / f"{step.platform}-{step.backend_set}"
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(REPO_ROOT / "third-party" / step.platform, target)
            stagings.append(target)
    return stagings


def plan_models(requests: Sequence[ModelRequest], version: str, exports_dir: Path | None,
                registry_dir: Path, allow_random_weights: bool = False) -> list[PublishPlan]:
    if not requests:
        return []
    if exports_dir is None:
        raise ReleaseError("--model needs --exports-dir (the directory tools/export_model.py "
                           "--output-dir and export_encoder.py wrote the verified exports to) or "
                           "--export (export them now)")
    plans = []
    for r in requests:
        tokenizer_dir = r.tokenizer_dir or _default_tokenizer_dir(r.model_id, registry_dir)
        plans.append(plan_publish(r.model_id, f"v{version}", exports_dir, tokenizer_dir,
                                  backends=r.backends or None, registry_dir=registry_dir,
                                  allow_random_weights=allow_random_weights))
    return plans


def export_models(requests: Sequence[ModelRequest], registry_dir: Path, exports_dir: Path, *,
                  dry_run: bool, random_config: str | None = None,
                  echo: Callable[[str], None] | None = None) -> None:
    """Each requested variant through the export pipeline with ``registry_dir``'s recipe (the
    registry the release records into), verified, into ``exports_dir``. An identical verified
    export in the export cache is reused; a dry run exports what is not cached into a temporary
    cache, never the machine's. ``random_config``: a tiny random-weight config (tests only)."""
    from rne_tools.export import plan_export, run_cached_export
    from rne_tools.export.cache import find_cached_export

    reg = registry.load_registry(registry_dir)
    exports_dir.mkdir(parents=True, exist_ok=True)
    for r in requests:
        spec = reg.model(r.model_id)
        for backend in r.backends or spec.variants:
            v = spec.variant(backend)
            if v.assistant is not None:
                raise ReleaseError(
                    f"{r.model_id}/{backend} declares an assistant drafter "
                    f"({v.assistant.file.path}), which --export does not make: export the variant "
                    "and, with --assistant (the checkpoint of "
                    f"{v.assistant.hf_repo}) and --verify-tokens {v.assistant.verify_tokens}, its "
                    "assistant program with tools/export_model.py, and pass the directory with "
                    "--exports-dir (the assistant's export in its assistant/ folder)")
            if v.encoders:
                raise ReleaseError(
                    f"{r.model_id}/{backend} lists encoders ({', '.join(v.encoders)}), which "
                    "--export does not make: export the variant and its encoders with "
                    "tools/export_model.py and tools/export_encoder.py into a directory and pass "
                    "it with --exports-dir")
            plan = plan_export(r.model_id, backend, v.quantization, random_config=random_config,
                               max_context=v.max_context, max_chunk=v.max_chunk,
                               embedding_quantization=v.embedding_quantization,
                               group_size=v.group_size,
                               embedding_group_size=v.embedding_group_size)
            with tempfile.TemporaryDirectory(prefix="rne-release-cache-") as tmp:
                result = find_cached_export(plan)
                if result is None:
                    _log(echo, f"exporting {r.model_id}/{backend} (not in the export cache: "
                               "minutes)")
                    result = run_cached_export(plan, cache_dir=Path(tmp) if dry_run else None,
                                               progress=False)
                for path in (result.pte_path, result.report_path):
                    shutil.copyfile(path, exports_dir / path.name)
            _log(echo, f"  export {result.pte_path.name}: verification "
                       f"{result.report['verification']['status']}")


def _default_tokenizer_dir(model_id: str, registry_dir: Path) -> Path:
    from rne_tools.errors import ExportError
    from rne_tools.gguf_import import default_checkpoint

    try:
        return default_checkpoint(model_id, registry_dir=registry_dir)
    except ExportError:  # a source the tooling does not import by itself
        raise ReleaseError(
            f"{model_id} needs --tokenizer-dir {model_id}=DIR: the checkpoint directory its "
            "variants were exported from (it holds tokenizer.json and tokenizer_config.json)"
        ) from None


def _hub_state(api: HfApi, repo: str, tag: str, files: list[PlannedFile],
               kept: Sequence[PublishedFile]) -> str:
    """Read-only: what ``repo`` holds for ``tag``, or a ReleaseError when publishing would be
    refused (the tag holds other bytes; files the registry keeps are gone from main)."""
    try:
        refs = api.list_repo_refs(repo)
    except RepositoryNotFoundError:
        return "new repository"
    tags = {t.name for t in refs.tags}
    if tag in tags:
        problems = _mismatches(api, repo, tag, files, kept)
        if problems:
            raise ReleaseError(
                f"{repo} already has tag {tag} with other files ({'; '.join(problems)}); a tag is "
                "an immutable release: bump the package version and release again. Nothing was "
                "uploaded.")
        return f"tag {tag} already holds these files: nothing to upload"
    head = next((b.target_commit for b in refs.branches if b.name == "main"), None)
    missing = _mismatches(api, repo, head or "main", [], kept) if kept else []
    if missing:
        raise ReleaseError(
            f"the registry records files as published that the main branch of {repo} does not "
            f"hold ({'; '.join(missing)}): add those variants to --model so the new tag has "
            "them. Nothing was uploaded.")
    return f"tag {tag} to be created"


def check_hub(plan: ReleasePlan, repo: str, endpoint: str | None, token: str | None) -> None:
    """The token and every repository's tag, before any upload (fills ``plan.hub``)."""
    api = _api(endpoint, token)
    try:
        if plan.artifacts:
            state = _hub_state(api, repo, plan.tag, planned_files(plan.artifacts), [])
            plan.hub.append(f"{repo}: {state}")
        for m in plan.models:
            plan.hub.append(f"{m.repo}: {_hub_state(api, m.repo, m.revision, m.files(), m.kept)}")
    except ReleaseError:
        raise
    except _NETWORK_ERRORS as exc:
        raise ReleaseError(f"cannot check the Hub at {api.endpoint}: {exc}. Nothing was "
                           "uploaded; re-run when it is reachable.") from exc


@dataclass(frozen=True)
class Packed:
    filename: str
    size: int
    unpacked_size: int
    entries: int
    tarball: Path | None  # None in a dry run


def pack_package(version: str, package_dir: Path, dest: Path | None,
                 lock_path: Path) -> Packed:
    """``npm pack`` (into ``dest``; ``--dry-run`` when None), checked: this version, the lock
    inside, and (a real pack of the package's own lock) the lock as written."""
    cmd = ["npm", "pack", "--json"]
    cmd += ["--dry-run"] if dest is None else ["--pack-destination", str(dest)]
    try:
        done = subprocess.run(cmd, cwd=package_dir, capture_output=True, text=True, timeout=900)
    except FileNotFoundError:
        raise ReleaseError("npm is not on PATH: install Node 20 (scripts/setup.sh), then pack "
                           f"by hand (`npm pack` in {package_dir}); the uploads and locks of "
                           "this release stand") from None
    if done.returncode != 0:
        raise ReleaseError(f"`{' '.join(cmd)}` failed in {package_dir}:\n{done.stderr[-2000:]}\n"
                           "Fix the package build (`npm run build`) and pack it by hand; the "
                           "uploads and locks of this release stand.")
    info = json.loads(done.stdout[done.stdout.index("["):])[0]
    if info["version"] != version:
        raise ReleaseError(f"npm packed version {info['version']}, not {version}: check "
                           f"{package_dir / 'package.json'}")
    if "binaries.lock.json" not in {f["path"] for f in info["files"]}:
        raise ReleaseError("the tarball has no binaries.lock.json: add it to package.json's "
                           "files, or apps cannot fetch the binaries")
    tarball = None
    if dest is not None:
        tarball = dest / info["filename"]
        with tarfile.open(tarball) as tar:
            packed_lock = tar.extractfile("package/binaries.lock.json").read()
        if lock_path.resolve() == (package_dir / "binaries.lock.json").resolve() and \
                packed_lock != lock_path.read_bytes():
            tarball.unlink()
            raise ReleaseError(f"the tarball's binaries.lock.json is not {lock_path} as this "
                               "release wrote it (was it changed meanwhile?); re-run the release")
        if json.loads(packed_lock).get("version") != version:
            tarball.unlink()
            raise ReleaseError(f"the tarball's binaries.lock.json is for version "
                               f"{json.loads(packed_lock).get('version')}, not {version}: publish "
                               "this version's binaries (pass their stagings with --staged)")
    return Packed(info["filename"], info["size"], info["unpackedSize"], info["entryCount"], tarball)


@dataclass
class ReleaseResult:
    plan: ReleasePlan
    binaries: str = ""
    models: list[str] = field(default_factory=list)
    packed: Packed | None = None


def release(
    version: str,
    *,
    staged: Sequence[Path] = (),
    build: bool = True,
    models: Sequence[ModelRequest] = (),
    exports_dir: Path | None = None,
    export: bool = False,
    random_config: str | None = None,
    out_dir: Path = REPO_ROOT / "build" / "release",
    repo: str = DEFAULT_REPO,
    endpoint: str | None = None,
    token: str | None = None,
    package_dir: Path = PACKAGE_DIR,
    lock_path: Path = LOCK_PATH,
    budget_path: Path = BUDGET_PATH,
    registry_dir: Path = REGISTRY_DIR,
    ts_output: Path = codegen.GENERATED_TS,
    pack: bool = True,
    allow_random_weights: bool = False,
    dry_run: bool = False,
    echo: Callable[[str], None] | None = None,
    can_build: Callable[[str], str | None] | None = None,
) -> ReleaseResult:
    """Release ``version`` (module docstring: the steps and their guarantees)."""
    check_version(version, package_dir)
    if export and exports_dir is not None:
        raise ReleaseError("pass --export (export the variants now) or --exports-dir (exported "
                           "already), not both")
    steps = plan_builds(staged, build, can_build)
    plan = ReleasePlan(version, steps)
    _log(echo, f"release {version}")
    _log(echo, "binaries:")
    for s in steps:
        verb = {"staged": "staged", "build": "would build" if dry_run else "build",
                "skip": "SKIPPED"}[s.action]
        _log(echo, f"  {s.platform}-{s.backend_set:4} {verb}: {s.detail}")
    if dry_run:
        with tempfile.TemporaryDirectory(prefix="rne-release-") as tmp:
            if export:
                exports_dir = Path(tmp) / "exports"
                export_models(models, registry_dir, exports_dir, dry_run=True,
                              random_config=random_config, echo=echo)
            _verify(plan, staged, models, exports_dir, Path(tmp), budget_path, registry_dir,
                    package_dir, lock_path, allow_random_weights, echo)
            if token is not None or get_token():
                check_hub(plan, repo, endpoint, token)
            else:
                plan.hub.append("not checked: no Hugging Face token (set HF_TOKEN)")
            _describe(plan, echo)
            if plan.artifacts:
                from huggingface_hub import constants

                url = base_url(endpoint or constants.ENDPOINT, repo, version)
                _log(echo, "lock to write:\n" + json.dumps(
                    lock_document(version, url, plan.artifacts), indent=2, sort_keys=True))
            result = ReleaseResult(plan)
            if pack:
                result.packed = pack_package(version, package_dir, None, lock_path)
                _log(echo, f"npm pack (dry run): {result.packed.filename}, {result.packed.size} "
                           f"bytes packed, {result.packed.entries} files; the real tarball "
                           "carries the lock above")
            _log(echo, f"dry run: nothing built or uploaded; {lock_path}, {registry_dir} and "
                       f"{ts_output} unchanged")
            return result

    stagings = run_builds(steps, out_dir, echo)
    if export:
        exports_dir = out_dir / version / "exports"
        export_models(models, registry_dir, exports_dir, dry_run=False,
                      random_config=random_config, echo=echo)
    _verify(plan, stagings, models, exports_dir, out_dir / version, budget_path, registry_dir,
            package_dir, lock_path, allow_random_weights, echo)
    check_hub(plan, repo, endpoint, token)
    _describe(plan, echo)
    result = ReleaseResult(plan)
    if plan.artifacts:
        published = publish_binaries(plan.artifacts, version, repo=repo, endpoint=endpoint,
                                     token=token)
        write_lock(lock_document(version, published.base_url, plan.artifacts), lock_path)
        result.binaries = (f"{published.repo}@{published.tag} ({published.commit[:12]}) "
                           f"{'created' if published.new_tag else 'already held these binaries'}")
        _log(echo, f"published {result.binaries}; {lock_path} written")
    for m in plan.models:
        done = publish(m, endpoint=endpoint, token=token, registry_dir=registry_dir,
                       ts_output=ts_output)
        line = (f"{done.repo}@{done.revision} ({done.commit[:12]}) "
                f"{'created' if done.new_tag else 'already held these files'}; registry "
                f"{'updated' if done.registry_changed else 'unchanged'}")
        result.models.append(line)
        _log(echo, f"published {line}")
    if pack:
        out_dir.mkdir(parents=True, exist_ok=True)
        result.packed = pack_package(version, package_dir, out_dir, lock_path)
        _log(echo, f"packed {result.packed.tarball} ({result.packed.size} bytes, "
                   f"{result.packed.entries} files)")
    return result


def _verify(plan: ReleasePlan, stagings: Sequence[Path], models: Sequence[ModelRequest],
            exports_dir: Path | None, zip_dir: Path, budget_path: Path, registry_dir: Path,
            package_dir: Path, lock_path: Path, allow_random_weights: bool,
            echo: Callable[[str], None] | None) -> None:
    """Every local check, before any network access: the stagings zipped into ``zip_dir``, the
    models' exports and tokenizers read, and a lock the tarball can ship."""
    plan.artifacts = plan_release(list(stagings), plan.version, zip_dir, load_budget(budget_path))
    plan.models = plan_models(models, plan.version, exports_dir, registry_dir,
                              allow_random_weights)
    if not plan.artifacts:
        current = json.loads(lock_path.read_text()).get("version")
        if current != plan.version:
            raise ReleaseError(
                f"no binaries to release, and {lock_path} is for version {current}: the tarball "
                f"would carry a lock apps refuse. Pass the {plan.version} stagings with --staged "
                "(or build on a host with the NDK or Xcode)")
        _log(echo, f"note: no binaries in this release; {lock_path} (version {current}) stays")
    if not plan.artifacts and not plan.models:
        raise ReleaseError("nothing to release: pass --staged directories, build on a host with "
                           "the NDK or Xcode, or name models with --model")


def _describe(plan: ReleasePlan, echo: Callable[[str], None] | None) -> None:
    if plan.artifacts:
        _log(echo, "binary artifacts (verified):")
        for a in plan.artifacts:
            _log(echo, f"  {a.build.name:24} {a.size:>11} bytes  sha256 {a.sha256}  "
                       f"({a.manifest['unpacked_size']} unpacked; {', '.join(a.build.backends)})")
    for m in plan.models:
        _log(echo, f"model {m.model.id} -> {m.repo}@{m.revision} (verified):")
        for f in m.files():
            _log(echo, f"  {f.path:40} {f.size:>11} bytes  sha256 {f.sha256}")
    _log(echo, "hub:")
    for line in plan.hub:
        _log(echo, f"  {line}")
    _log(echo, f"upload: {plan.upload_bytes()} bytes at most (files a tag already holds are "
               "not sent)")
