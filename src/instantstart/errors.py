"""One exception hierarchy with stable codes and hints, mapped once to HTTP and once to MCP."""

from __future__ import annotations

from typing import Any, ClassVar


class InstantStartError(Exception):
    """Base of every error the control plane reports to a caller.

    `code` is stable and machine-readable; `message` says what happened; `hint` says what to do next;
    `details` carries structured context (field names, blocking operation ids …). `retryable` tells the
    operations engine whether a stage that raised it may be tried again.
    """

    code: ClassVar[str] = "INTERNAL"
    http_status: ClassVar[int] = 500
    retryable: ClassVar[bool] = False
    default_hint: ClassVar[str] = "Check the server log for the request id and report it if it persists."

    def __init__(self, message: str, *, hint: str | None = None, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint or self.default_hint
        self.details = details or {}

    def to_dict(self) -> dict[str, Any]:
        """The wire form `{code, message, hint, details}` used by every face."""
        return {"code": self.code, "message": self.message, "hint": self.hint, "details": self.details}


class InvalidInput(InstantStartError):
    """The request is malformed or a value breaks a rule; nothing was changed."""

    code = "INVALID_INPUT"
    http_status = 422
    default_hint = "Correct the named field and send the request again."


class Unauthorized(InstantStartError):
    """No valid API token was presented."""

    code = "UNAUTHORIZED"
    http_status = 401
    default_hint = "Send `Authorization: Bearer <token>`; the token is in the data dir's api-token file."


class NotFound(InstantStartError):
    """The named resource does not exist."""

    code = "NOT_FOUND"
    http_status = 404
    default_hint = "List the resources to see the valid names."


class Conflict(InstantStartError):
    """The request conflicts with the current state (e.g. another operation holds the target)."""

    code = "CONFLICT"
    http_status = 409
    default_hint = "Wait for the blocking operation to finish, or cancel it, then retry."


class PreconditionFailed(InstantStartError):
    """Something the request depends on is not in place yet."""

    code = "PRECONDITION_FAILED"
    http_status = 412
    default_hint = "Complete the prerequisite step named in the message first."


class CapacityUnavailable(InstantStartError):
    """AWS has no capacity for the instance type in the chosen Availability Zone."""

    code = "CAPACITY_UNAVAILABLE"
    http_status = 503
    default_hint = "Try another Availability Zone or instance type, use a training plan, or retry later."


class QuotaExceeded(InstantStartError):
    """An AWS service quota would be exceeded."""

    code = "QUOTA_EXCEEDED"
    http_status = 429
    default_hint = "Request a quota increase in Service Quotas, or ask for fewer resources."


class Throttled(InstantStartError):
    """AWS or Kubernetes throttled the call; it is safe to retry."""

    code = "THROTTLED"
    http_status = 429
    retryable = True
    default_hint = "Retry after a short wait."


class ProviderError(InstantStartError):
    """AWS or Kubernetes failed in a way that may pass."""

    code = "PROVIDER_ERROR"
    http_status = 502
    retryable = True
    default_hint = "Retry; if it persists, check the provider's status and the operation's message."


class Timeout(InstantStartError):
    """A stage did not finish within its time limit."""

    code = "TIMEOUT"
    http_status = 504
    default_hint = "Retry the operation; it resumes from the stage that timed out."


class Cancelled(InstantStartError):
    """The operation was cancelled by a caller."""

    code = "CANCELLED"
    http_status = 409
    default_hint = "Start a new operation, or retry this one."


class InternalError(InstantStartError):
    """A bug: something failed that should not have."""

    code = "INTERNAL"
    http_status = 500


class PayloadTooLarge(InstantStartError):
    """The request body is larger than the server accepts; it was not read to the end."""

    code = "PAYLOAD_TOO_LARGE"
    http_status = 413
    default_hint = "Send a smaller request; operation arguments are small JSON objects."


class IdempotencyKeyReused(InvalidInput):
    """An idempotency key was sent again with different arguments."""

    code = "IDEMPOTENCY_KEY_REUSED"
    default_hint = "Use a new clientToken / Idempotency-Key for different arguments, or resend the same ones."
