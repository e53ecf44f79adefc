"""SageMaker JumpStart public hub: a model's supported inference instance types (DescribeHubContent, blocking)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from instantstart.aws.clients import AwsClients
from instantstart.aws.errors import error_code, translate
from instantstart.errors import ProviderError

PUBLIC_HUB = "SageMakerPublicHub"


@dataclass(frozen=True)
class HubModel:
    """What the hub says about one JumpStart model version for serving it."""

    model_id: str
    version: str
    supported_types: tuple[str, ...]
    default_type: str | None


def describe_model(aws: AwsClients, region: str, model_id: str, version: str | None = None) -> HubModel | None:
    """The public hub's model `model_id` (its latest version unless `version`), None when the hub has no such model
    or version. The instance types come from its HubContentDocument (SupportedInferenceInstanceTypes,
    DefaultInferenceInstanceType), as the HyperPod CLI reads them before it creates a JumpStartModel."""
    sm = aws.sagemaker(region)
    try:
        if version:
            got = sm.describe_hub_content(HubName=PUBLIC_HUB, HubContentType="Model", HubContentName=model_id,
                                          HubContentVersion=version)
        else:
            got = sm.describe_hub_content(HubName=PUBLIC_HUB, HubContentType="Model", HubContentName=model_id)
    except Exception as exc:
        if error_code(exc) in ("ResourceNotFound", "ResourceNotFoundException"):
            return None
        raise translate(exc, f"describe JumpStart model {model_id} in {PUBLIC_HUB}") from exc
    try:
        doc = json.loads(str(got.get("HubContentDocument") or "{}"))
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        raise ProviderError(f"The {PUBLIC_HUB} document of {model_id} is not a JSON object.")
    supported = doc.get("SupportedInferenceInstanceTypes") or []
    default = doc.get("DefaultInferenceInstanceType")
    return HubModel(model_id=model_id, version=str(got.get("HubContentVersion") or version or ""),
                    supported_types=tuple(str(t) for t in supported if isinstance(t, str)),
                    default_type=str(default) if isinstance(default, str) else None)

