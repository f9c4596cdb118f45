"""A Hugging Face Hub-compatible HTTP server for tests, on 127.0.0.1.

It implements the endpoints the real ``huggingface_hub`` client calls to publish and download
model files, with the Hub's wire formats:

- ``GET /api/whoami-v2``, and a 401 "Invalid credentials in Authorization header" for any request
  that carries an unknown bearer token (as the Hub does); writes without a token get a 401 too;
- ``POST /api/repos/create`` (409 when the repository exists);
- ``POST /api/validate-yaml`` (the model card's front matter, checked before any upload);
- ``POST /api/models/{repo}/preupload/{rev}`` (upload mode per file, and the oid of the file
  already at that path so the client can skip unchanged files);
- the git LFS batch API ``POST /{repo}.git/info/lfs/objects/batch`` (basic transfer, with a
  verify action; objects already stored get no actions), the upload ``PUT`` and the verify call;
- ``POST /api/models/{repo}/commit/{rev}`` (NDJSON: header, file, lfsFile, deletedFile lines);
- ``POST /api/models/{repo}/tag/{rev}``, ``GET /api/models/{repo}/refs``;
- ``GET /api/models/{repo}[/revision/{rev}]`` and ``POST /api/models/{repo}/paths-info/{rev}``;
- ``HEAD``/``GET /{repo}/resolve/{rev}/{path}``: regular files are served directly; LFS files
  answer with a 302 to a second "CDN" origin (another port) carrying ``X-Linked-Size`` and
  ``X-Linked-Etag``, as the Hub does, and the CDN honours ``Range``.

It never advertises Xet storage (no ``X-Xet-*`` headers, no xet token route). The client still
uploads through Xet whenever ``hf_xet`` is installed, so callers must set ``HF_HUB_DISABLE_XET=1``
(or patch ``huggingface_hub.constants.HF_HUB_DISABLE_XET``) to use the LFS protocol against it.

Fault injection for tests: ``state.fail_lfs_upload_after`` (accept that many uploads, then answer
the next ones with an error until reset), ``state.fail_next_commit``, ``state.fail_next_tag``, and
``state.cut_next_cdn_download`` (send half of the next CDN body, then drop the connection: the
client resumes with a ``Range`` request).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

LFS_THRESHOLD = 10 * 1024 * 1024  # the Hub's limit for regular (non-LFS) text files
GITATTRIBUTES = (
    b"*.pte filter=lfs diff=lfs merge=lfs -text\n*.bin filter=lfs diff=lfs merge=lfs -text\n"
)


def git_blob_oid(data: bytes) -> str:
    """The git object id of a blob (what the Hub reports as the oid of a regular file)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass(frozen=True)
class StoredFile:
    """One file of a commit: regular (content inline) or LFS (content in the object store)."""

    size: int
    sha256: str
    git_oid: str
    lfs: bool
    content: bytes | None = None  # regular files only

    @property
    def oid(self) -> str:
        """The oid the preupload endpoint reports (sha256 for LFS, git blob id otherwise)."""
        return self.sha256 if self.lfs else self.git_oid


@dataclass
class Commit:
    oid: str
    parent: str | None
    summary: str
    files: dict[str, StoredFile]


@dataclass
class Repo:
    repo_id: str
    commits: dict[str, Commit] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)

    def resolve(self, revision: str) -> Commit | None:
        oid = self.branches.get(revision) or self.tags.get(revision)
        if oid is None and revision in self.commits:
            oid = revision
        return self.commits.get(oid) if oid else None


@dataclass
class HubState:
    """Everything the server stores; tests read it to check what landed."""

    tokens: dict[str, str]  # token -> user name
    repos: dict[str, Repo] = field(default_factory=dict)
    lfs_objects: dict[str, bytes] = field(default_factory=dict)
    pending_uploads: set[str] = field(default_factory=set)
    requests: list[tuple[str, str]] = field(default_factory=list)
    ranges: list[str] = field(default_factory=list)  # Range headers of partial downloads served
    fail_lfs_upload_after: int | None = None
    fail_next_commit: bool = False
    fail_next_tag: bool = False
    cut_next_cdn_download: bool = False
    lfs_uploads_done: int = 0
    lock: threading.RLock = field(default_factory=threading.RLock)

    def commit_count(self, repo_id: str) -> int:
        return len(self.repos[repo_id].commits) if repo_id in self.repos else 0


