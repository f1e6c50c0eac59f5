"""A Hugging Face Hub on 127.0.0.1 for the tests of models by name (tests/test_hub.py): the endpoints
``huggingface_hub``'s downloads call, answered as the Hub answers them, so that the real client runs against it
(``HF_ENDPOINT`` pointed here).

- ``GET /api/models/{repo}`` and ``/api/models/{repo}/revision/{revision}``: the repository at a revision (a
  branch, tag or commit): ``id``, ``sha`` (the commit) and ``siblings`` (``resolve_revision``, ``repo_info``).
- ``GET /api/models/{repo}/tree/{revision}[/{folder}]?recursive=...``: the files (``path``, ``size``, ``oid``) and
  folders, one page (``list_repo_tree``, which ``snapshot_download`` calls too).
- ``HEAD`` and ``GET /{repo}/resolve/{revision}/{path}``: a file, with ``X-Repo-Commit``, ``ETag`` (its SHA-256,
  as the Hub gives large files), ``Content-Length`` and ``Accept-Ranges``; a ``Range: bytes=N-`` request is
  answered 206 with ``Content-Range`` (how the client resumes a dropped download).
- Errors as the Hub sends them, with ``X-Error-Code`` / ``X-Error-Message``, which the client turns into its
  exceptions: a missing or private repository is 401 ``RepoNotFound`` to a client without a token and 404 to one
  with a token; a missing revision 404 ``RevisionNotFound``; a gated repository's listing is public but its files
  are 401 ``GatedRepo`` without a token and 403 with a token that has no access; an unknown token 401 "Invalid
  credentials in Authorization header".

``faults`` makes the next downloads of a file fail part-way (the connection closed, or reset, after some of the
bytes); ``requests`` records every request made.
"""

from __future__ import annotations

import hashlib
import json
import socket
import struct
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

#: Tokens the server knows: ``hf_reader`` may read every repository, ``hf_stranger`` only public ones.
READER, STRANGER = "hf_reader", "hf_stranger"
_TOKENS = {READER: True, STRANGER: False}


@dataclass(frozen=True)
class Commit:
    """A commit: its hash and its files (path in the repository -> bytes)."""

    sha: str
    files: dict[str, bytes]


@dataclass
class Repo:
    """A model repository: its revisions (branch or tag -> commit; commits are found by hash too) and who may read
    it: ``public``, ``private`` or ``gated`` (listing public, files for ``hf_reader``)."""

    repo_id: str
    revisions: dict[str, Commit]
    access: str = "public"

    def commit(self, revision: str) -> Commit | None:
        return self.revisions.get(revision) or next(
            (c for c in self.revisions.values() if c.sha == revision), None)


def make_repo(repo_id: str, revisions: dict[str, dict[str, bytes]], access: str = "public") -> Repo:
    """A :class:`Repo` whose commits' hashes are made from their content."""
    commits = {}
    for name, files in revisions.items():
        digest = hashlib.sha1(repo_id.encode())
        for path in sorted(files):
            digest.update(path.encode() + hashlib.sha1(files[path]).digest())
        commits[name] = Commit(digest.hexdigest(), files)
    return Repo(repo_id, commits, access)


