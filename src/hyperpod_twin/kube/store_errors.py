"""The object store's errors, each carrying the HTTP status and reason the API server answers with."""

from __future__ import annotations


class StoreError(Exception):
    """Base of store errors; `code` is the HTTP status the API server answers with."""

    code = 500
    reason = "InternalError"


class NotFoundError(StoreError):
    """The object (or type) does not exist."""

    code = 404
    reason = "NotFound"


class AlreadyExistsError(StoreError):
    """An object with that name exists already."""

    code = 409
    reason = "AlreadyExists"


class ConflictError(StoreError):
    """The resourceVersion of a write is not the stored one (optimistic concurrency)."""

    code = 409
    reason = "Conflict"
