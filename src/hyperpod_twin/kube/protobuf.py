"""Decode protobuf request bodies (`k8s\\x00` + runtime.Unknown) of the kinds clients send that way.

helm's storage driver writes its release Secrets with client-go's protobuf serializer and has no
JSON fallback, so the server must read them; kubectl's typed commands (`create namespace`,
`create configmap|secret|serviceaccount|service|deployment|job|cronjob`, `expose`, `delete`,
`auth whoami`) do the same. Other kinds, or fields beyond what those generators write, answer 415
(`kubectl apply` and `create -f` send JSON). This is a minimal wire-format reader with the field
numbers of k8s.io/api (core, apps, batch) and apimachinery meta/v1 generated.proto, for the few
messages needed.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

MAGIC = b"k8s\x00"
Obj = dict[str, Any]


class ProtobufError(ValueError):
    """The body is not a protobuf object this server can read."""


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ProtobufError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ProtobufError("varint too long")


def fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, value) pairs of one message: ints for varints/fixed, bytes for length-delimited."""
    out: list[tuple[int, int | bytes]] = []
    pos = 0
    while pos < len(data):
        tag, pos = _varint(data, pos)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            out.append((number, value))
        elif wire == 2:
            length, pos = _varint(data, pos)
            if pos + length > len(data):
                raise ProtobufError("truncated field")
            out.append((number, data[pos : pos + length]))
            pos += length
        elif wire == 1:
            out.append((number, int.from_bytes(data[pos : pos + 8], "little")))
            pos += 8
        elif wire == 5:
            out.append((number, int.from_bytes(data[pos : pos + 4], "little")))
            pos += 4
        else:
            raise ProtobufError(f"unsupported wire type {wire}")
    return out


def _bytes(value: int | bytes) -> bytes:
    if not isinstance(value, bytes):
        raise ProtobufError("expected a length-delimited field")
    return value


def _str(value: int | bytes) -> str:
    return _bytes(value).decode()


def _map_entry(value: int | bytes) -> tuple[str, bytes]:
    key, val = "", b""
    for number, item in fields(_bytes(value)):
        if number == 1:
            key = _str(item)
        elif number == 2:
            val = _bytes(item)
    return key, val


def _time(value: int | bytes) -> str:
    """meta/v1 Time as RFC 3339; "" for Go's zero time (encoded as a negative int64 of seconds)."""
    seconds = 0
    for number, item in fields(_bytes(value)):
        if number == 1 and isinstance(item, int):
            seconds = item - (1 << 64) if item >= 1 << 63 else item
    if seconds <= 0:
        return ""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _owner_reference(value: int | bytes) -> Obj:
    names = {1: "kind", 3: "name", 4: "uid", 5: "apiVersion"}
    ref: Obj = {}
    for number, item in fields(_bytes(value)):
        if number in names:
            ref[names[number]] = _str(item)
        elif number == 6:
            ref["controller"] = bool(item)
        elif number == 7:
            ref["blockOwnerDeletion"] = bool(item)
    return ref


def object_meta(data: bytes) -> Obj:
    """meta/v1 ObjectMeta."""
    strings = {1: "name", 2: "generateName", 3: "namespace", 5: "uid", 6: "resourceVersion"}
    meta: Obj = {}
    for number, item in fields(data):
        if number in strings:
            if _str(item):
                meta[strings[number]] = _str(item)
        elif number == 7 and isinstance(item, int) and item:
            meta["generation"] = item
        elif number in (8, 9) and _time(item):
            meta["creationTimestamp" if number == 8 else "deletionTimestamp"] = _time(item)
        elif number == 10 and isinstance(item, int):
            meta["deletionGracePeriodSeconds"] = item
        elif number in (11, 12):
            key, val = _map_entry(item)
            meta.setdefault("labels" if number == 11 else "annotations", {})[key] = val.decode()
        elif number == 13:
            meta.setdefault("ownerReferences", []).append(_owner_reference(item))
        elif number == 14:
            meta.setdefault("finalizers", []).append(_str(item))
    return meta


