"""The hub stand-in over HTTP: the Hugging Face model API (`/api/models/<id>[/revision/<rev>]`, `/api/models?search=`).

Answers as huggingface.co does: an unknown repo is 401 (anonymous) or 404 (with a token) carrying
`X-Error-Code: RepoNotFound`; an unknown revision 404 `RevisionNotFound`; a token the hub does not know 401;
a gated repo's metadata is public (`"gated": "manual"`), only its files need a granted token.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from hyperpod_twin.kube.http import HttpServer, Request, Response
from hyperpod_twin.sim.hf_hub import GATED_TOKEN, HUB, Hub

_MODEL = re.compile(r"^/api/models/([^/]+/[^/]+|[^/]+)(?:/revision/([^/]+))?$")
KNOWN_TOKENS = frozenset({GATED_TOKEN})  # tokens the stand-in hub accepts as valid credentials


def _bearer(request: Request) -> str | None:
    value = request.headers.get("authorization", "")
    return value[len("Bearer ") :] if value.startswith("Bearer ") else None


def _error(status: int, code: str | None, message: str) -> Response:
    return Response.json(status, {"error": message}, {"X-Error-Code": code} if code else None)


def _info(hub: Hub, repo_id: str, revision: str) -> dict[str, Any]:
    repo = hub.repos[repo_id]
    author = repo_id.split("/")[0] if "/" in repo_id else None
    return {
        "id": repo_id,
        "modelId": repo_id,
        "author": author,
        "sha": hashlib.sha256(f"{repo_id}@{revision}".encode()).hexdigest()[:40],  # a commit-like id
        "private": False,
        "gated": "manual" if repo.token is not None else False,
        "disabled": False,
        "siblings": [{"rfilename": name} for name in sorted(repo.revisions[revision])],
    }


def handle(request: Request, hub: Hub = HUB) -> Response:
    """One request to the stand-in hub's model API."""
    if request.method not in ("GET", "HEAD"):
        return _error(405, None, "Method not allowed")
    token = _bearer(request)
    if token is not None and token not in KNOWN_TOKENS:
        return _error(401, None, "Invalid credentials in Authorization header")
    if request.path == "/api/models":
        search, author = request.param("search").lower(), request.param("author")
        limit = int(request.param("limit", "1000") or "1000")
        ids = [i for i in sorted(hub.repos) if search in i.lower() and (not author or i.startswith(author + "/"))]
        return Response.json(200, [{"id": i, "modelId": i} for i in ids[:limit]])
    match = _MODEL.match(request.path)
    if match is None:
        return _error(404, None, "Not Found")
    repo_id, revision = match.group(1), match.group(2) or "main"
    if repo_id not in hub.repos:
        return _error(404 if token else 401, "RepoNotFound", "Repository not found")
    if revision not in hub.repos[repo_id].revisions:
        return _error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
    return Response.json(200, _info(hub, repo_id, revision))


class HubServer:
    """The stand-in hub on loopback; its `url` is what the control plane's hf_endpoint points at."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._http = HttpServer(handle, host, port, name="twin-hf-hub")

    @property
    def url(self) -> str:
        """Base URL (HF_ENDPOINT)."""
        return f"http://{self._http.host}:{self._http.port}"

    def start(self) -> None:
        """Serve."""
        self._http.start()

    def stop(self, **_: Any) -> None:
        """Stop serving."""
        self._http.stop()
