"""Typed operation params: the base model every kind's params extend, validated on submit and on load."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.alias_generators import to_camel

from instantstart.errors import InvalidInput


class ParamsModel(BaseModel):
    """Params as stored: camelCase keys (the wire and DB form), snake_case attributes, unknown keys refused."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


def _problems(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}" for err in exc.errors()[:5]
    )


def params_for_submit(model: type[BaseModel], kind: str, params: dict[str, Any]) -> BaseModel:
    """Validate raw params against the kind's model (a tool that builds a dict rather than the model)."""
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        raise InvalidInput(
            f"Params of operation kind {kind} do not validate: {_problems(exc)}.",
            hint="This is a bug in the tool that submitted it; nothing was recorded.",
            details={"kind": kind},
        ) from None


def params_to_store(model: type[BaseModel], kind: str, params: BaseModel) -> dict[str, Any]:
    """The stored (JSON, camelCase) form of the kind's params model, dumped once; another model is refused."""
    if not isinstance(params, model):
        raise InvalidInput(
            f"Params of operation kind {kind} are a {type(params).__name__}, not its {model.__name__}.",
            hint="This is a bug in the tool that submitted it: pass the kind's params model; nothing was recorded.",
            details={"kind": kind},
        )
    return params.model_dump(mode="json", by_alias=True)


def params_for_load(model: type[BaseModel], kind: str, operation_id: str, params: dict[str, Any]) -> BaseModel:
    """The stored params as the kind's model; a clear error when an older version stored another shape."""
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        raise InvalidInput(
            f"Operation {operation_id} ({kind}) was recorded by a version of InstantStart whose params this version "
            f"cannot load: {_problems(exc)}.",
            hint="It cannot resume; start the same request again as a new operation.",
            details={"kind": kind, "operationId": operation_id},
        ) from None
