"""Publish verified variants of a registry model to its Hugging Face repository.

Two phases, so that nothing half-done is ever recorded:

1. ``plan_publish`` (local, no network): read each variant's export and the encoders it lists,
   and refuse anything whose report does not show a passed verification, whose ``.pte`` changed
   since, or an encoder not as wide as its text variant; collect the tokenizer files; render the
   model card. An encoder several variants list (one path) is one file of the commit.
2. ``publish``: check the token, create the repository if needed, upload every file in ONE
   commit (the Hub only creates the commit once every LFS upload has landed, so a failure
   mid-upload leaves the repository unchanged), tag it, confirm the tag serves exactly the
   planned files, and only then update the registry YAML and regenerate the TypeScript.

Idempotent: files identical to the repository's are not uploaded; if nothing changed no commit is
made; re-running with an existing tag that already holds these files changes nothing.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx2
from huggingface_hub import CommitOperationAdd, HfApi, get_token
from huggingface_hub.errors import HfHubHTTPError
from huggingface_hub.utils import sha

from rne_tools import registry
from rne_tools.paths import REGISTRY_DIR, contained_path
from rne_tools.publish.errors import PublishError
from rne_tools.publish.exports import (
    AssistantArtifact,
    EncoderArtifact,
    ExportArtifact,
    check_plain_export,
    read_assistant,
    read_encoder,
    read_export,
    text_width,
)
from rne_tools.publish.model_card import (
    CardAssistant,
    CardEncoder,
    CardVariant,
    render_model_card,
)
from rne_tools.publish.registry_update import PublishedFile, update_registry
from rne_tools.registry import FileSpec, ModelSpec, codegen

README = "README.md"
_COMMIT_OID = re.compile(r"^[0-9a-f]{7,40}$")
_NETWORK_ERRORS = (HfHubHTTPError, httpx2.HTTPError, OSError, RuntimeError, ValueError)


@dataclass(frozen=True)
class PlannedFile:
    """A file of the commit: repository path, local source (path or bytes), checksum, size."""

    path: str
    source: Path | bytes
    sha256: str
    size: int

    def content(self) -> bytes:
        return self.source if isinstance(self.source, bytes) else self.source.read_bytes()


@dataclass(frozen=True)
class PublishPlan:
    """Everything ``publish`` uploads, all checked locally."""

    model: ModelSpec
    revision: str
    exports: tuple[ExportArtifact, ...]
    # The encoders the chosen variants list, one per path.
    encoders: tuple[EncoderArtifact, ...]
    tokenizer: tuple[PlannedFile, ...]
    card: str
    # Files the registry already records as published (earlier variants) and that must still be
    # in the repository at the new revision, since the registry pins one revision per model.
    kept: tuple[PublishedFile, ...]
    # The programs with the assistant drafter of the chosen variants that declare one.
    assistants: tuple[AssistantArtifact, ...] = ()

    @property
    def repo(self) -> str:
        return self.model.hf_repo

    @property
    def backends(self) -> list[str]:
        return [e.backend for e in self.exports]

    def files(self) -> list[PlannedFile]:
        """The commit: programs, encoders and assistant programs at their registry paths,
        tokenizer files, model card."""
        out = []
        for e in self.exports:
            path = self.model.variant(e.backend).pte.path
            out.append(PlannedFile(path, e.pte, e.sha256, e.size))
        out += [PlannedFile(c.path, c.pte, c.sha256, c.size) for c in self.encoders]
        out += [PlannedFile(a.path, a.export.pte, a.sha256, a.size) for a in self.assistants]
        card = self.card.encode()
        out += [
            *self.tokenizer,
            PlannedFile(README, card, hashlib.sha256(card).hexdigest(), len(card)),
        ]
        return out


@dataclass(frozen=True)
class PublishResult:
    repo: str
    revision: str
    commit: str  # the commit the revision tag points at
    new_commit: bool  # False when the repository already held identical files
    new_tag: bool
    registry_changed: bool


def _check_revision(revision: str) -> None:
    # The tag is written into the registry, so it must pass the registry's pinned-revision rule;
    # the publisher creates tags, never records a bare commit.
    if not re.fullmatch(registry.revision_pattern(), revision) or _COMMIT_OID.fullmatch(revision):
        raise PublishError(
            f"--revision {revision!r} must be a release tag such as v0.1.0 or v1.2.0-rc.1 "
            "(vMAJOR.MINOR.PATCH[-pre]; not a branch name or a commit hash)"
        )


def _planned(path: str, source: Path) -> PlannedFile:
    data = source.read_bytes()
    return PlannedFile(path, source, hashlib.sha256(data).hexdigest(), len(data))


def plan_publish(
    model_id: str,
    revision: str,
    exports_dir: Path,
    tokenizer_dir: Path,
    backends: Sequence[str] | None = None,
    registry_dir: Path = REGISTRY_DIR,
    allow_random_weights: bool = False,
    assistant_exports_dir: Path | None = None,
) -> PublishPlan:
    """Check everything locally and build the commit; ``PublishError`` says what to fix.

    ``backends`` defaults to every variant of the model. No network access.
    ``allow_random_weights`` admits exports of random-weight test configs (tests only).
    ``assistant_exports_dir`` (default ``<exports_dir>/assistant``) holds the exports with the
    assistant drafter of the variants that declare one: the exporter names them as the plain
    exports, so they need a folder of their own.
    """
    _check_revision(revision)
    spec = registry.load_registry(registry_dir).model(model_id)
    chosen = list(dict.fromkeys(backends or spec.variants))
    for backend in chosen:
        extra = [f.path for f in spec.variant(backend).files if not f.path.endswith(".pte")]
        if extra:
            raise PublishError(
                f"the registry's {model_id}/{backend} variant declares files besides its .pte "
                f"({', '.join(extra)}); the exporter writes only the .pte"
            )
    exports = tuple(
        read_export(spec, spec.variant(b), exports_dir, allow_random_weights) for b in chosen
    )
    assistant_dir = Path(assistant_exports_dir or Path(exports_dir) / "assistant")
    assistants = []
    for export in exports:
        check_plain_export(export)
        variant = spec.variant(export.backend)
        if variant.assistant is not None:
            assistants.append(
                read_assistant(spec, variant, assistant_dir, export, allow_random_weights)
            )
    encoders = _read_encoders(spec, exports, exports_dir, tokenizer_dir, allow_random_weights)

    tokenizer = []
    for f in spec.tokenizer.files:
        source = contained_path(
            Path(tokenizer_dir), f.path, what=f"tokenizer file of {model_id} in --tokenizer-dir"
        )
        if not source.is_file():
            raise PublishError(
                f"tokenizer file {source} not found: --tokenizer-dir must be the checkpoint "
                f"directory of {model_id} (it holds {', '.join(x.path for x in spec.tokenizer.files)})"
            )
        tokenizer.append(_planned(f.path, source))

    rows = [
        CardVariant(
            backend=e.backend,
            quantization=e.quantization,
            path=spec.variant(e.backend).pte.path,
            size=e.size,
            sha256=e.sha256,
            max_context=e.max_context,
            max_chunk=e.max_chunk,
            min_platform=spec.variant(e.backend).min_platform,
            verification=e.verification,
        )
        for e in exports
    ]
    kept = []
    for backend, v in spec.variants.items():
        if backend in chosen or not v.published:
            continue
        for f in v.files:
            kept.append(PublishedFile(f.path, f.sha256 or "", f.size or 0))
        rows.append(
            CardVariant(
                backend=backend,
                quantization=v.quantization,
                path=v.pte.path,
                size=v.pte.size or 0,
                sha256=v.pte.sha256 or "",
                max_context=v.max_context,
                max_chunk=v.max_chunk,
                min_platform=v.min_platform,
                verification="passed (verified when first published)",
            )
        )
    # Encoders published earlier and not uploaded now stay, as the variants' files do.
    uploading = {c.path for c in encoders}
    kept_encoders: dict[str, tuple[str, FileSpec]] = {}
    for v in spec.variants.values():
        for kind, enc in v.encoders.items():
            if enc.published and enc.file.path not in uploading:
                kept_encoders.setdefault(enc.file.path, (kind, enc.file))
    kept += [PublishedFile(f.path, f.sha256 or "", f.size or 0) for _, f in kept_encoders.values()]
    # Assistants published earlier with variants not published now stay, as those variants do.
    card_assistants = [
        CardAssistant(a.backend, a.path, a.size, a.sha256, a.source_repo, a.verify_tokens,
                      a.draft_check)
        for a in assistants
    ]
    for backend, v in spec.variants.items():
        a = v.assistant
        if backend in chosen or a is None or not a.published:
            continue
        kept.append(PublishedFile(a.file.path, a.file.sha256 or "", a.file.size or 0))
        card_assistants.append(
            CardAssistant(backend, a.file.path, a.file.size or 0, a.file.sha256 or "", a.hf_repo,
                          a.verify_tokens, "passed (verified when first published)")
        )

    in_card = [r.backend for r in rows]

    def users(path: str) -> tuple[str, ...]:
        return tuple(
            sorted(
                b
                for b in in_card
                if any(e.file.path == path for e in spec.variant(b).encoders.values())
            )
        )

    card_encoders = [
        CardEncoder(c.kind, c.path, c.size, c.sha256, users(c.path), c.verification)
        for c in encoders
    ] + [
        CardEncoder(
            kind,
            f.path,
            f.size or 0,
            f.sha256 or "",
            users(f.path),
            "passed (verified when first published)",
        )
        for kind, f in kept_encoders.values()
    ]
    return PublishPlan(
        model=spec,
        revision=revision,
        exports=exports,
        encoders=encoders,
        tokenizer=tuple(tokenizer),
        card=render_model_card(spec, rows, card_encoders, card_assistants),
        kept=tuple(kept),
        assistants=tuple(assistants),
    )


def _read_encoders(
    spec: ModelSpec,
    exports: Sequence[ExportArtifact],
    exports_dir: Path,
    checkpoint_dir: Path,
    allow_random_weights: bool,
) -> tuple[EncoderArtifact, ...]:
    """The encoders the exported variants list, each read once (one per path) and checked
    against every variant that lists it: as wide as that variant's text decoder; and, where a
    published variant that is not published now lists it too, the same bytes it recorded (the
    new revision holds one file at that path, for both)."""
    found: dict[str, EncoderArtifact] = {}
    for export in exports:
        declared = spec.variant(export.backend).encoders
        if not declared:
            continue
        width = text_width(spec, export, checkpoint_dir)
        for kind, enc in declared.items():
            path = enc.file.path
            if path not in found:
                found[path] = read_encoder(spec, kind, path, exports_dir, allow_random_weights)
                twin = next((c for c in found.values() if c.pte == found[path].pte), None)
                if twin is not None and twin.path != path:
                    # Two registry paths with one file name: one export cannot tell them apart.
                    raise PublishError(
                        f"{path} and {twin.path} would both be published from "
                        f"{twin.pte.name}; give the encoders different file names in the registry"
                    )
            got = found[path]
            if got.kind != kind:
                raise PublishError(
                    f"{path} is the {got.kind} encoder of one variant of {spec.id} and the {kind} "
                    f"encoder of its {export.backend} variant; one program cannot be both"
                )
            if got.text_hidden != width:
                raise PublishError(
                    f"{got.pte.name}, the {kind} encoder of {spec.id}/{export.backend}, gives "
                    f"{got.text_hidden}-wide embeddings, but the {export.backend} text variant "
                    f"{export.pte.name} takes {width}-wide ones (its report: "
                    f"{export.report_path.name}): export the encoder from the same model as the "
                    "text variant"
                )
    chosen = {e.backend for e in exports}
    for backend, v in spec.variants.items():
        if backend in chosen or not v.published:
            continue
        for kind, enc in v.encoders.items():
            new = found.get(enc.file.path)
            if new is None or not enc.published:
                continue
            if (enc.file.sha256, enc.file.size) != (new.sha256, new.size):
                raise PublishError(
                    f"{enc.file.path} is also the {kind} encoder of the published {backend} "
                    f"variant of {spec.id}, recorded as sha256 {enc.file.sha256} "
                    f"({enc.file.size} bytes), but {new.pte.name} is sha256 {new.sha256} "
                    f"({new.size} bytes): publish the {backend} variant together with this one "
                    f"(add --variant {backend}), or publish the encoder it already has"
                )
    return tuple(found.values())


def upload_operations(files: list[PlannedFile]) -> list[CommitOperationAdd]:
    """The Hub commit's additions for ``files``, their sha256 given so nothing is read twice."""
    operations = []
    for f in files:
        op = CommitOperationAdd(path_in_repo=f.path, path_or_fileobj=f.source)
        op.upload_info.sha256 = bytes.fromhex(f.sha256)  # already hashed: skip a re-read
        operations.append(op)
    return operations