class FakeHub:
    """The server (see the module docstring), started on a free port; ``url`` is what ``HF_ENDPOINT`` is set to.
    Use as a context manager, or :meth:`stop`."""

    def __init__(self, repos: list[Repo]) -> None:
        self.repos = {repo.repo_id: repo for repo in repos}
        #: (method, path, Range header) of every request, in order.
        self.requests: list[tuple[str, str, str | None]] = []
        #: Path in a repository -> what its next GETs do, one ``(fault, bytes)`` each: after sending ``bytes`` (half
        #: the answer when None), "drop" closes the connection, "reset" resets it.
        self.faults: dict[str, list[tuple[str, int | None]]] = {}
        self.server = _Server(("127.0.0.1", 0), _Handler)
        self.server.hub = self
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()

    def __enter__(self) -> FakeHub:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def downloads(self) -> list[tuple[str, str | None]]:
        """(path, Range) of every GET of a file."""
        return [(path, byte_range) for method, path, byte_range in self.requests
                if method == "GET" and "/resolve/" in path]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    hub: FakeHub

    def handle_error(self, request, client_address) -> None:  # a connection the faults broke on purpose
        pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive and Content-Length, as the Hub
    server: _Server

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self._answer(body=True)

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def _answer(self, body: bool) -> None:
        hub = self.server.hub
        url = urlsplit(self.path)
        hub.requests.append((self.command, url.path, self.headers.get("Range")))
        parts = url.path.split("/")[1:]
        if parts[:2] == ["api", "models"] and len(parts) >= 4:
            self._api(hub.repos.get(f"{parts[2]}/{parts[3]}"), f"{parts[2]}/{parts[3]}", parts[4:],
                      parse_qs(url.query))
        elif len(parts) >= 5 and parts[2] == "resolve":
            repo_id = f"{parts[0]}/{parts[1]}"
            self._file(hub.repos.get(repo_id), repo_id, unquote(parts[3]), unquote("/".join(parts[4:])), body)
        else:
            self._error(404, "Not found")

    def _api(self, repo: Repo | None, repo_id: str, rest: list[str], query: dict[str, list[str]]) -> None:
        if self._refused(repo, repo_id, files=False):
            return
        assert repo is not None
        if rest[:1] == ["tree"] and len(rest) >= 2:
            commit = self._commit(repo, unquote(rest[1]))
            if commit is not None:
                folder = unquote("/".join(rest[2:]))
                recursive = query.get("recursive", ["false"])[0].lower() == "true"
                self._json(_tree(commit, folder, recursive))
            return
        if rest and rest[0] != "revision":
            self._error(404, "Not found")
            return
        commit = self._commit(repo, unquote("/".join(rest[1:])) if rest else "main")
        if commit is not None:
            self._json({"id": repo_id, "modelId": repo_id, "sha": commit.sha, "private": repo.access == "private",
                        "gated": "manual" if repo.access == "gated" else False,
                        "siblings": [{"rfilename": path, "size": len(data)}
                                     for path, data in sorted(commit.files.items())]})

    def _file(self, repo: Repo | None, repo_id: str, revision: str, path: str, body: bool) -> None:
        if self._refused(repo, repo_id, files=True):
            return
        assert repo is not None
        commit = self._commit(repo, revision)
        if commit is None:
            return
        if path not in commit.files:
            self._error(404, "Entry not found", "EntryNotFound", {"X-Repo-Commit": commit.sha})
            return
        data = commit.files[path]
        start = 0
        requested = self.headers.get("Range")
        if body and requested and requested.startswith("bytes="):
            first, _, last = requested[len("bytes="):].partition("-")
            start, end = int(first), int(last) + 1 if last else len(data)
            piece = data[start:end]
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{len(data)}")
        else:
            piece = data
            self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(piece)))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", f'"{hashlib.sha256(data).hexdigest()}"')
        self.send_header("X-Repo-Commit", commit.sha)
        self.end_headers()
        if not body:
            return
        faults = self.server.hub.faults.get(path)
        fault, cut = faults.pop(0) if faults else (None, None)
        if fault is None:
            self.wfile.write(piece)
            return
        self.wfile.write(piece[: len(piece) // 2 if cut is None else cut])
        self.wfile.flush()
        self.close_connection = True
        if fault == "drop":  # the rest never comes: the client sees the body end early
            self.connection.shutdown(socket.SHUT_WR)
        else:  # "reset": give the client time to read what was sent, then reset the connection
            time.sleep(0.2)
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:  # the socket a fault reset
            pass

    def _refused(self, repo: Repo | None, repo_id: str, files: bool) -> bool:
        """Answer as the Hub answers a client it does not let in; False when this one may go on."""
        authorization = self.headers.get("Authorization", "")
        token = authorization.removeprefix("Bearer ").strip() or None
        if token is not None and token not in _TOKENS:
            self._error(401, "Invalid credentials in Authorization header")
            return True
        reader = token is not None and _TOKENS[token]
        if repo is None or (repo.access == "private" and not reader):
            self._error(401 if token is None else 404, "Repository not found", "RepoNotFound")
            return True
        if repo.access == "gated" and files and not reader:
            if token is None:
                self._error(401, f"Access to model {repo_id} is restricted. You must have access to it and be "
                                 "authenticated to access it. Please log in.", "GatedRepo")
            else:
                self._error(403, f"Access to model {repo_id} is restricted and you are not in the authorized list. "
                                 f"Visit {self.server.hub.url}/{repo_id} to ask for access.", "GatedRepo")
            return True
        return False

    def _commit(self, repo: Repo, revision: str) -> Commit | None:
        commit = repo.commit(revision)
        if commit is None:
            self._error(404, f"Invalid rev id: {revision}", "RevisionNotFound")
        return commit

    def _json(self, value: object) -> None:
        data = json.dumps(value).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command == "GET":
            self.wfile.write(data)

    def _error(self, status: int, message: str, code: str | None = None, headers: dict[str, str] | None = None):
        data = json.dumps({"error": message}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-Error-Message", message)
        if code:
            self.send_header("X-Error-Code", code)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if self.command == "GET":
            self.wfile.write(data)


def _tree(commit: Commit, folder: str, recursive: bool) -> list[dict[str, object]]:
    """The tree API's entries under ``folder``: files with their size and git blob id, and folders."""
    prefix = f"{folder}/" if folder else ""
    entries: dict[str, dict[str, object]] = {}
    for path, data in sorted(commit.files.items()):
        if not path.startswith(prefix):
            continue
        rest = path[len(prefix):].split("/")
        for depth in range(1, len(rest)):  # the folders on the way
            sub = prefix + "/".join(rest[:depth])
            if recursive or depth == 1:
                entries.setdefault(sub, {"type": "directory", "oid": hashlib.sha1(sub.encode()).hexdigest(),
                                         "size": 0, "path": sub})
        if recursive or len(rest) == 1:
            blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
            entries[path] = {"type": "file", "oid": blob, "size": len(data), "path": path}
    return list(entries.values())
