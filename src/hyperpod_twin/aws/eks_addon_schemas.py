"""Configuration schemas of add-ons whose configurationValues the twin checks, as DescribeAddonConfiguration
returns them; CreateAddon and UpdateAddon reject values that do not match (as EKS does)."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import yaml

from .eks_clusters import invalid_param

OPEN: dict[str, Any] = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
                        "additionalProperties": True}

_LEVELS = {"type": "string", "enum": ["DISABLED", "BASIC", "ADVANCED"]}
_METRICS = {"type": "object", "additionalProperties": False,
            "properties": {"level": _LEVELS, "scrapeInterval": {"type": "integer", "minimum": 1}}}
# The HyperPod observability add-on's keys as AWS's own samples pass them: the AMP workspace (ARN + endpoint),
# per-category metrics levels, an optional Amazon Managed Grafana workspace, CloudWatch logging.
OBSERVABILITY: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "ampWorkspace": {
            "type": "object", "additionalProperties": False, "required": ["arn", "prometheusEndpoint"],
            "properties": {"arn": {"type": "string", "pattern": "^arn:aws[a-z-]*:aps:[a-z0-9-]+:[0-9]{12}:workspace/"},
                           "prometheusEndpoint": {"type": "string", "pattern": "^https://"}},
        },
        "metricsProvider": {
            "type": "object", "additionalProperties": False,
            "properties": {name: _METRICS for name in (
                "trainingMetrics", "inferenceMetrics", "taskGovernanceMetrics", "scalingMetrics", "customMetrics",
                "nodeMetrics", "acceleratedComputeMetrics", "networkMetrics")},
        },
        "amgWorkspace": {"type": ["object", "null"], "additionalProperties": False,
                         "properties": {"workspaceName": {"type": "string"}, "arn": {"type": "string"}}},
        "logging": {"type": "object", "additionalProperties": False,
                    "properties": {"enabled": {"type": "boolean"}}},
    },
}
SCHEMAS: dict[str, dict[str, Any]] = {"amazon-sagemaker-hyperpod-observability": OBSERVABILITY}


def schema_of(name: str) -> dict[str, Any]:
    """The add-on's configuration schema (an open object for add-ons the twin does not model)."""
    return SCHEMAS.get(name, OPEN)


def check_config(name: str, value: Any) -> None:
    """InvalidParameterException unless `value` is empty or a JSON/YAML object valid against the schema."""
    if value in (None, ""):
        return
    try:
        parsed = json.loads(value)
    except (TypeError, ValueError):
        try:
            parsed = yaml.safe_load(value)
        except yaml.YAMLError as exc:
            raise invalid_param(f"configurationValues is not valid JSON or YAML: {exc}") from exc
    if not isinstance(parsed, dict):
        raise invalid_param("configurationValues must be a JSON or YAML object")
    error = jsonschema.exceptions.best_match(jsonschema.Draft7Validator(schema_of(name)).iter_errors(parsed))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(root)"
        raise invalid_param(f"ConfigurationValue provided in request is not supported: {where}: {error.message}")
