"""cert-manager: Issuers become Ready; Certificates get a real self-signed TLS Secret."""

from __future__ import annotations

import base64
import copy
import datetime as dt
import re
from collections.abc import Hashable, Iterable

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from hyperpod_twin.kube.store import WatchEvent
from hyperpod_twin.sim import kobj
from hyperpod_twin.sim.controller_base import Controller
from hyperpod_twin.sim.kinds import SECRETS, TypeKey
from hyperpod_twin.sim.kobj import Obj

CERTIFICATES: TypeKey = ("cert-manager.io", "certificates")
ISSUERS: TypeKey = ("cert-manager.io", "issuers")
CLUSTER_ISSUERS: TypeKey = ("cert-manager.io", "clusterissuers")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|m|s)")


def parse_duration(text: str | None, default: float) -> float:
    """A Go duration like "2160h" or "1h30m" in seconds."""
    if not text:
        return default
    parts = _DURATION.findall(str(text))
    if not parts:
        return default
    return sum(float(n) * {"h": 3600, "m": 60, "s": 1}[u] for n, u in parts)


def make_certificate(common_name: str, dns_names: list[str], not_before: float, lifetime: float) -> tuple[bytes, bytes]:
    """A self-signed ECDSA P-256 certificate and key, PEM encoded."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name[:64] or "twin")])
    start = dt.datetime.fromtimestamp(not_before, dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + dt.timedelta(seconds=lifetime))
    )
    if dns_names:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName(n) for n in dns_names]), critical=False
        )
    cert = builder.sign(key, hashes.SHA256())
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


class CertManager(Controller):
    """Issuers/ClusterIssuers (selfSigned, ca) report Ready; each Certificate whose issuer exists
    gets `spec.secretName` as a kubernetes.io/tls Secret (recreated if deleted) and Ready status."""

    watches = (CERTIFICATES, ISSUERS, CLUSTER_ISSUERS, SECRETS)

    def keys_for(self, event: WatchEvent) -> Iterable[Hashable]:
        md = event.object["metadata"]
        if event.rtype.key == CERTIFICATES:
            return [("cert", md.get("namespace", ""), md["name"])] if event.type != "DELETED" else []
        if event.rtype.key == SECRETS:
            if event.type != "DELETED":
                return []
            owner = (md.get("annotations") or {}).get("cert-manager.io/certificate-name")
            return [("cert", md.get("namespace", ""), owner)] if owner else []
        keys: list[Hashable] = [("issuer", event.rtype.key[1], md.get("namespace", ""), md["name"])]
        keys += [("cert", c["metadata"]["namespace"], c["metadata"]["name"]) for c in self.sim.list(CERTIFICATES)]
        return keys if event.type != "DELETED" else keys[1:]

    def resync_keys(self) -> Iterable[Hashable]:
        return [("cert", c["metadata"]["namespace"], c["metadata"]["name"]) for c in self.sim.list(CERTIFICATES)]

    def reconcile(self, key: Hashable) -> None:
        assert isinstance(key, tuple)
        if key[0] == "issuer":
            self._issuer(str(key[1]), str(key[2]), str(key[3]))
        else:
            self._certificate(str(key[1]), str(key[2]))

    def _issuer(self, plural: str, ns: str, name: str) -> None:
        tkey = ISSUERS if plural == "issuers" else CLUSTER_ISSUERS
        issuer = self.sim.get(tkey, ns, name)
        if issuer is None:
            return
        status = copy.deepcopy(issuer.get("status") or {})
        spec = issuer.get("spec") or {}
        now = self.sim.now()
        if "ca" in spec:
            secret_ns = ns or "cert-manager"
            ok = self.sim.get(SECRETS, secret_ns, (spec["ca"] or {}).get("secretName", "")) is not None
            kobj.set_condition(
                status,
                "Ready",
                "True" if ok else "False",
                now,
                "KeyPairVerified" if ok else "ErrGetKeyPair",
                "Signing CA verified" if ok else "Error getting keypair for CA issuer: secret not found",
            )
        else:
            kobj.set_condition(status, "Ready", "True", now, "IsReady", "")
        self.sim.patch_status(tkey, issuer, status)

    def _certificate(self, ns: str, name: str) -> None:
        cert = self.sim.get(CERTIFICATES, ns, name)
        if cert is None:
            return
        spec = cert.get("spec") or {}
        status = copy.deepcopy(cert.get("status") or {})
        now = self.sim.now()
        ref = spec.get("issuerRef") or {}
        kind = ref.get("kind", "Issuer")
        issuer = self.sim.get(
            CLUSTER_ISSUERS if kind == "ClusterIssuer" else ISSUERS,
            "" if kind == "ClusterIssuer" else ns,
            ref.get("name", ""),
        )
        if issuer is None:
            kobj.set_condition(
                status,
                "Ready",
                "False",
                now,
                "Pending",
                f'Issuing certificate as Secret does not exist; waiting for {kind} "{ref.get("name")}"',
            )
            self.sim.patch_status(CERTIFICATES, cert, status)
            return
        secret_name = spec.get("secretName", "")
        secret = self.sim.get(SECRETS, ns, secret_name)
        if secret is None or secret.get("type") != "kubernetes.io/tls" or not (secret.get("data") or {}).get("tls.crt"):
            lifetime = parse_duration(spec.get("duration"), 90 * 24 * 3600)
            dns = list(spec.get("dnsNames") or [])
            common = spec.get("commonName") or (dns[0] if dns else name)
            start = self.sim.clock.wall()
            cert_pem, key_pem = make_certificate(common, dns, start, lifetime)
            body: Obj = {
                "metadata": {
                    "name": secret_name,
                    "namespace": ns,
                    "annotations": {
                        "cert-manager.io/certificate-name": name,
                        "cert-manager.io/issuer-name": ref.get("name", ""),
                        "cert-manager.io/issuer-kind": kind,
                        "cert-manager.io/common-name": common,
                        "cert-manager.io/alt-names": ",".join(dns),
                    },
                    "labels": {"controller.cert-manager.io/fao": "true"},
                },
                "type": "kubernetes.io/tls",
                "data": {
                    "tls.crt": base64.b64encode(cert_pem).decode(),
                    "tls.key": base64.b64encode(key_pem).decode(),
                    "ca.crt": base64.b64encode(cert_pem).decode(),
                },
            }
            if secret is None:
                self.sim.create(SECRETS, body)
            else:
                secret.update({"type": body["type"], "data": body["data"]})
                secret["metadata"].setdefault("annotations", {}).update(body["metadata"]["annotations"])
                secret["metadata"].pop("resourceVersion", None)
                self.sim.update(SECRETS, secret)
            renew = parse_duration(spec.get("renewBefore"), lifetime / 3)
            status.update(
                {
                    "notBefore": kobj.rfc3339(start),
                    "notAfter": kobj.rfc3339(start + lifetime),
                    "renewalTime": kobj.rfc3339(start + lifetime - renew),
                    "revision": int(status.get("revision", 0)) + 1,
                }
            )
            self.sim.event(
                cert,
                "Issuing",
                "The certificate has been successfully issued",
                source="cert-manager-certificates-issuing",
            )
        kobj.set_condition(status, "Ready", "True", now, "Ready", "Certificate is up to date and has not expired")
        self.sim.patch_status(CERTIFICATES, cert, status)
