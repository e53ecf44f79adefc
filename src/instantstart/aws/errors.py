"""Translating botocore errors into the control plane's error hierarchy, once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

from botocore.exceptions import BotoCoreError, ClientError, EndpointConnectionError

from instantstart.errors import (
    CapacityUnavailable,
    Conflict,
    InstantStartError,
    InvalidInput,
    NotFound,
    ProviderError,
    QuotaExceeded,
    Throttled,
)

T = TypeVar("T")

_THROTTLE = {
    "Throttling",
    "ThrottlingException",
    "RequestLimitExceeded",
    "TooManyRequestsException",
    "SlowDown",
    "RequestThrottled",
    "PriorRequestNotComplete",
}
_NOT_FOUND_SUFFIXES = ("NotFound", "NotFoundException", "NoSuchEntity", "NoSuchBucket")
_QUOTA = {
    "ResourceLimitExceeded",
    "LimitExceededException",
    "ResourceLimitExceededException",
    "VpcLimitExceeded",
    "AddressLimitExceeded",
    "ServiceQuotaExceededException",
}
_CAPACITY = {"InsufficientInstanceCapacity", "InsufficientCapacityException", "InsufficientCapacity"}
_CONFLICT = {
    "ResourceInUse",
    "ResourceInUseException",
    "ConflictException",
    "EntityAlreadyExists",
    "BucketAlreadyOwnedByYou",
    "DependencyViolation",
}


def error_code(exc: BaseException) -> str:
    """The AWS error code of a ClientError, or of a domain error translated from one ("" otherwise)."""
    if isinstance(exc, InstantStartError):
        extra = exc.details
        return str(extra.get("awsErrorCode", ""))
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return ""
    return str(response.get("Error", {}).get("Code", ""))


def translate(exc: Exception, action: str) -> InstantStartError:
    """The domain error for a failed AWS call; `action` says what was being done (for the message)."""
    if isinstance(exc, InstantStartError):
        return exc
    if isinstance(exc, ClientError):
        code = error_code(exc)
        message = exc.response.get("Error", {}).get("Message", "") or str(exc)
        text = f"{action}: {code}: {message}"
        details = {"awsErrorCode": code}
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        if code in _THROTTLE:
            return Throttled(text, details=details)
        if code in _CAPACITY or "insufficient capacity" in message.lower():
            return CapacityUnavailable(text, details=details)
        if code in _QUOTA:
            return QuotaExceeded(text, details=details)
        if code.endswith(_NOT_FOUND_SUFFIXES) or code in ("ResourceNotFound", "ResourceNotFoundException"):
            return NotFound(text, details=details)
        if code in _CONFLICT:
            return Conflict(text, details=details)
        if code in (
            "ValidationException",
            "InvalidParameterException",
            "InvalidParameterValue",
            "InvalidParameterCombination",
            "InvalidRequestException",
            "MalformedPolicyDocument",
        ):
            return InvalidInput(
                text, hint="AWS rejected the request as built; check the values named.", details=details
            )
        if status >= 500 or code in ("InternalError", "InternalFailure", "ServiceUnavailable", "ServerException"):
            return ProviderError(text, details=details)
        return ProviderError(text, details=details)
    if isinstance(exc, EndpointConnectionError):
        return ProviderError(f"{action}: cannot reach the AWS endpoint ({exc})")
    if isinstance(exc, BotoCoreError):
        return ProviderError(f"{action}: {exc}")
    return ProviderError(f"{action}: {type(exc).__name__}: {exc}")


def call(action: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Make one AWS call, translating its failure into the domain error (`action` names it in the message)."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:
        raise translate(exc, action) from exc


def call_or_none(action: str, fn: Callable[..., Any], key: str, **kwargs: Any) -> dict[str, Any] | None:
    """Make one Describe call and return its `key` member, or None when the resource does not exist
    (ResourceNotFoundException); any other failure is translated as `call` does."""
    try:
        return cast("dict[str, Any]", fn(**kwargs)[key])
    except Exception as exc:
        if error_code(exc) == "ResourceNotFoundException":
            return None
        raise translate(exc, action) from exc


def call_gone_ok(action: str, fn: Callable[..., Any], **kwargs: Any) -> None:
    """Make one Delete call; a resource already gone (ResourceNotFoundException) is success."""
    try:
        fn(**kwargs)
    except Exception as exc:
        if error_code(exc) != "ResourceNotFoundException":
            raise translate(exc, action) from exc