def _secret(data: bytes) -> Obj:
    obj: Obj = {"apiVersion": "v1", "kind": "Secret"}
    for number, item in fields(data):
        if number == 1:
            obj["metadata"] = object_meta(_bytes(item))
        elif number == 2:
            key, val = _map_entry(item)
            obj.setdefault("data", {})[key] = base64.b64encode(val).decode()
        elif number == 3:
            obj["type"] = _str(item)
        elif number == 4:
            key, val = _map_entry(item)
            obj.setdefault("stringData", {})[key] = val.decode()
        elif number == 5:
            obj["immutable"] = bool(item)
    return obj


def _config_map(data: bytes) -> Obj:
    obj: Obj = {"apiVersion": "v1", "kind": "ConfigMap"}
    for number, item in fields(data):
        if number == 1:
            obj["metadata"] = object_meta(_bytes(item))
        elif number == 2:
            key, val = _map_entry(item)
            obj.setdefault("data", {})[key] = val.decode()
        elif number == 3:
            key, val = _map_entry(item)
            obj.setdefault("binaryData", {})[key] = base64.b64encode(val).decode()
        elif number == 4:
            obj["immutable"] = bool(item)
    return obj


def _delete_options(data: bytes) -> Obj:
    obj: Obj = {"kind": "DeleteOptions", "apiVersion": "v1"}
    for number, item in fields(data):
        if number == 1 and isinstance(item, int):
            obj["gracePeriodSeconds"] = item
        elif number == 2:
            pre: Obj = {}
            for sub, val in fields(_bytes(item)):
                pre["uid" if sub == 1 else "resourceVersion"] = _str(val)
            obj["preconditions"] = pre
        elif number == 3:
            obj["orphanDependents"] = bool(item)
        elif number == 4:
            obj["propagationPolicy"] = _str(item)
        elif number == 5:
            obj.setdefault("dryRun", []).append(_str(item))
    return obj


def _namespace(data: bytes) -> Obj:
    obj: Obj = {"apiVersion": "v1", "kind": "Namespace"}
    for number, item in fields(data):
        if number == 1:
            obj["metadata"] = object_meta(_bytes(item))
        elif number == 2:
            finalizers = [_str(v) for sub, v in fields(_bytes(item)) if sub == 1]
            obj["spec"] = {"finalizers": finalizers} if finalizers else {}
    return obj


def _service_account(data: bytes) -> Obj:
    obj: Obj = {"apiVersion": "v1", "kind": "ServiceAccount"}
    for number, item in fields(data):
        if number == 1:
            obj["metadata"] = object_meta(_bytes(item))
        elif number == 3:
            names = [_str(v) for sub, v in fields(_bytes(item)) if sub == 1]
            obj.setdefault("imagePullSecrets", []).extend({"name": n} for n in names)
        elif number == 4:
            obj["automountServiceAccountToken"] = bool(item)
    return obj


# Table-driven messages: field number -> (JSON name, kind). Kinds: "str", "int", "bool", "strs"
# (repeated string), "map" (map<string,string>), "intstr" (IntOrString), "meta" (ObjectMeta),
# "quantities" (map<string,Quantity>), "int?"/"bool?" (pointer fields: a zero is kept), a nested
# schema dict (message), or a one-element list holding a schema (repeated message). Decoding is strict: a field
# the table does not know makes the body unreadable (415) rather than silently dropped.
Schema = dict[int, tuple[str, Any]]
SERVICE_PORT: Schema = {
    1: ("name", "str"), 2: ("protocol", "str"), 3: ("port", "int"), 4: ("targetPort", "intstr"),
    5: ("nodePort", "int"), 6: ("appProtocol", "str"),
}
SERVICE_SPEC: Schema = {
    1: ("ports", [SERVICE_PORT]), 2: ("selector", "map"), 3: ("clusterIP", "str"), 4: ("type", "str"),
    5: ("externalIPs", "strs"), 7: ("sessionAffinity", "str"), 8: ("loadBalancerIP", "str"),
    9: ("loadBalancerSourceRanges", "strs"), 10: ("externalName", "str"), 11: ("externalTrafficPolicy", "str"),
    12: ("healthCheckNodePort", "int"), 13: ("publishNotReadyAddresses", "bool"), 17: ("ipFamilyPolicy", "str"),
    18: ("clusterIPs", "strs"), 19: ("ipFamilies", "strs"), 20: ("allocateLoadBalancerNodePorts", "bool"),
    21: ("loadBalancerClass", "str"), 22: ("internalTrafficPolicy", "str"),
}


