"""The `Secret` field kind: a token that reaches the service function in memory and nowhere else.

A Secret field is never stored in operation params, results or the database, never logged, never sent in
WebSocket events or shown in OpenAPI examples, and never taken from a query string. Its value is
registered for log redaction the moment it is validated; the engine refuses to record it in the params of
the operation its call submits and scrubs it from that operation's outputs (`logs.carry_secrets`). The same
text sent as ordinary data by another call is that call's data (a token equal to "us-west-2" must not make
the Region unwritable). The one documented way to keep a secret is a Kubernetes Secret written
by the service function itself.
"""

from __future__ import annotations

from typing import Annotated, Any, get_args

from pydantic import BaseModel, Field, SecretStr

SECRET_MARK = "x-instantstart-secret"

Secret = Annotated[
    SecretStr,
    Field(
        min_length=8,
        max_length=4096,
        json_schema_extra={SECRET_MARK: True, "writeOnly": True, "format": "password"},
        description="A secret: used in memory only, never stored or echoed.",
    ),
]


def is_secret_annotation(annotation: Any) -> bool:
    """Whether a field annotation is a Secret (or an optional one)."""
    if annotation is SecretStr:
        return True
    return any(is_secret_annotation(arg) for arg in get_args(annotation))


def secret_fields(model: type[BaseModel]) -> list[str]:
    """The wire names of the Secret fields of a model (top level; secrets are never nested)."""
    return [info.alias or name for name, info in model.model_fields.items() if is_secret_annotation(info.annotation)]


def secret_values(request: BaseModel) -> list[tuple[str, str]]:
    """(wire name, plain value) of every Secret field of a validated request that has a value."""
    values = []
    for name, info in type(request).model_fields.items():
        value = getattr(request, name)
        if isinstance(value, SecretStr):
            values.append((info.alias or name, value.get_secret_value()))
    return values
