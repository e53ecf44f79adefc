"""One exception hierarchy with stable codes and hints, mapped once to HTTP and once to MCP."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar


class ErrorCode(StrEnum):
    """Every machine-readable error code the control plane reports, on every face."""

    INVALID_INPUT = "INVALID_INPUT"
    UNAUTHORIZED = "UNAUTHORIZED"
    FORBIDDEN = "FORBIDDEN"
    NOT_FOUND = "NOT_FOUND"
    CONFLICT = "CONFLICT"
    PRECONDITION_FAILED = "PRECONDITION_FAILED"
    DEPENDENCY_FAILED = "DEPENDENCY_FAILED"
    VERIFICATION_FAILED = "VERIFICATION_FAILED"
    UNSUPPORTED_RESOURCE = "UNSUPPORTED_RESOURCE"
    CAPACITY_UNAVAILABLE = "CAPACITY_UNAVAILABLE"
    QUOTA_EXCEEDED = "QUOTA_EXCEEDED"
    THROTTLED = "THROTTLED"
    PROVIDER_ERROR = "PROVIDER_ERROR"
    TIMEOUT = "TIMEOUT"
    CANCELLED = "CANCELLED"
    UNKNOWN_KIND = "UNKNOWN_KIND"
    PAYLOAD_TOO_LARGE = "PAYLOAD_TOO_LARGE"
    IDEMPOTENCY_KEY_REUSED = "IDEMPOTENCY_KEY_REUSED"
    INTERNAL = "INTERNAL"


class InstantStartError(Exception):
    """Base of every error the control plane reports to a caller.

    `code` is stable and machine-readable; `message` says what happened; `hint` says what to do next;
    `details` carries structured context (field names, blocking operation ids …). `retryable` tells the
    operations engine whether a stage that raised it may be tried again with backoff (a class default that
    one raise may override: a NotFound that is expected to appear soon is retryable).
    """

    code: ClassVar[ErrorCode] = ErrorCode.INTERNAL
    http_status: ClassVar[int] = 500
    retryable: bool = False
    default_hint: ClassVar[str] = "Check the server log for the request id and report it if it persists."

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        details: dict[str, Any] | None = None,
        retryable: bool | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint or self.default_hint
        self.details = details or {}
        if retryable is not None:
            self.retryable = retryable

    def to_dict(self) -> dict[str, Any]:
        """The wire form `{code, message, hint, details}` used by every face."""
        return {"code": self.code.value, "message": self.message, "hint": self.hint, "details": self.details}


class InvalidInput(InstantStartError):
    """The request is malformed or a value breaks a rule; nothing was changed."""

    code = ErrorCode.INVALID_INPUT
    http_status = 422
    default_hint = "Correct the named field and send the request again."


class Unauthorized(InstantStartError):
    """No valid API token was presented."""

    code = ErrorCode.UNAUTHORIZED
    http_status = 401
    default_hint = "Send `Authorization: Bearer <token>`; the token is in the data dir's api-token file."


class Forbidden(InstantStartError):
    """The caller is known but their role may not call this operation; nothing was changed."""

    code = ErrorCode.FORBIDDEN
    http_status = 403
    default_hint = "Ask an admin for a role that may call it (`instantstart user update`)."


class NotFound(InstantStartError):
    """The named resource does not exist."""

    code = ErrorCode.NOT_FOUND
    http_status = 404
    default_hint = "List the resources to see the valid names."


class Conflict(InstantStartError):
    """The request conflicts with the current state (e.g. another operation holds the target)."""

    code = ErrorCode.CONFLICT
    http_status = 409
    default_hint = "Wait for the blocking operation to finish, or cancel it, then retry."


class PreconditionFailed(InstantStartError):
    """Something the request depends on is not in place yet."""

    code = ErrorCode.PRECONDITION_FAILED
    http_status = 412
    default_hint = "Complete the prerequisite step named in the message first."


class CapacityUnavailable(InstantStartError):
    """AWS has no capacity for the instance type in the chosen Availability Zone."""

    code = ErrorCode.CAPACITY_UNAVAILABLE
    http_status = 503
    default_hint = "Try another Availability Zone or instance type, use a training plan, or retry later."


class QuotaExceeded(InstantStartError):
    """An AWS service quota would be exceeded."""

    code = ErrorCode.QUOTA_EXCEEDED
    http_status = 429
    default_hint = "Request a quota increase in Service Quotas, or ask for fewer resources."


class Throttled(InstantStartError):
    """AWS or Kubernetes throttled the call; it is safe to retry."""

    code = ErrorCode.THROTTLED
    http_status = 429
    retryable = True
    default_hint = "Retry after a short wait."


class ProviderError(InstantStartError):
    """AWS or Kubernetes failed in a way that may pass."""

    code = ErrorCode.PROVIDER_ERROR
    http_status = 502
    retryable = True
    default_hint = "Retry; if it persists, check the provider's status and the operation's message."


class Timeout(InstantStartError):
    """A stage did not finish within its time limit."""

    code = ErrorCode.TIMEOUT
    http_status = 504
    default_hint = "Retry the operation; it resumes from the stage that timed out."


class Cancelled(InstantStartError):
    """The operation was cancelled by a caller."""

    code = ErrorCode.CANCELLED
    http_status = 409
    default_hint = "Start a new operation, or retry this one."


class InternalError(InstantStartError):
    """A bug: something failed that should not have."""

    code = ErrorCode.INTERNAL
    http_status = 500


class DependencyFailed(InstantStartError):
    """Something this step depends on (an add-on, a chart, a resource still in use) is not healthy yet."""

    code = ErrorCode.DEPENDENCY_FAILED
    http_status = 424
    default_hint = "Check the named dependency's status; operation_retry resumes once it is healthy."


class VerificationFailed(InstantStartError):
    """The cluster was built but a check of the running result failed."""

    code = ErrorCode.VERIFICATION_FAILED
    http_status = 409
    default_hint = "cluster_get_status shows which check failed; fix it and retry the verification stage."


class Unsupported(InstantStartError):
    """The resource or combination is not one the control plane manages."""

    code = ErrorCode.UNSUPPORTED_RESOURCE
    http_status = 422
    default_hint = "See the tool description for what is supported."


class UnknownKind(InstantStartError):
    """A stored operation names a kind no loaded module registers."""

    code = ErrorCode.UNKNOWN_KIND
    http_status = 500
    default_hint = "Start the server with the plugin that registers this kind."


class PayloadTooLarge(InstantStartError):
    """The request body is larger than the server accepts; it was not read to the end."""

    code = ErrorCode.PAYLOAD_TOO_LARGE
    http_status = 413
    default_hint = "Send a smaller request; operation arguments are small JSON objects."


class IdempotencyKeyReused(InvalidInput):
    """An idempotency key was sent again with different arguments."""

    code = ErrorCode.IDEMPOTENCY_KEY_REUSED
    default_hint = "Use a new clientToken / Idempotency-Key for different arguments, or resend the same ones."
