"""Every JSON / REST-JSON request checked against its botocore input shape before any handler runs.

AWS's front door refuses a request that breaks its model's constraints (required members, types,
min/max length and value, patterns, enums, list and map sizes) before the service sees it, with one
ValidationException listing every violation in Coral's wording (`1 validation error detected: Value
'x' at 'clusterName' failed to satisfy constraint: Member must have length less than or equal to
63`). botocore checks only `required`, types and minimums on the client, so everything else must be
refused here. The constraints come from botocore's own service models (the version installed), never
from a hand-written list. Query/EC2-protocol services (EC2, IAM, STS) are left to moto: their models
carry almost no constraints.
"""

from __future__ import annotations

import datetime as dt
import re
from functools import cache
from typing import Any

from botocore.model import OperationModel, OperationNotFoundError, ServiceModel, Shape

from .protocol import AwsError, AwsRequest, service_model

_CHECKED_PROTOCOLS = ("json", "rest-json")
_MAX_LISTED = 10  # AWS lists at most this many violations in one message


def _model(service: str) -> ServiceModel:
    found: ServiceModel = service_model(service)
    return found


@cache
def _pattern(text: str) -> re.Pattern[str] | None:
    try:
        return re.compile(text)
    except re.error:
        return None  # Java-only syntax (\p{…} classes): not checked rather than wrongly refused


@cache
def error_code(service: str) -> str:
    """The code a service uses for a model-constraint violation: ValidationException where the model
    declares it, else the service's own InvalidParameterException (EKS)."""
    names = set(_model(service).shape_names)
    if "ValidationException" in names or "InvalidParameterException" not in names:
        return "ValidationException"
    return "InvalidParameterException"


def check_request(req: AwsRequest) -> AwsError | None:
    """The error AWS answers for `req` before any handler, or None when the request fits its model."""
    if req.protocol not in _CHECKED_PROTOCOLS or not req.operation:
        return None
    if req.service == "sagemaker-runtime":  # the body is the model's payload, not input members
        return None
    try:
        op: OperationModel = _model(req.service).operation_model(req.operation)
    except OperationNotFoundError:
        return None
    if op.input_shape is None:
        return None
    params = req.params  # SerializationException for a body that is not JSON
    errors = violations(op.input_shape, params)
    if req.service == "eks" and not errors:
        errors = _eks_cluster_name(op, params)
    if not errors:
        return None
    return refusal(req.service, errors)


_CORAL = re.compile(r"^Value (?P<value>.*) at '(?P<path>[^']*)' failed to satisfy constraint: "
                    r"Member must (?P<rule>.*)$")
# EKS's resource-name pattern, and the sentence EKS adds after it.
_EKS_NAME_PATTERN = "^[0-9A-Za-z][A-Za-z0-9\\-_]*"
_EKS_NAME_HINT = ("In other words, it should start with a number or letter, and can contain numbers, letters, "
                  "dashes, and underscores.")


def _eks_message(error: str) -> str:
    """EKS validates its parameters itself and words the first violation its own way (InvalidParameterException:
    "The parameter name should not be greater than 100 characters.", "The clusterName parameter contains invalid
    characters. It should conform to the regular expression …"); other violations keep Coral's wording."""
    found = _CORAL.match(error)
    if found is None:
        return error
    leaf = found["path"].split(".")[-1]
    rule, is_text = found["rule"], found["value"].startswith("'")
    if is_text and rule.startswith("have length less than or equal to "):
        return f"The parameter {leaf} should not be greater than {rule.rsplit(' ', 1)[1]} characters."
    if is_text and rule.startswith("satisfy regular expression pattern: "):
        pattern = rule.split(": ", 1)[1]
        text = (f"The {leaf} parameter contains invalid characters. It should conform to the regular expression "
                f'"{pattern.replace(chr(92) + "-", "-")}"')
        return text + (_EKS_NAME_HINT if pattern == _EKS_NAME_PATTERN else "")
    return "1 validation error detected: " + error


def _eks_cluster_name(op: OperationModel, params: dict[str, Any]) -> list[str]:
    """EKS checks the cluster name of every `/clusters/{name}` path against the ClusterName shape, also
    where the model leaves the member a plain String (DescribeCluster, ListNodegroups, …: real EKS answers
    "The name parameter contains invalid characters…" there too)."""
    assert op.input_shape is not None
    out: list[str] = []
    for name, member in op.input_shape.members.items():
        if member.serialization.get("location") == "uri" and member.serialization.get("name") == "name" \
                and not member.metadata and isinstance(params.get(name), str):
            _string(_model("eks").shape_for("ClusterName"), params[name], _member_path("", name), out, typed=True)
    return out


def refusal(service: str, errors: list[str]) -> AwsError:
    """One error for all violations, as Coral words it (EKS: its own InvalidParameterException wording)."""
    if service == "eks":
        return AwsError("InvalidParameterException", _eks_message(errors[0]))
    count = len(errors)
    head = f"{count} validation error{'s' if count != 1 else ''} detected: "
    return AwsError(error_code(service), head + "; ".join(errors[:_MAX_LISTED]))


