"""The Hugging Face hub's model API (or a mirror's): what the hub says about a model before a download Job runs."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

import httpx

TIMEOUT = httpx.Timeout(10.0, connect=5.0)


@dataclass(frozen=True)
class ModelLookup:
    """The hub's answer about one model at one revision.

    status 0 means the hub could not be reached; error_code is the hub's `X-Error-Code` (RepoNotFound,
    RevisionNotFound, GatedRepo, ...); gated is whether the repo needs an accepted licence and a token."""

    status: int
    error_code: str | None = None
    gated: bool = False


def _headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def lookup_model(endpoint: str, model_id: str, revision: str, token: str | None) -> ModelLookup:
    """`GET <endpoint>/api/models/<id>/revision/<revision>` (blocking); never raises for the hub's answer."""
    url = f"{endpoint.rstrip('/')}/api/models/{quote(model_id, safe='/')}/revision/{quote(revision, safe='')}"
    try:
        response = httpx.get(url, headers=_headers(token), timeout=TIMEOUT, follow_redirects=False)
    except httpx.HTTPError:
        return ModelLookup(status=0)
    code = response.headers.get("x-error-code")
    if response.status_code != 200:
        return ModelLookup(status=response.status_code, error_code=code)
    try:
        gated = response.json().get("gated")
    except ValueError:
        gated = None
    return ModelLookup(status=200, gated=bool(gated) and gated != "false")


def model_ids(endpoint: str, token: str | None, *, search: str = "", author: str = "", limit: int = 100) -> list[str]:
    """Model ids the hub lists (`GET <endpoint>/api/models?search=&author=&limit=`); [] when it lists none."""
    params = {k: v for k, v in {"search": search, "author": author, "limit": str(limit)}.items() if v}
    try:
        response = httpx.get(
            f"{endpoint.rstrip('/')}/api/models", params=params, headers=_headers(token), timeout=TIMEOUT
        )
        items = response.json() if response.status_code == 200 else []
    except (httpx.HTTPError, ValueError):
        return []
    if not isinstance(items, list):
        return []
    return [str(i["id"]) for i in items if isinstance(i, dict) and isinstance(i.get("id"), str)][:limit]
