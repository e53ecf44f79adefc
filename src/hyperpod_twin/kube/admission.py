"""Validation of writes, after defaulting and before storage, as kube-apiserver's registry strategies do it.

Custom resources are checked against their CRD version's OpenAPI v3 schema (`kube/schema.py`).
Built-in kinds the control plane writes get the required-field, name and immutable-field checks of
their registry strategies (Deployment/ReplicaSet/DaemonSet/StatefulSet selectors, Job templates,
Service ports and clusterIP, PVC specs, Pod containers, immutable ConfigMaps and Secrets, names of
namespaces and services as DNS-1123 labels). A violation is a 422 `Invalid` Status whose `details`
carry one cause per field, worded as the apiserver words it.
"""

from __future__ import annotations

import re
from typing import Any

from hyperpod_twin.kube import cel_rules
from hyperpod_twin.kube import schema as crd_schema
from hyperpod_twin.kube.status import ApiError
from hyperpod_twin.kube.store import ResourceType

Obj = dict[str, Any]
Cause = crd_schema.Cause
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_NAMED = {("", "namespaces"), ("", "services")}
_SELECTOR_KINDS = {("apps", "deployments"), ("apps", "replicasets"), ("apps", "daemonsets"), ("apps", "statefulsets")}
# StatefulSet spec fields that may change (apps/v1 validation: "updates to statefulset spec for fields
# other than … are forbidden").
_STS_MUTABLE = {"replicas", "template", "updateStrategy", "persistentVolumeClaimRetentionPolicy", "minReadySeconds",
                "ordinals", "revisionHistoryLimit"}


def _invalid(path: str, value: Any, detail: str) -> Cause:
    return crd_schema._invalid(path, value, detail)


def _required(path: str) -> Cause:
    return {"reason": "FieldValueRequired", "message": "Required value", "field": path}


def check_custom(rtype: ResourceType, schema: Obj | None, new: Obj, current: Obj | None,
                 warnings: list[str] | None = None) -> None:
    """Default and validate a custom resource write against its CRD schema and CEL rules (422 on violations).

    Rules the twin cannot evaluate add to `warnings` (the response's Warning headers)."""
    if not schema:
        return
    body = {k: v for k, v in new.items() if k != "status"}
    crd_schema.apply_defaults(body, schema)
    for key, value in body.items():
        new[key] = value
    causes = crd_schema.validate(body, schema)
    if not any(c["reason"] == "FieldValueTypeInvalid" or "must be of type" in c["message"] for c in causes):
        # As the apiserver does, CEL rules are skipped while the object has type errors.
        causes += cel_rules.validate(body, schema, current, warnings if warnings is not None else [])
    if causes and current is not None:
        # Validation ratcheting (GA in 1.33, CEL rules included): what was already invalid in the stored
        # object does not block an update that leaves it so; transition rules are never ratcheted.
        before = {k: v for k, v in current.items() if k != "status"}
        known = {(c["field"], c["message"]) for c in crd_schema.validate(before, schema)}
        known |= {(c["field"], c["message"]) for c in cel_rules.validate(before, schema, None, [])}
        causes = [c for c in causes if (c["field"], c["message"]) not in known]
    if causes:
        raise _refusal(rtype, new, causes)


def check_builtin(rtype: ResourceType, new: Obj, current: Obj | None) -> None:
    """Required and immutable fields of the built-in kinds (422 on violations)."""
    causes: list[Cause] = []
    name = (new.get("metadata") or {}).get("name") or ""
    if rtype.key in _LABEL_NAMED and name and current is None and (len(name) > 63 or not _DNS_LABEL.match(name)):
        causes.append(_invalid("metadata.name", name, "a lowercase RFC 1123 label must consist of lower case "
                               "alphanumeric characters or '-', and must start and end with an alphanumeric "
                               "character (e.g. 'my-name',  or '123-abc', regex used for validation is "
                               "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"))
    raw_spec = new.get("spec")
    spec: Obj = raw_spec if isinstance(raw_spec, dict) else {}
    old_spec: Obj = (current or {}).get("spec") or {}
    if rtype.key in _SELECTOR_KINDS:
        causes += _selector_rules(spec, old_spec, current is not None)
        if rtype.key == ("apps", "statefulsets") and current is not None:
            changed = sorted(k for k in set(spec) | set(old_spec)
                             if k not in _STS_MUTABLE and spec.get(k) != old_spec.get(k))
            if changed:
                causes.append({"reason": "FieldValueForbidden", "field": "spec", "message":
                               "Forbidden: updates to statefulset spec for fields other than 'replicas', "
                               "'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' "
                               "and 'minReadySeconds' are forbidden"})
    elif rtype.key == ("batch", "jobs"):
        causes += _job_rules(spec, old_spec, current is not None)
    elif rtype.key == ("", "services"):
        causes += _service_rules(spec, old_spec, current is not None)
    elif rtype.key == ("", "persistentvolumeclaims") and current is not None:
        if _without(spec, "resources") != _without(old_spec, "resources") and old_spec:
            causes.append({"reason": "FieldValueForbidden", "field": "spec", "message":
                           "Forbidden: spec is immutable after creation except resources.requests and "
                           "volumeAttributesClassName for bound claims"})
    elif rtype.key == ("", "pods"):
        if not spec.get("containers"):
            causes.append(_required("spec.containers"))
    elif rtype.key == ("apiextensions.k8s.io", "customresourcedefinitions"):
        for i, version in enumerate(spec.get("versions") or []):
            schema = (version.get("schema") or {}).get("openAPIV3Schema") or {}
            causes += cel_rules.compile_causes(schema, f"spec.versions[{i}].schema.openAPIV3Schema")
    elif rtype.key in (("", "configmaps"), ("", "secrets")) and current is not None and current.get("immutable"):
        for field in ("data", "binaryData", "stringData"):
            if field in new and new.get(field) != current.get(field):
                causes.append({"reason": "FieldValueForbidden", "field": field,
                               "message": "Forbidden: field is immutable when `immutable` is set"})
    if causes:
        raise _refusal(rtype, new, causes)