def violations(shape: Shape, params: dict[str, Any], *, typed: bool = True) -> list[str]:
    """Every constraint `params` breaks, as `Value … at '…' failed to satisfy constraint: …` texts."""
    out: list[str] = []
    _structure(shape, params, "", out, typed=typed, top=True)
    return out


def _member_path(parent: str, name: str) -> str:
    name = name[:1].lower() + name[1:]
    return f"{parent}.{name}" if parent else name


def _show(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f"'{value}'"
    if isinstance(value, list):
        return "[" + ", ".join(_show(v).strip("'") for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={_show(v).strip(chr(39))}" for k, v in value.items()) + "}"
    return str(value)


def _fail(out: list[str], value: Any, path: str, rule: str) -> None:
    out.append(f"Value {_show(value)} at '{path}' failed to satisfy constraint: Member must {rule}")


def _structure(shape: Shape, value: Any, path: str, out: list[str], *, typed: bool, top: bool = False) -> None:
    if not isinstance(value, dict):
        _fail(out, value, path, "be a structure")
        return
    members = shape.members  # type: ignore[attr-defined]
    for required in shape.metadata.get("required", []):
        if value.get(required) is None:
            _fail(out, None, _member_path(path, required), "not be null")
    for name, item in value.items():
        member = members.get(name)
        if member is None or item is None:
            continue  # unknown members are ignored by AWS's JSON deserialisers
        # URI and query members arrive as text (the protocol layer converts the integers it knows).
        loose = top and member.serialization.get("location") in ("uri", "querystring", "header")
        _value(member, item, _member_path(path, name), out, typed=typed and not loose)


def _value(shape: Shape, value: Any, path: str, out: list[str], *, typed: bool) -> None:
    kind = shape.type_name
    meta = shape.metadata
    if kind == "structure":
        _structure(shape, value, path, out, typed=typed)
    elif kind == "list":
        if not isinstance(value, list):
            _fail(out, value, path, "be a list")
            return
        _size(value, len(value), meta, path, out)
        member = shape.member  # type: ignore[attr-defined]
        for i, item in enumerate(value, start=1):
            if item is not None:
                _value(member, item, f"{path}.{i}.member", out, typed=typed)
    elif kind == "map":
        if not isinstance(value, dict):
            _fail(out, value, path, "be a map")
            return
        _size(value, len(value), meta, path, out)
        for key, item in value.items():
            _value(shape.key, key, f"{path}.key", out, typed=typed)  # type: ignore[attr-defined]
            if item is not None:
                _value(shape.value, item, f"{path}.value", out, typed=typed)  # type: ignore[attr-defined]
    elif kind == "string":
        _string(shape, value, path, out, typed=typed)
    elif kind in ("integer", "long", "float", "double"):
        _number(kind, meta, value, path, out, typed=typed)
    elif kind == "boolean":
        if typed and not isinstance(value, bool):
            _fail(out, value, path, "be a boolean")
    elif kind == "timestamp" and typed and not isinstance(value, (int, float, str, dt.datetime)):
        _fail(out, value, path, "be a timestamp")


def _size(value: Any, size: int, meta: dict[str, Any], path: str, out: list[str]) -> None:
    if "min" in meta and size < meta["min"]:
        _fail(out, value, path, f"have length greater than or equal to {meta['min']}")
    if "max" in meta and size > meta["max"]:
        _fail(out, value, path, f"have length less than or equal to {meta['max']}")


def _string(shape: Shape, value: Any, path: str, out: list[str], *, typed: bool) -> None:
    if not isinstance(value, str):
        if typed:
            _fail(out, value, path, "be a string")
        return
    meta = shape.metadata
    _size(value, len(value), meta, path, out)
    enum: list[str] = getattr(shape, "enum", None) or []
    if enum and value not in enum:
        _fail(out, value, path, f"satisfy enum value set: [{', '.join(enum)}]")
    pattern = meta.get("pattern")
    compiled = _pattern(pattern) if pattern else None
    # Java's String.matches(): the whole value must match, anchored or not.
    if compiled is not None and compiled.fullmatch(value) is None:
        _fail(out, value, path, f"satisfy regular expression pattern: {pattern}")


def _number(kind: str, meta: dict[str, Any], value: Any, path: str, out: list[str], *, typed: bool) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        if isinstance(value, str) and not typed:
            try:
                value = float(value) if kind in ("float", "double") else int(value)
            except ValueError:
                _fail(out, value, path, "be a number")
                return
        else:
            if typed:
                _fail(out, value, path, "be a number")
            return
    if kind in ("integer", "long") and isinstance(value, float) and not value.is_integer():
        _fail(out, value, path, "be an integer")
        return
    if "min" in meta and value < meta["min"]:
        _fail(out, value, path, f"have value greater than or equal to {meta['min']}")
    if "max" in meta and value > meta["max"]:
        _fail(out, value, path, f"have value less than or equal to {meta['max']}")


def shape_of(service: str, operation: str) -> Shape | None:
    """The input shape of an operation (for tests that derive requests from the model)."""
    op = _model(service).operation_model(operation)
    return op.input_shape
