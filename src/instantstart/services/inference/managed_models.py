"""The parts of a managed endpoint request: where the weights come from, and KV cache offload."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from instantstart.catalog.base import WireModel


class ModelSource(WireModel):
    """Where the weights come from (FACTS §6.2 modelSourceConfig)."""

    type: Literal["s3", "fsx", "huggingface"]
    s3_bucket: str | None = Field(default=None, max_length=63)
    s3_region: str | None = Field(default=None, max_length=32)
    fsx_file_system_id: str | None = Field(default=None, max_length=64)
    fsx_dns_name: str | None = Field(default=None, max_length=253)
    fsx_mount_name: str | None = Field(default=None, max_length=64)
    hugging_face_model_id: str | None = Field(default=None, max_length=200)
    model_location: str | None = Field(default=None, max_length=1024, description="Prefix or path of the model.")


class KvCache(WireModel):
    """KV cache offload: L1 in CPU memory, L2 in the cluster's tiered storage or a Redis."""

    enable_l1: bool = True
    enable_l2: bool = False
    l2_backend: Literal["tieredstorage", "redis"] | None = None
    l2_url: str | None = Field(default=None, max_length=512, description="redis://<host>:<port> (redis only).")