def _mismatches(
    api: HfApi, repo: str, revision: str, planned: list[PlannedFile], kept: Sequence[PublishedFile]
) -> list[str]:
    """Which planned/kept files the repository at ``revision`` does not hold byte for byte."""
    wanted = {f.path: f for f in [*planned, *kept]}
    if not wanted:
        return []
    remote = {
        info.path: info
        for info in api.get_paths_info(repo, sorted(wanted), revision=revision)
        if hasattr(info, "blob_id")
    }
    problems = []
    for path, f in wanted.items():
        info = remote.get(path)
        if info is None:
            problems.append(f"{path}: missing")
        elif info.size != f.size:
            problems.append(f"{path}: {info.size} bytes, expected {f.size}")
        elif info.lfs is not None:
            if info.lfs.sha256 != f.sha256:
                problems.append(f"{path}: sha256 {info.lfs.sha256}, expected {f.sha256}")
        elif not isinstance(f, PlannedFile) or info.blob_id != sha.git_hash(f.content()):
            problems.append(f"{path}: content differs")
    return problems


def _description(plan: PublishPlan) -> str:
    encoders = ", ".join(c.path for c in plan.encoders)
    assistants = ", ".join(a.path for a in plan.assistants)
    return (
        f"Variants: {', '.join(plan.backends)}. "
        + (f"Encoders: {encoders}. " if encoders else "")
        + (f"Assistant drafters: {assistants}. " if assistants else "")
        + "Model card regenerated."
    )


