"""Kubernetes `Status` error bodies and the exception the API server raises to answer with one."""

from __future__ import annotations

from typing import Any

from hyperpod_twin.kube.store import ResourceType
from hyperpod_twin.kube.store_errors import StoreError

REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    500: "InternalError",
    503: "ServiceUnavailable",
}


class ApiError(Exception):
    """An error the API server answers with a `Status` body and this HTTP code."""

    def __init__(
        self,
        code: int,
        message: str,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or REASONS.get(code, "Unknown")
        self.details = details

    def body(self) -> dict[str, Any]:
        """The `Status` object clients decode."""
        return status_body(self.code, self.message, self.reason, self.details)

    @classmethod
    def from_store(cls, err: StoreError, rtype: ResourceType | None = None, name: str = "") -> ApiError:
        """Translate a store error, naming the resource as Kubernetes does in `details`."""
        details: dict[str, Any] | None = None
        if rtype is not None:
            details = {"name": name, "kind": rtype.plural}
            if rtype.group:
                details["group"] = rtype.group
        code = err.code if err.code != 500 or str(err).find("Required value") < 0 else 422
        reason = err.reason if code == err.code else "Invalid"
        return cls(code, str(err), reason, details)


def status_body(
    code: int, message: str, reason: str = "", details: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A meta/v1 Status (Failure unless code < 400)."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success" if code < 400 else "Failure",
        "message": message,
        "reason": reason or REASONS.get(code, ""),
        "code": code,
    }
    if details:
        body["details"] = details
    if code < 400:
        body.pop("reason")
        body.pop("message")
    return body


def not_found(rtype: ResourceType, name: str) -> ApiError:
    """404 for one named object, worded as kube-apiserver words it."""
    what = f"{rtype.plural}.{rtype.group}" if rtype.group else rtype.plural
    details: dict[str, Any] = {"name": name, "kind": rtype.plural}
    if rtype.group:
        details["group"] = rtype.group
    return ApiError(404, f'{what} "{name}" not found', "NotFound", details)
