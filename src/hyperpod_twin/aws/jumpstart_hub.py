"""SageMaker DescribeHubContent on the JumpStart public hub (SageMakerPublicHub) for a few real model ids."""

from __future__ import annotations

import json
from dataclasses import dataclass

from .context import AwsContext
from .protocol import AwsError, AwsRequest, RawResponse, json_response

SM = "sagemaker"
PUBLIC_HUB = "SageMakerPublicHub"
CREATED = 1735689600.0  # the listed versions' content as of 2025-01-01 (fixed: the twin's hub does not change)


@dataclass(frozen=True)
class HubModel:
    """One public-hub model version: its supported and default inference instance types, gated or not."""

    model_id: str
    version: str
    display_name: str
    default_type: str
    supported_types: tuple[str, ...]
    gated: bool = False


# Real model ids, versions and inference instance types, as the JumpStart model specs list them (public copy:
# awslabs/generative-ai-cdk-constructs src/patterns/gen-ai/aws-model-deployment-sagemaker/jumpstart-models.json).
MODELS: tuple[HubModel, ...] = (
    HubModel("huggingface-llm-mistral-7b-instruct", "3.12.0", "Mistral 7B Instruct", "ml.g5.12xlarge",
             ("ml.g5.12xlarge", "ml.g5.24xlarge", "ml.g5.2xlarge", "ml.g5.48xlarge", "ml.g5.4xlarge",
              "ml.g5.8xlarge", "ml.g6.12xlarge", "ml.g6.2xlarge", "ml.p4d.24xlarge", "ml.p4de.24xlarge",
              "ml.p5.48xlarge")),
    HubModel("meta-textgeneration-llama-3-8b-instruct", "2.25.0", "Meta Llama 3 8B Instruct", "ml.g5.12xlarge",
             ("ml.g5.12xlarge", "ml.g5.24xlarge", "ml.g5.2xlarge", "ml.g5.48xlarge", "ml.g5.4xlarge",
              "ml.g5.8xlarge", "ml.p4d.24xlarge", "ml.g6.12xlarge", "ml.g6.2xlarge", "ml.p5.48xlarge"), gated=True),
    HubModel("deepseek-llm-r1-distill-qwen-1-5b", "1.1.1", "DeepSeek-R1-Distill-Qwen-1.5B", "ml.g6.2xlarge",
             ("ml.g5.2xlarge", "ml.g5.4xlarge", "ml.g5.8xlarge", "ml.g5.12xlarge", "ml.g5.16xlarge",
              "ml.g5.24xlarge", "ml.g5.48xlarge", "ml.g6.2xlarge", "ml.g6.4xlarge", "ml.g6.8xlarge",
              "ml.g6.12xlarge", "ml.g6.16xlarge", "ml.g6.24xlarge", "ml.g6.48xlarge")),
    HubModel("huggingface-llm-qwen2-5-7b-instruct", "1.27.2", "Qwen2.5 7B Instruct", "ml.g5.12xlarge",
             ("ml.g5.12xlarge", "ml.g5.24xlarge", "ml.g5.48xlarge", "ml.g6.12xlarge", "ml.g6.24xlarge",
              "ml.g6.48xlarge", "ml.p4d.24xlarge")),
)


def document(model: HubModel) -> str:
    """The HubContentDocument (a JSON string) with the fields clients read for inference placement."""
    doc: dict[str, object] = {
        "Url": f"https://huggingface.co/{model.model_id}",
        "DefaultInferenceInstanceType": model.default_type,
        "SupportedInferenceInstanceTypes": list(model.supported_types),
        "TrainingSupported": False,
    }
    if model.gated:
        doc["GatedBucket"] = True
    return json.dumps(doc)


def _find(region: str, name: str, version: str | None) -> HubModel:
    for model in MODELS:
        if model.model_id == name and version in (None, model.version):
            return model
    what = f"{name} version {version}" if version else name
    raise AwsError("ResourceNotFound", f"Hub content {what} of type Model not found in hub {PUBLIC_HUB} "
                   f"({region}).")


def register(ctx: AwsContext) -> None:
    """Answer DescribeHubContent for the public hub's models in MODELS (other hubs and content: ResourceNotFound)."""

    @ctx.route(SM, "DescribeHubContent")
    def describe(req: AwsRequest) -> RawResponse:
        # The front door (model_check) has already refused what breaks the botocore input shape.
        p = req.params
        hub, ctype, name = str(p.get("HubName") or ""), str(p.get("HubContentType") or ""), \
            str(p.get("HubContentName") or "")
        version = p.get("HubContentVersion")
        if hub.rsplit("/", 1)[-1] != PUBLIC_HUB:
            raise AwsError("ResourceNotFound", f"Hub {hub} not found.")
        if ctype != "Model":
            raise AwsError("ResourceNotFound", f"Hub content {name} of type {ctype} not found in hub {PUBLIC_HUB}.")
        model = _find(req.region, name, str(version) if version is not None else None)
        hub_arn = f"arn:aws:sagemaker:{req.region}:aws:hub/{PUBLIC_HUB}"
        return json_response(req, {
            "HubContentName": model.model_id,
            "HubContentArn": f"arn:aws:sagemaker:{req.region}:aws:hub-content/{PUBLIC_HUB}/Model/"
                             f"{model.model_id}/{model.version}",
            "HubContentVersion": model.version,
            "HubContentType": "Model",
            "DocumentSchemaVersion": "2.3.0",
            "HubName": PUBLIC_HUB,
            "HubArn": hub_arn,
            "HubContentDisplayName": model.display_name,
            "HubContentDocument": document(model),
            "HubContentSearchKeywords": ["@task:text-generation", "@model-type:open_weights"],
            "HubContentStatus": "Available",
            "CreationTime": CREATED,
        })