def _without(spec: Obj, key: str) -> Obj:
    return {k: v for k, v in spec.items() if k != key}


def _selector_rules(spec: Obj, old_spec: Obj, updating: bool) -> list[Cause]:
    out: list[Cause] = []
    selector = spec.get("selector")
    if not selector:
        out.append(_required("spec.selector"))
    else:
        labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
        if not _matches(selector, labels):
            out.append(_invalid("spec.template.metadata.labels", labels,
                                "`selector` does not match template `labels`"))
        if not (selector.get("matchLabels") or selector.get("matchExpressions")):
            out.append(_invalid("spec.selector", selector, "empty selector is invalid for deployment"))
    if updating and old_spec.get("selector") and selector != old_spec.get("selector"):
        out.append(_invalid("spec.selector", selector, "field is immutable"))
    return out


def _matches(selector: Obj, labels: dict[str, str]) -> bool:
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        present = key in labels
        if (op == "In" and labels.get(key) not in values) or (op == "NotIn" and present and labels[key] in values):
            return False
        if (op == "Exists" and not present) or (op == "DoesNotExist" and present):
            return False
    return True


def _job_rules(spec: Obj, old_spec: Obj, updating: bool) -> list[Cause]:
    out: list[Cause] = []
    template = spec.get("template") or {}
    if not (template.get("spec") or {}).get("containers"):
        out.append(_required("spec.template.spec.containers"))
    policy = (template.get("spec") or {}).get("restartPolicy")
    if policy not in (None, "Never", "OnFailure"):
        out.append({"reason": "FieldValueNotSupported", "field": "spec.template.spec.restartPolicy",
                    "message": f'Unsupported value: "{policy}": supported values: "OnFailure", "Never"'})
    if updating:
        for field in ("selector", "completions", "completionMode", "podFailurePolicy"):
            if field in old_spec and spec.get(field) != old_spec.get(field):
                out.append(_invalid(f"spec.{field}", spec.get(field), "field is immutable"))
        old_tpl = old_spec.get("template") or {}
        if old_tpl and _without(template.get("spec") or {}, "schedulingGates") != _without(
            old_tpl.get("spec") or {}, "schedulingGates"
        ) and not old_spec.get("suspend"):
            out.append(_invalid("spec.template", template, "field is immutable"))
    return out


def _service_rules(spec: Obj, old_spec: Obj, updating: bool) -> list[Cause]:
    out: list[Cause] = []
    kind = spec.get("type") or "ClusterIP"
    if kind not in ("ClusterIP", "NodePort", "LoadBalancer", "ExternalName"):
        out.append({"reason": "FieldValueNotSupported", "field": "spec.type", "message":
                    f'Unsupported value: "{kind}": supported values: "ClusterIP", "ExternalName", '
                    '"LoadBalancer", "NodePort"'})
    headless = spec.get("clusterIP") == "None"
    if kind != "ExternalName" and not headless and not spec.get("ports"):
        out.append(_required("spec.ports"))
    for i, port in enumerate(spec.get("ports") or []):
        number = port.get("port")
        if not isinstance(number, int) or not 1 <= number <= 65535:
            out.append(_invalid(f"spec.ports[{i}].port", number, "must be between 1 and 65535, inclusive"))
        if len(spec.get("ports") or []) > 1 and not port.get("name"):
            out.append(_required(f"spec.ports[{i}].name"))
    old_ip = old_spec.get("clusterIP")
    if updating and old_ip and spec.get("clusterIP") not in (None, old_ip) and kind != "ExternalName":
        out.append(_invalid("spec.clusterIPs[0]", spec.get("clusterIP"), "field is immutable"))
    return out


def _refusal(rtype: ResourceType, obj: Obj, causes: list[Cause]) -> ApiError:
    name = (obj.get("metadata") or {}).get("name") or ""
    details: Obj = {"name": name, "kind": rtype.kind, "causes": causes}
    if rtype.group:
        details["group"] = rtype.group
    return ApiError(422, crd_schema.message(rtype.kind, rtype.group, name, causes), "Invalid", details)
