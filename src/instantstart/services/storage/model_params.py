"""Typed params and wire models of the model download tools."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from instantstart.catalog.base import WireModel
from instantstart.catalog.secret import Secret
from instantstart.manifests import storage as storage_manifests
from instantstart.operations.params import ParamsModel
from instantstart.validation import KubeName

DEFAULT_HUB = "https://huggingface.co"
MODEL_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?$"
REVISION_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"


class ModelDownloadParams(ParamsModel):
    """Stored params of model_download: names only (never the token's value)."""

    cluster_tag: str
    region: str
    model_id: str
    revision: str
    claim: str
    namespace: str
    storage_type: Literal["s3", "fsx"] = "s3"  # fsx: the claim is an FSx for Lustre claim (no bucket behind it)
    bucket_name: str = ""
    bucket_region: str = ""
    prefix: str | None = None
    cpu: str
    memory: str
    job_name: str
    token_secret_name: str | None = None
    gpu_instance_types: list[str] = []
    hf_endpoint: str | None = None
    image: str = ""  # the download image (settings.model_download_image when submitted)


class ModelDownloadRequest(WireModel):
    """A Hugging Face model to copy into an S3 claim of the active cluster."""

    model_id: str = Field(pattern=MODEL_ID_PATTERN, description="Hugging Face repo id, e.g. Qwen/Qwen3-0.6B.")
    revision: str = Field(default="main", pattern=REVISION_PATTERN, description="Branch, tag or commit.")
    s3_storage: KubeName = Field(
        default=storage_manifests.DEFAULT_CLAIM, description="The S3 claim to copy into (s3_storage_create)."
    )
    fsx_storage: KubeName | None = Field(
        default=None, description="Copy into this FSx for Lustre claim of namespace default (fsx_storage_create) "
        "instead of the S3 claim: the model lands at /fsx/models/<modelId>/<revision> for jobs and model servers "
        "that mount it with fsxClaim. Claims InstantStart did not create are refused.")
    cpu: str = Field(default="4", pattern=r"^[0-9]+(\.[0-9]+)?$|^[0-9]+m$", description="CPU request, e.g. 4 or 500m.")
    memory: str = Field(default="16", pattern=r"^[0-9]{1,4}$", description="Memory request in GiB.")
    hf_token: Secret | None = Field(default=None, description="Hugging Face token for gated repos; never stored.")


class ModelStatusRequest(WireModel):
    """Which model download to report."""

    model_id: str = Field(pattern=MODEL_ID_PATTERN)
    revision: str = Field(default="main", pattern=REVISION_PATTERN)
    s3_storage: KubeName = Field(default=storage_manifests.DEFAULT_CLAIM)
    fsx_storage: KubeName | None = Field(default=None, description="Report the download into this FSx claim "
                                         "(model_download_enhanced fsxStorage) instead of the S3 claim.")


class ModelFile(WireModel):
    """One file of a downloaded model, from its manifest."""

    path: str
    size: int
    sha256: str


class ModelEntry(WireModel):
    """A complete model in a claim (a manifest exists)."""

    model_id: str
    revision: str
    path: str = Field(description="Where pods see it under the claim's mount: models/<modelId>/<revision>.")
    files: int
    total_bytes: int


class ModelListRequest(WireModel):
    """Which claim to read the models of."""

    s3_storage: KubeName = Field(default=storage_manifests.DEFAULT_CLAIM)


class ModelListResult(WireModel):
    """The complete models of a claim (partial copies have no manifest and are not listed)."""

    storage: str
    models: list[ModelEntry]
    count: int
    hub_endpoint: str = Field(description="Where downloads fetch from (INSTANTSTART_HF_ENDPOINT, else the hub).")


class ModelStatus(WireModel):
    """Where one model download stands."""

    model_id: str
    revision: str
    storage: str
    state: str = Field(description="COMPLETE (manifest present), RUNNING, FAILED, or ABSENT.")
    job_name: str
    files: list[ModelFile] = []
    total_bytes: int | None = None
    progress: dict[str, int] | None = Field(default=None, description="files, filesTotal, bytes, bytesTotal.")
    hub_endpoint: str = Field(description="Where downloads fetch from (INSTANTSTART_HF_ENDPOINT, else the hub).")