class HubError(Exception):
    def __init__(self, status: int, message: str, code: str | None = None, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.extra = extra  # more fields of the JSON error body


_REPO = r"(?P<repo>[\w.-]+/[\w.-]+)"
_ROUTES: list[tuple[str, re.Pattern[str], str]] = [
    (m, re.compile(p), h)
    for m, p, h in [
        ("GET", r"^/api/whoami-v2$", "whoami"),
        ("POST", r"^/api/repos/create$", "create_repo"),
        ("POST", r"^/api/validate-yaml$", "validate_yaml"),
        ("POST", rf"^/api/models/{_REPO}/preupload/(?P<rev>[^/]+)$", "preupload"),
        ("POST", rf"^/api/models/{_REPO}/commit/(?P<rev>[^/]+)$", "commit"),
        ("POST", rf"^/api/models/{_REPO}/tag/(?P<rev>[^/]+)$", "tag"),
        ("GET", rf"^/api/models/{_REPO}/refs$", "refs"),
        ("GET", rf"^/api/models/{_REPO}(?:/revision/(?P<rev>[^/]+))?$", "repo_info"),
        ("POST", rf"^/api/models/{_REPO}/paths-info/(?P<rev>[^/]+)$", "paths_info"),
        ("POST", rf"^/{_REPO}\.git/info/lfs/objects/batch$", "lfs_batch"),
        ("POST", rf"^/{_REPO}\.git/info/lfs/objects/verify$", "lfs_verify"),
        ("PUT", r"^/lfs-upload/(?P<oid>[0-9a-f]{64})$", "lfs_upload"),
        ("HEAD", rf"^/{_REPO}/resolve/(?P<rev>[^/]+)/(?P<path>.+)$", "resolve"),
        ("GET", rf"^/{_REPO}/resolve/(?P<rev>[^/]+)/(?P<path>.+)$", "resolve"),
        ("HEAD", r"^/cdn/(?P<oid>[0-9a-f]{64})$", "cdn"),
        ("GET", r"^/cdn/(?P<oid>[0-9a-f]{64})$", "cdn"),
    ]
]
_WRITES = {"create_repo", "preupload", "commit", "tag", "lfs_batch", "lfs_verify"}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet test output
        pass

    # --- plumbing ----------------------------------------------------------------------------

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _send(
        self,
        status: int,
        body: bytes = b"",
        headers: dict[str, str] | None = None,
        content_type: str = "application/json",
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(payload).encode(), headers)

    def _dispatch(self) -> None:
        state = self.server.state
        url = urlsplit(self.path)
        path = unquote(url.path)
        with state.lock:
            state.requests.append((self.command, path))
        body = self._body() if self.command in ("POST", "PUT") else b""
        try:
            for method, pattern, name in _ROUTES:
                match = pattern.match(path)
                if method == self.command and match:
                    user = self._authenticate(name)
                    getattr(self, f"_h_{name}")(
                        body=body, query=parse_qs(url.query), user=user, **match.groupdict()
                    )
                    return
            raise HubError(404, f"no route for {self.command} {path}")
        except HubError as err:
            headers = {"X-Error-Message": err.message}
            if err.code:
                headers["X-Error-Code"] = err.code
            self._json(err.status, {"error": err.message, **err.extra}, headers)

    do_GET = do_HEAD = do_POST = do_PUT = _dispatch

    def _authenticate(self, route: str) -> str | None:
        auth = self.headers.get("Authorization")
        if auth is None:
            if route in _WRITES or route == "whoami":
                raise HubError(401, "You must be authenticated to access this resource.")
            return None
        token = auth.removeprefix("Bearer ").strip()
        user = self.server.state.tokens.get(token)
        if user is None:
            raise HubError(401, "Invalid credentials in Authorization header")
        return user

    def _repo(self, repo: str, user: str | None = None) -> Repo:
        found = self.server.state.repos.get(repo)
        if found is None:
            raise HubError(404, "Repository not found", "RepoNotFound")
        if user is not None and repo.split("/")[0] != user:
            raise HubError(403, f"You don't have the rights to write to {repo}")
        return found

    def _commit_at(self, repo: Repo, rev: str) -> Commit:
        commit = repo.resolve(unquote(rev))
        if commit is None:
            raise HubError(404, f"Invalid rev id: {rev}", "RevisionNotFound")
        return commit

    @property
    def _base(self) -> str:
        return self.server.base_url

    # --- API ---------------------------------------------------------------------------------

    def _h_whoami(self, user: str, **_: Any) -> None:
        self._json(200, {"type": "user", "name": user, "auth": {"type": "access_token"}})

    def _h_create_repo(self, body: bytes, user: str, **_: Any) -> None:
        payload = json.loads(body)
        if payload.get("type", "model") != "model":
            raise HubError(400, "this test server hosts model repositories only")
        repo_id = f"{payload.get('organization') or user}/{payload['name']}"
        if repo_id.split("/")[0] != user:
            raise HubError(403, f"You don't have the rights to create a repo under {repo_id}")
        url = f"{self._base}/{repo_id}"
        state = self.server.state
        with state.lock:
            if repo_id in state.repos:
                # The Hub names the existing repo; the client reads "url" even on a 409.
                raise HubError(409, "You already created this model repo", url=url)
            repo = Repo(repo_id)
            files = {".gitattributes": _regular(GITATTRIBUTES)}
            _add_commit(repo, "main", "initial commit", files)
            state.repos[repo_id] = repo
        self._json(200, {"url": url, "name": repo_id})

    def _h_validate_yaml(self, body: bytes, **_: Any) -> None:
        content = json.loads(body)["content"]
        match = re.match(r"^---\n(.*?)\n---\n", content, re.DOTALL)
        if match is None:
            self._json(
                200, {"errors": [], "warnings": [{"message": "empty or missing yaml metadata"}]}
            )
            return
        try:
            meta = yaml.safe_load(match.group(1))
        except yaml.YAMLError as exc:
            self._json(400, {"errors": [{"message": f"invalid YAML: {exc}"}]})
            return
        if not isinstance(meta, dict):
            self._json(400, {"errors": [{"message": "metadata must be a YAML mapping"}]})
            return
        self._json(200, {"errors": [], "warnings": []})

    def _h_preupload(self, body: bytes, repo: str, rev: str, user: str, **_: Any) -> None:
        found = self._repo(repo, user)
        commit = self._commit_at(found, rev)
        files = []
        for f in json.loads(body)["files"]:
            sample = base64.b64decode(f["sample"])
            lfs = f["size"] >= LFS_THRESHOLD or b"\0" in sample or f["path"].endswith(".pte")
            existing = commit.files.get(f["path"])
            files.append(
                {
                    "path": f["path"],
                    "uploadMode": "lfs" if lfs else "regular",
                    "shouldIgnore": False,
                    "oid": existing.oid if existing else None,
                }
            )
        self._json(200, {"files": files, "commitOid": commit.oid})

    def _h_lfs_batch(self, body: bytes, repo: str, user: str, **_: Any) -> None:
        self._repo(repo, user)
        payload = json.loads(body)
        if payload.get("operation") != "upload":
            raise HubError(400, "only the upload operation is supported")
        state = self.server.state
        objects = []
        for obj in payload["objects"]:
            entry: dict[str, Any] = {"oid": obj["oid"], "size": obj["size"], "authenticated": True}
            with state.lock:
                stored = obj["oid"] in state.lfs_objects
                if not stored:
                    state.pending_uploads.add(obj["oid"])
            if not stored:  # objects already stored get no actions: the client skips them
                entry["actions"] = {
                    "upload": {"href": f"{self._base}/lfs-upload/{obj['oid']}"},
                    "verify": {"href": f"{self._base}/{repo}.git/info/lfs/objects/verify"},
                }
            objects.append(entry)
        self._send(
            200,
            json.dumps({"transfer": "basic", "objects": objects}).encode(),
            content_type="application/vnd.git-lfs+json",
        )

    def _h_lfs_upload(self, body: bytes, oid: str, **_: Any) -> None:
        state = self.server.state
        with state.lock:
            if oid not in state.pending_uploads:
                raise HubError(403, "upload was not announced through the LFS batch API")
            limit = state.fail_lfs_upload_after
            if limit is not None and state.lfs_uploads_done >= limit:
                # A storage-side failure that is not retried by the client (like an S3 4xx).
                raise HubError(400, "simulated storage failure: upload aborted")
            if hashlib.sha256(body).hexdigest() != oid:
                raise HubError(400, "uploaded content does not match its oid")
            state.lfs_objects[oid] = body
            state.pending_uploads.discard(oid)
            state.lfs_uploads_done += 1
        self._send(200, content_type="text/plain")

    def _h_lfs_verify(self, body: bytes, **_: Any) -> None:
        obj = json.loads(body)
        stored = self.server.state.lfs_objects.get(obj["oid"])
        if stored is None or len(stored) != obj["size"]:
            raise HubError(422, f"object {obj['oid']} was not uploaded")
        self._json(200, {})

    def _h_commit(self, body: bytes, repo: str, rev: str, user: str, **_: Any) -> None:
        found = self._repo(repo, user)
        state = self.server.state
        branch = unquote(rev)
        with state.lock:
            if state.fail_next_commit:
                state.fail_next_commit = False
                raise HubError(500, "simulated internal error while committing")
            if branch not in found.branches:
                raise HubError(404, f"Invalid rev id: {branch}", "RevisionNotFound")
            head = found.commits[found.branches[branch]]
            lines = [json.loads(line) for line in body.splitlines() if line.strip()]
            if not lines or lines[0]["key"] != "header":
                raise HubError(400, "the first NDJSON line must be the commit header")
            header = lines[0]["value"]
            parent = header.get("parentCommit")
            if parent and not head.oid.startswith(parent):
                raise HubError(412, "A commit has happened since. Please refresh and try again.")
            files = dict(head.files)
            for line in lines[1:]:
                value = line["value"]
                if line["key"] == "file":
                    files[value["path"]] = _regular(base64.b64decode(value["content"]))
                elif line["key"] == "lfsFile":
                    data = state.lfs_objects.get(value["oid"])
                    if data is None:
                        raise HubError(422, f"LFS object {value['oid']} is not in storage")
                    files[value["path"]] = StoredFile(
                        len(data),
                        value["oid"],
                        git_blob_oid(_pointer(value["oid"], len(data))),
                        True,
                    )
                elif line["key"] == "deletedFile":
                    if files.pop(value["path"], None) is None:
                        raise HubError(404, "A file with this name doesn't exist", "EntryNotFound")
                else:
                    raise HubError(400, f"unsupported commit operation {line['key']!r}")
            commit = _add_commit(found, branch, header["summary"], files)
        self._json(
            200,
            {
                "commitUrl": f"{self._base}/{repo}/commit/{commit.oid}",
                "commitOid": commit.oid,
                "pullRequestUrl": None,
                "success": True,
            },
        )

    def _h_tag(self, body: bytes, repo: str, rev: str, user: str, **_: Any) -> None:
        found = self._repo(repo, user)
        tag = json.loads(body)["tag"]
        with self.server.state.lock:
            if self.server.state.fail_next_tag:
                self.server.state.fail_next_tag = False
                raise HubError(500, "simulated internal error while tagging")
            commit = self._commit_at(found, rev)
            if tag in found.tags or tag in found.branches:
                raise HubError(409, f"Tag {tag} already exists")
            found.tags[tag] = commit.oid
        self._json(200, {})

    def _h_refs(self, repo: str, **_: Any) -> None:
        found = self._repo(repo)

        def refs(kind: str, names: dict[str, str]) -> list[dict[str, str]]:
            return [
                {"name": n, "ref": f"refs/{kind}/{n}", "targetCommit": oid}
                for n, oid in sorted(names.items())
            ]

        self._json(
            200,
            {
                "branches": refs("heads", found.branches),
                "converts": [],
                "tags": refs("tags", found.tags),
                "pullRequests": [],
            },
        )

    def _h_repo_info(self, repo: str, rev: str | None = None, **_: Any) -> None:
        found = self._repo(repo)
        commit = self._commit_at(found, rev or "main")
        self._json(
            200,
            {
                "id": repo,
                "author": repo.split("/")[0],
                "sha": commit.oid,
                "private": False,
                "siblings": [{"rfilename": p} for p in sorted(commit.files)],
            },
        )

    def _h_paths_info(self, body: bytes, repo: str, rev: str, **_: Any) -> None:
        commit = self._commit_at(self._repo(repo), rev)
        form = parse_qs(body.decode())
        out = []
        for path in form.get("paths", []):
            stored = commit.files.get(path)
            if stored is None:
                continue
            entry: dict[str, Any] = {
                "type": "file",
                "path": path,
                "size": stored.size,
                "oid": stored.git_oid,
            }
            if stored.lfs:
                pointer = _pointer(stored.sha256, stored.size)
                entry["lfs"] = {
                    "oid": stored.sha256,
                    "size": stored.size,
                    "pointerSize": len(pointer),
                }
            out.append(entry)
        self._json(200, out)

    # --- downloads ---------------------------------------------------------------------------

    def _h_resolve(self, repo: str, rev: str, path: str, **_: Any) -> None:
        commit = self._commit_at(self._repo(repo), rev)
        stored = commit.files.get(path)
        headers = {"X-Repo-Commit": commit.oid}
        if stored is None:
            headers.update({"X-Error-Code": "EntryNotFound", "X-Error-Message": "Entry not found"})
            self._json(404, {"error": "Entry not found"}, headers)
            return
        if stored.lfs:
            headers.update(
                {
                    "Location": f"{self.server.cdn_url}/cdn/{stored.sha256}",
                    "X-Linked-Size": str(stored.size),
                    "X-Linked-Etag": f'"{stored.sha256}"',
                    "ETag": f'"{stored.git_oid}"',
                }
            )
            self._send(302, b"", headers, content_type="text/plain")
            return
        headers["ETag"] = f'"{stored.git_oid}"'
        self._send_content(stored.content or b"", headers)

    def _h_cdn(self, oid: str, **_: Any) -> None:
        state = self.server.state
        data = state.lfs_objects.get(oid)
        if data is None:
            raise HubError(404, "object not found")
        with state.lock:
            cut = state.cut_next_cdn_download and self.command == "GET"
            state.cut_next_cdn_download &= not cut
        if cut:
            # Announce the whole body, send half of it, drop the connection.
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Accept-Ranges", "bytes")
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self._send_content(data, {"ETag": f'"{oid}"'})

    def _send_content(self, data: bytes, headers: dict[str, str]) -> None:
        headers = {**headers, "Accept-Ranges": "bytes"}
        match = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        if match:
            with self.server.state.lock:
                self.server.state.ranges.append(match.group(0))
            start = int(match.group(1))
            end = int(match.group(2)) if match.group(2) else len(data) - 1
            if start >= len(data):
                self._send(416, b"", {"Content-Range": f"bytes */{len(data)}"})
                return
            headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
            self._send(206, data[start : end + 1], headers, "application/octet-stream")
            return
        self._send(200, data, headers, "application/octet-stream")


def _regular(data: bytes) -> StoredFile:
    return StoredFile(len(data), hashlib.sha256(data).hexdigest(), git_blob_oid(data), False, data)


def _pointer(sha256: str, size: int) -> bytes:
    return (
        f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()
    )


def _add_commit(repo: Repo, branch: str, summary: str, files: dict[str, StoredFile]) -> Commit:
    parent = repo.branches.get(branch)
    seed = json.dumps([parent, summary, sorted((p, f.oid) for p, f in files.items())])
    oid = hashlib.sha1(seed.encode() + str(len(repo.commits)).encode()).hexdigest()
    commit = Commit(oid, parent, summary, files)
    repo.commits[oid] = commit
    repo.branches[branch] = oid
    return commit


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, state: HubState) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.state = state
        self.base_url = f"http://127.0.0.1:{self.server_address[1]}"
        self.cdn_url = self.base_url


@dataclass
class RunningHub:
    """A running server pair: ``url`` is the Hub endpoint, ``state`` what it stores."""

    url: str
    cdn_url: str
    state: HubState


@contextmanager
def serve_hub(tokens: dict[str, str]) -> Iterator[RunningHub]:
    """Run the Hub API and its CDN on two 127.0.0.1 ports (distinct origins, like the Hub)."""
    state = HubState(tokens=dict(tokens))
    api, cdn = _Server(state), _Server(state)
    api.cdn_url = cdn.base_url
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in (api, cdn)]
    for t in threads:
        t.start()
    try:
        yield RunningHub(api.base_url, cdn.base_url, state)
    finally:
        for s in (api, cdn):
            s.shutdown()
            s.server_close()
