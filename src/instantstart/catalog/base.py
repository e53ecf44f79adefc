"""Base pydantic models for operation inputs and outputs: camelCase on the wire, unknown fields refused."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class WireModel(BaseModel):
    """A model as it crosses a face: camelCase aliases, snake_case accepted too, extra fields refused."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", str_strip_whitespace=True
    )


class NoInput(WireModel):
    """An operation that takes no parameters."""