# The messages kubectl's typed generators (`create deployment|job|cronjob`) write.
LABEL_SELECTOR_REQUIREMENT: Schema = {1: ("key", "str"), 2: ("operator", "str"), 3: ("values", "strs")}
LABEL_SELECTOR: Schema = {1: ("matchLabels", "map"), 2: ("matchExpressions", [LABEL_SELECTOR_REQUIREMENT])}
CONTAINER_PORT: Schema = {
    1: ("name", "str"), 2: ("hostPort", "int"), 3: ("containerPort", "int"), 4: ("protocol", "str"),
    5: ("hostIP", "str"),
}
ENV_VAR: Schema = {1: ("name", "str"), 2: ("value", "str")}
RESOURCES: Schema = {1: ("limits", "quantities"), 2: ("requests", "quantities")}
CONTAINER: Schema = {
    1: ("name", "str"), 2: ("image", "str"), 3: ("command", "strs"), 4: ("args", "strs"),
    5: ("workingDir", "str"), 6: ("ports", [CONTAINER_PORT]), 7: ("env", [ENV_VAR]), 8: ("resources", RESOURCES),
    13: ("terminationMessagePath", "str"), 14: ("imagePullPolicy", "str"), 16: ("stdin", "bool"),
    17: ("stdinOnce", "bool"), 18: ("tty", "bool"), 20: ("terminationMessagePolicy", "str"),
}
POD_SPEC: Schema = {
    2: ("containers", [CONTAINER]), 3: ("restartPolicy", "str"), 4: ("terminationGracePeriodSeconds", "int?"),
    5: ("activeDeadlineSeconds", "int?"), 6: ("dnsPolicy", "str"), 7: ("nodeSelector", "map"),
    8: ("serviceAccountName", "str"), 9: ("serviceAccount", "str"), 10: ("nodeName", "str"),
    11: ("hostNetwork", "bool"), 12: ("hostPID", "bool"), 13: ("hostIPC", "bool"), 16: ("hostname", "str"),
    17: ("subdomain", "str"), 19: ("schedulerName", "str"), 20: ("initContainers", [CONTAINER]),
    24: ("priorityClassName", "str"),
}
POD_TEMPLATE: Schema = {1: ("metadata", "meta"), 2: ("spec", POD_SPEC)}
ROLLING_UPDATE: Schema = {1: ("maxUnavailable", "intstr"), 2: ("maxSurge", "intstr")}
DEPLOYMENT_SPEC: Schema = {
    1: ("replicas", "int?"), 2: ("selector", LABEL_SELECTOR), 3: ("template", POD_TEMPLATE),
    4: ("strategy", {1: ("type", "str"), 2: ("rollingUpdate", ROLLING_UPDATE)}), 5: ("minReadySeconds", "int"),
    6: ("revisionHistoryLimit", "int?"), 7: ("paused", "bool"), 9: ("progressDeadlineSeconds", "int?"),
}
JOB_SPEC: Schema = {
    1: ("parallelism", "int?"), 2: ("completions", "int?"), 3: ("activeDeadlineSeconds", "int?"),
    4: ("selector", LABEL_SELECTOR), 5: ("manualSelector", "bool?"), 6: ("template", POD_TEMPLATE),
    7: ("backoffLimit", "int?"), 8: ("ttlSecondsAfterFinished", "int?"), 9: ("completionMode", "str"),
    10: ("suspend", "bool?"),
}
CRON_JOB_SPEC: Schema = {
    1: ("schedule", "str"), 2: ("startingDeadlineSeconds", "int?"), 3: ("concurrencyPolicy", "str"),
    4: ("suspend", "bool?"), 5: ("jobTemplate", {1: ("metadata", "meta"), 2: ("spec", JOB_SPEC)}),
    6: ("successfulJobsHistoryLimit", "int?"), 7: ("failedJobsHistoryLimit", "int?"), 8: ("timeZone", "str"),
}


def _int_or_string(data: bytes) -> int | str:
    kind, int_val, str_val = 0, 0, ""
    for number, item in fields(data):
        if number == 1 and isinstance(item, int):
            kind = item
        elif number == 2 and isinstance(item, int):
            int_val = item
        elif number == 3:
            str_val = _str(item)
    return str_val if kind == 1 else int_val


