"""Upload release artifacts of the native binaries to the Hugging Face Hub, then lock them.

The artifacts (``rne_tools.binaries.release``) go to ``<version>/`` of the binaries repository in
ONE commit, tagged ``v<version>`` (the Hub creates the commit only once every upload landed, so a
failed upload changes nothing). Each zip is accompanied by its release manifest as
``<name>.json``. The lock is written only after the tag serves exactly the uploaded bytes. A tag
is an immutable release: re-publishing the same bytes changes nothing; different bytes are refused.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from rne_tools.binaries.release import Artifact
from rne_tools.publish.errors import PublishError
from rne_tools.publish.publisher import (
    _NETWORK_ERRORS,
    PlannedFile,
    _api,
    _mismatches,
    upload_operations,
)

DEFAULT_REPO = "software-mansion/react-native-executorch-binaries"


@dataclass(frozen=True)
class BinariesResult:
    repo: str
    tag: str
    commit: str
    new_tag: bool
    base_url: str


def planned_files(artifacts: list[Artifact]) -> list[PlannedFile]:
    """The files of the commit: each zip, and its release manifest next to it."""
    files = []
    for a in artifacts:
        files.append(PlannedFile(a.path.as_posix(), a.zip_file, a.sha256, a.size))
        manifest = (json.dumps(a.manifest, indent=2, sort_keys=True) + "\n").encode()
        files.append(PlannedFile(a.path.with_suffix(".json").as_posix(), manifest,
                                 hashlib.sha256(manifest).hexdigest(), len(manifest)))
    return files


def base_url(endpoint: str, repo: str, version: str) -> str:
    """Where the artifacts of ``version`` are served: the Hub's resolve URL at the tag."""
    return f"{endpoint.rstrip('/')}/{repo}/resolve/v{version}"


def publish_binaries(artifacts: list[Artifact], version: str, *, repo: str = DEFAULT_REPO,
                     endpoint: str | None = None, token: str | None = None) -> BinariesResult:
    """Upload ``artifacts`` in one commit tagged ``v<version>`` and confirm the tag serves them."""
    api = _api(endpoint, token)
    tag = f"v{version}"
    files = planned_files(artifacts)
    try:
        api.create_repo(repo, repo_type="model", exist_ok=True)
        refs = api.list_repo_refs(repo)
        tags = {t.name: t.target_commit for t in refs.tags}
        head = next((b.target_commit for b in refs.branches if b.name == "main"), None)
        if tag in tags:
            problems = _mismatches(api, repo, tag, files, [])
            if problems:
                raise PublishError(
                    f"{repo} already has tag {tag} with other binaries ({'; '.join(problems)}). "
                    "A tag is an immutable release: bump the package version and publish again.")
            return BinariesResult(repo, tag, tags[tag], False, base_url(api.endpoint, repo, version))
        info = api.create_commit(
            repo, upload_operations(files), parent_commit=head,
            commit_message=f"Binaries of react-native-executorch {version}",
            commit_description=", ".join(f"{a.build.name} ({a.size} bytes)" for a in artifacts))
        api.create_tag(repo, tag=tag, revision=info.oid, tag_message=f"react-native-executorch {version}")
        problems = _mismatches(api, repo, tag, files, [])
        if problems:
            raise PublishError(f"{repo}@{tag} does not serve the uploaded binaries "
                               f"({'; '.join(problems)}); the lock was not written")
    except PublishError:
        raise
    except _NETWORK_ERRORS as exc:
        raise PublishError(
            f"publishing the binaries to {repo} failed: {exc}\nThe lock was not written. Re-run the "
            "same command to retry: files that already reached the server are not uploaded again."
        ) from exc
    return BinariesResult(repo, tag, info.oid, True, base_url(api.endpoint, repo, version))
