"""A local stand-in for the Hugging Face Hub's HTTP API, just what `HfApi.create_repo` and
`upload_folder` call (create, whoami, repo info, validate-yaml, preupload, tree, commit), so that
the real client is tested up to the network: every commit is applied to a folder per repository,
which `datasets.load_dataset` can then read as the Hub would serve it.
"""

from __future__ import annotations

import base64
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml


@dataclass
class FakeHub:
    """The server's state: accepted token, repositories (folder, visibility), commits, requests
    seen.
    """

    root: Path
    token: str = "hf_write"
    repos: dict[str, dict[str, Any]] = field(default_factory=dict)
    commits: list[dict[str, Any]] = field(default_factory=list)
    requests: list[tuple[str, str]] = field(default_factory=list)
    url: str = ""

    def folder(self, repo_type: str, repo_id: str) -> Path:
        """Where a repository's files are."""
        return self.root / repo_type / repo_id


def serve(hub: FakeHub) -> ThreadingHTTPServer:
    """Start the fake on a free local port (daemon thread); `hub.url` is its endpoint."""
    handler = type("Handler", (_Handler,), {"hub": hub})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    hub.url = f"http://127.0.0.1:{server.server_port}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class _Handler(BaseHTTPRequestHandler):
    hub: FakeHub

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _authorised(self) -> bool:
        if self.headers.get("authorization") == f"Bearer {self.hub.token}":
            return True
        self._send(401, {"error": "Invalid credentials in Authorization header"})
        return False

    def _repo(self) -> tuple[str, str, str]:
        """(repo type, owner/name, rest of the path) of /api/<type>s/<owner>/<name>/<rest>."""
        parts = self.path.split("?")[0].split("/")
        return parts[2].rstrip("s"), f"{parts[3]}/{parts[4]}", "/".join(parts[5:])

    def do_GET(self) -> None:
        self.hub.requests.append(("GET", self.path))
        if not self._authorised():
            return
        if self.path == "/api/whoami-v2":
            self._send(
                200, {"type": "user", "name": "tester", "auth": {"accessToken": {"role": "write"}}}
            )
            return
        repo_type, repo_id, rest = self._repo()
        folder = self.hub.folder(repo_type, repo_id)
        if rest in ("", "revision/main") and repo_id in self.hub.repos:  # repo_info
            self._send(
                200, {"id": repo_id, "private": self.hub.repos[repo_id]["private"], "sha": "0" * 40}
            )
        elif rest.startswith("tree/"):
            files = sorted(p for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else []
            self._send(
                200,
                [
                    {
                        "type": "file",
                        "path": p.relative_to(folder).as_posix(),
                        "size": p.stat().st_size,
                        "oid": "0" * 40,
                    }
                    for p in files
                ],
            )
        else:
            self._send(404, {"error": f"not served by the fake: {self.path}"})

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        self.hub.requests.append(("POST", self.path))
        if not self._authorised():
            return
        if self.path == "/api/repos/create":
            self._create(json.loads(body))
        elif self.path == "/api/validate-yaml":
            self._validate(json.loads(body)["content"])
        elif "/preupload/" in self.path:
            files = json.loads(body)["files"]
            self._send(
                200,
                {
                    "files": [
                        {"path": f["path"], "uploadMode": "regular", "shouldIgnore": False}
                        for f in files
                    ]
                },
            )
        elif "/commit/" in self.path:
            self._commit(body)
        else:
            self._send(404, {"error": f"not served by the fake: {self.path}"})

    def _create(self, request: dict[str, Any]) -> None:
        repo_type = request.get("type", "model")
        repo_id = f"{request['organization']}/{request['name']}"
        url = f"{self.hub.url}/{repo_type}s/{repo_id}"
        if repo_id in self.hub.repos:
            self._send(409, {"error": "You already created this repo", "url": url})
            return
        self.hub.repos[repo_id] = {
            "type": repo_type,
            "private": request.get("visibility") == "private",
            "request": request,
        }
        self._send(200, {"url": url, "name": repo_id})

    def _validate(self, content: str) -> None:
        front = content.split("---")[1] if content.startswith("---") else ""
        try:
            yaml.safe_load(front)
        except yaml.YAMLError as error:
            self._send(400, {"errors": [{"message": str(error)}], "warnings": []})
            return
        self._send(200, {"errors": [], "warnings": []})

    def _commit(self, body: bytes) -> None:
        repo_type, repo_id, _ = self._repo()
        folder = self.hub.folder(repo_type, repo_id)
        lines = [json.loads(line) for line in body.decode().splitlines() if line.strip()]
        operations = []
        for line in lines[1:]:
            value = line["value"]
            path = folder / value["path"]
            if line["key"] == "file":
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(base64.b64decode(value["content"]))
            elif line["key"] == "deletedFile":
                path.unlink()
            operations.append((line["key"], value["path"]))
        self.hub.commits.append(
            {
                "repo": repo_id,
                "type": repo_type,
                "summary": lines[0]["value"]["summary"],
                "operations": operations,
            }
        )
        oid = f"{len(self.hub.commits):040x}"
        self._send(
            200,
            {"commitUrl": f"{self.hub.url}/{repo_type}s/{repo_id}/commit/{oid}", "commitOid": oid},
        )