def decode_message(data: bytes, schema: Schema) -> Obj:
    """A message by its schema table; ProtobufError on a field the table does not know."""
    out: Obj = {}
    for number, item in fields(data):
        if number not in schema:
            raise ProtobufError(f"field {number} is not understood; send JSON")
        name, kind = schema[number]
        if kind == "str":
            out[name] = _str(item)
        elif kind in ("int", "int?") and isinstance(item, int):
            out[name] = item - (1 << 64) if item >= 1 << 63 else item
        elif kind in ("bool", "bool?"):
            out[name] = bool(item)
        elif kind == "meta":
            out[name] = object_meta(_bytes(item))
        elif kind == "quantities":
            key, val = _map_entry(item)
            quantity = next((_str(v) for n, v in fields(val) if n == 1), "")
            out.setdefault(name, {})[key] = quantity
        elif kind == "strs":
            out.setdefault(name, []).append(_str(item))
        elif kind == "map":
            key, val = _map_entry(item)
            out.setdefault(name, {})[key] = val.decode()
        elif kind == "intstr":
            out[name] = _int_or_string(_bytes(item))
        elif isinstance(kind, list):
            out.setdefault(name, []).append(decode_message(_bytes(item), kind[0]))
        elif isinstance(kind, dict):
            out[name] = decode_message(_bytes(item), kind)
        else:
            raise ProtobufError(f"field {number} has an unexpected wire type")
    # Go's generated code writes zero values of non-pointer fields; JSON omits them (omitempty).
    # Pointer fields ("int?", "bool?") are written only when set, so their zero is a real value.
    pointers = {schema[n][0] for n in schema if schema[n][1] in ("int?", "bool?")}
    return {k: v for k, v in out.items() if k in pointers or v not in ("", 0, False)}


def _with_spec(api_version: str, kind: str, spec: Schema) -> Callable[[bytes], Obj]:
    """A decoder of an object made of metadata (1), spec (2) and a status (3) that create ignores."""

    def decode_object(data: bytes) -> Obj:
        obj: Obj = {"apiVersion": api_version, "kind": kind}
        for number, item in fields(data):
            if number == 1:
                obj["metadata"] = object_meta(_bytes(item))
            elif number == 2:
                obj["spec"] = decode_message(_bytes(item), spec)
            elif number != 3:
                raise ProtobufError(f"field {number} of {kind} is not understood; send JSON")
        return obj

    return decode_object


DECODERS = {
    ("v1", "Service"): _with_spec("v1", "Service", SERVICE_SPEC),
    ("apps/v1", "Deployment"): _with_spec("apps/v1", "Deployment", DEPLOYMENT_SPEC),
    ("batch/v1", "Job"): _with_spec("batch/v1", "Job", JOB_SPEC),
    ("batch/v1", "CronJob"): _with_spec("batch/v1", "CronJob", CRON_JOB_SPEC),
    ("v1", "Namespace"): _namespace,
    ("v1", "ServiceAccount"): _service_account,
    ("v1", "Secret"): _secret,
    ("v1", "ConfigMap"): _config_map,
    ("v1", "DeleteOptions"): _delete_options,
    ("meta.k8s.io/v1", "DeleteOptions"): _delete_options,
}


def decode(body: bytes) -> Obj:
    """The JSON-shaped object of a protobuf-encoded request body; ProtobufError for anything else."""
    if not body.startswith(MAGIC):
        raise ProtobufError("missing the k8s protobuf magic prefix")
    api_version = kind = ""
    raw = b""
    for number, item in fields(body[len(MAGIC) :]):
        if number == 1:
            for sub, val in fields(_bytes(item)):
                if sub == 1:
                    api_version = _str(val)
                elif sub == 2:
                    kind = _str(val)
        elif number == 2:
            raw = _bytes(item)
        elif number == 3 and _str(item):
            raise ProtobufError(f"content encoding {_str(item)!r} not supported")
    decoder = DECODERS.get((api_version, kind))
    if decoder is None:
        raise ProtobufError(f"protobuf bodies of {api_version}/{kind} are not supported; send JSON")
    return decoder(raw)