def _api(endpoint: str | None, token: str | None) -> HfApi:
    token = token if token is not None else get_token()
    if not token:
        raise PublishError(
            "no Hugging Face token found: set HF_TOKEN or run `hf auth login` with a token that "
            "can write to the model repositories"
        )
    api = HfApi(endpoint=endpoint, token=token)
    try:
        user = api.whoami()
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else None
        if status == 401:
            raise PublishError(
                f"{api.endpoint} rejected the Hugging Face token (401 Unauthorized). Set HF_TOKEN "
                "to a valid token with write access, or run `hf auth login --force`."
            ) from None
        raise PublishError(f"cannot check the token with {api.endpoint}: {exc}") from exc
    except httpx2.HTTPError as exc:
        raise PublishError(f"cannot reach {api.endpoint}: {exc}") from exc
    if not user.get("name"):
        raise PublishError(f"{api.endpoint} did not identify the token's user")
    return api


def publish(
    plan: PublishPlan,
    *,
    endpoint: str | None = None,
    token: str | None = None,
    registry_dir: Path = REGISTRY_DIR,
    ts_output: Path = codegen.GENERATED_TS,
) -> PublishResult:
    """Upload ``plan`` in one commit, tag it, then record it in the registry.

    ``token`` defaults to the standard sources (``HF_TOKEN``, the saved login); it is never
    logged. The registry (YAML and generated TypeScript) is only written after the tag serves
    exactly the planned files.
    """
    api = _api(endpoint, token)
    repo, tag = plan.repo, plan.revision
    files = plan.files()
    try:
        api.create_repo(repo, repo_type="model", exist_ok=True)
        refs = api.list_repo_refs(repo)
        tags = {t.name: t.target_commit for t in refs.tags}
        head = next((b.target_commit for b in refs.branches if b.name == "main"), None)
        new_commit = new_tag = False
        if tag in tags:
            problems = _mismatches(api, repo, tag, files, plan.kept)
            if problems:
                raise PublishError(
                    f"{repo} already has tag {tag} with different files ({'; '.join(problems)}). "
                    "Tags are immutable releases: publish under a new --revision."
                )
            commit = tags[tag]
        else:
            missing = _mismatches(api, repo, head or "main", [], plan.kept)
            if missing:
                raise PublishError(
                    f"the registry records files of {plan.model.id} as published that the main "
                    f"branch of {repo} does not hold ({'; '.join(missing)}); the new revision "
                    "would lack them. Publish those variants again together with this one."
                )
            info = api.create_commit(
                repo,
                upload_operations(files),
                commit_message=f"Publish {plan.model.id} {tag} ({', '.join(plan.backends)})",
                commit_description=_description(plan),
                parent_commit=head,
            )
            commit, new_commit = info.oid, info.oid != head
            api.create_tag(repo, tag=tag, revision=commit, tag_message=f"{plan.model.name} {tag}")
            new_tag = True
            problems = _mismatches(api, repo, tag, files, plan.kept)
            if problems:
                raise PublishError(
                    f"{repo}@{tag} does not serve the published files ({'; '.join(problems)}); "
                    "the registry was not updated"
                )
    except PublishError:
        raise
    except _NETWORK_ERRORS as exc:
        raise PublishError(
            f"publishing to {repo} failed: {exc}\nNothing was recorded in the registry. Re-run "
            "the same command to retry: files that already reached the server are not uploaded "
            "again."
        ) from exc

    published = {f.path: PublishedFile(f.path, f.sha256, f.size) for f in files}
    changed = update_registry(
        plan.model.id,
        tag,
        tokenizer=[published[f.path] for f in plan.tokenizer],
        variants={
            e.backend: [published[f.path] for f in plan.model.variant(e.backend).files]
            for e in plan.exports
        },
        registry_dir=registry_dir,
        ts_output=ts_output,
        encoders=[published[c.path] for c in plan.encoders],
        assistants={a.backend: published[a.path] for a in plan.assistants},
    )
    return PublishResult(repo, tag, commit, new_commit, new_tag, changed)
