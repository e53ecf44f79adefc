"""The env of a training job on the wire: plain values, or a reference to a key of a Kubernetes Secret."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Discriminator, Field, Tag

from instantstart.catalog.base import WireModel
from instantstart.manifests.env import EnvValue, SecretKeyRef
from instantstart.validation import DNS1123_SUBDOMAIN_RE

SECRET_KEY_PATTERN = r"^[-._a-zA-Z0-9]+$"  # Kubernetes' rule for the keys of a Secret's data


class SecretKeySelector(WireModel):
    """A key of a Secret in the job's namespace."""

    name: str = Field(min_length=1, max_length=253, pattern=DNS1123_SUBDOMAIN_RE.pattern,
                      description="The Secret's name (a DNS-1123 subdomain), in the job's namespace.")
    key: str = Field(min_length=1, max_length=253, pattern=SECRET_KEY_PATTERN,
                     description="The key of the Secret's data (letters, digits, '-', '_', '.').")


class EnvSource(WireModel):
    """Where a variable's value comes from instead of a plain value."""

    secret_key_ref: SecretKeySelector = Field(description="Rendered as valueFrom.secretKeyRef: the kubelet reads "
                                              "the value when the pod starts; it never passes through InstantStart.")


def _branch(value: Any) -> str:
    return "value" if isinstance(value, str) or not isinstance(value, dict | EnvSource) else "from"


# Tagged, so a bad entry is reported once at env.<NAME>.from.secretKeyRef.<field> (or env.<NAME>.value), not
# once per branch of the union.
EnvEntry = Annotated[
    Annotated[str, Tag("value")] | Annotated[EnvSource, Tag("from")], Discriminator(_branch)
]
ENV_DESCRIPTION = (
    "Environment variables of the job's containers: a plain value, or {\"secretKeyRef\": {\"name\": ..., "
    "\"key\": ...}} naming a key of a Kubernetes Secret in the job's namespace (use that for tokens and "
    "passwords: a plain value is stored with the operation and shown in the job). A missing Secret keeps the "
    "pods from starting (CreateContainerConfigError)."
)


def spec_env(env: dict[str, EnvEntry]) -> dict[str, EnvValue]:
    """The env as the manifest builders take it."""
    return {
        name: value if isinstance(value, str) else SecretKeyRef(value.secret_key_ref.name, value.secret_key_ref.key)
        for name, value in env.items()
    }
