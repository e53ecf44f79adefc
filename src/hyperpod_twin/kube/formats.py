"""OpenAPI `format` checks as kube-apiserver applies them to custom resources (kube-openapi's strfmt).

Numbers: `int32`/`uint32`/`int64`/`uint64` integers must fit the type, `float`/`float32` numbers
must fit a float32 (kube-openapi's IsValueValidAgainstRange). Strings: the formats the apiextensions
registry validates (`date-time`, `date`, `duration`, `byte`, `uuid`/`uuid3`/`uuid4`/`uuid5`, `ipv4`,
`ipv6`, `cidr`, `mac`, `hostname`, `email`, `uri`, `bsonobjectid`); any other format is ignored,
as the apiserver ignores unknown formats.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
from collections.abc import Callable
from urllib.parse import urlparse

_INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "uint32": (0, 2**32 - 1), "int64": (-(2**63), 2**63 - 1),
               "uint64": (0, 2**64 - 1)}
_FLOAT32_MAX = 3.4028234663852886e38
# strfmt's RFC 3339 date-time: date, 'T' (or space), time with optional fraction, zone Z or ±hh:mm.
_DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([Zz]|[+-]\d{2}:?\d{2})?$")
_DATE = re.compile(r"^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])$")
_UUID = re.compile(r"^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$", re.IGNORECASE)
_UUID_V = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-([345])[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$", re.IGNORECASE)
_MAC = re.compile(r"^([0-9A-Fa-f]{2}[:-]){5}[0-9A-Fa-f]{2}$")
_LABEL = r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOSTNAME = re.compile(rf"^(?=.{{1,255}}$){_LABEL}(\.{_LABEL})*\.?$")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+$")
_UNITS = "ns|us|µs|ms|s|m|h|d|w|seconds?|minutes?|hours?|days?|weeks?"
_DURATION = re.compile(rf"^(\d+(\.\d+)?\s*({_UNITS})\s*)+$")
_BSON = re.compile(r"^[0-9a-f]{24}$", re.IGNORECASE)


def number_ok(kind: str, fmt: str, value: float) -> bool:
    """Whether a number fits its format's range (integers: exactly; float32: magnitude)."""
    if kind == "integer" and fmt in _INT_RANGES:
        low, high = _INT_RANGES[fmt]
        return float(value).is_integer() and low <= int(value) <= high
    if kind == "number" and fmt in ("float", "float32"):
        return abs(value) <= _FLOAT32_MAX
    return True


def _ip(version: int) -> Callable[[str], bool]:
    def check(value: str) -> bool:
        try:
            return ipaddress.ip_address(value).version == version
        except ValueError:
            return False
    return check


def _cidr(value: str) -> bool:
    try:
        ipaddress.ip_network(value, strict=False)
    except ValueError:
        return False
    return "/" in value


def _byte(value: str) -> bool:
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _uri(value: str) -> bool:
    parsed = urlparse(value)
    return bool(parsed.scheme) or value.startswith("/")


_STRING: dict[str, Callable[[str], bool]] = {
    "date-time": lambda v: bool(_DATE_TIME.match(v)), "datetime": lambda v: bool(_DATE_TIME.match(v)),
    "date": lambda v: bool(_DATE.match(v)), "duration": lambda v: bool(_DURATION.match(v)),
    "byte": _byte, "uuid": lambda v: bool(_UUID.match(v)),
    "uuid3": lambda v: bool((m := _UUID_V.match(v)) and m.group(1) == "3"),
    "uuid4": lambda v: bool((m := _UUID_V.match(v)) and m.group(1) == "4"),
    "uuid5": lambda v: bool((m := _UUID_V.match(v)) and m.group(1) == "5"),
    "ipv4": _ip(4), "ipv6": _ip(6), "cidr": _cidr, "mac": lambda v: bool(_MAC.match(v)),
    "hostname": lambda v: bool(_HOSTNAME.match(v)), "email": lambda v: bool(_EMAIL.match(v)),
    "uri": _uri, "bsonobjectid": lambda v: bool(_BSON.match(v)),
}


def string_ok(fmt: str, value: str) -> bool:
    """Whether a string satisfies a validated format (unknown formats always do)."""
    check = _STRING.get(fmt)
    return check is None or check(value)
