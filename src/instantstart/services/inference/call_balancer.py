"""The load-balancer route of inference_call_model: a self-managed server's address, taken only from its own Service.

The address comes from `status.loadBalancer.ingress` of the Service InstantStart created for the deployment: the
Service's uid must be the one the deploy operation recorded when it applied it (a Service a tenant made, or made
again, under the same name is not followed), and the address must be an ELB DNS name or an IP that is not
link-local, multicast, unspecified or reserved (`kube/balancer.balancer_url`). The API key is read from the Secret
`<name>-api-key`, a name derived from the deployment's, never from an annotation."""

from __future__ import annotations

import base64
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from instantstart.context import AppContext
from instantstart.errors import NotFound, PreconditionFailed
from instantstart.kube import core_kinds, wire
from instantstart.kube.calls import kube_call
from instantstart.kube.gateway import Api
from instantstart.logs import register_secret
from instantstart.manifests import inference as inference_manifests
from instantstart.services.base.target import cluster_target
from instantstart.store.models import ClusterRow

if TYPE_CHECKING:
    from instantstart.services.inference.call import Target

DEPLOY_KIND = "inference_deploy"


def recorded_service_uid(app: AppContext, tag: str, namespace: str, name: str) -> str | None:
    """The uid of the Service the newest successful inference_deploy of `namespace/name` on the cluster applied."""
    views, _ = app.runner.store.list_operations(kind=DEPLOY_KIND, target=cluster_target(tag), status="SUCCEEDED",
                                                limit=500)
    for view in views:  # newest first: a redeploy after an undeploy made a new Service
        if view.params.get("name") == name and view.params.get("namespace") == namespace:
            uid = (view.result or {}).get("serviceUid")
            return str(uid) if uid else None
    return None


def api_key(api: Api, deployment: str, namespace: str) -> str | None:
    """The server's API key from `<deployment>-api-key` (None when the server has none); never logged."""
    try:
        secret = kube_call("read the API key Secret", core_kinds.read_secret, api,
                           inference_manifests.api_key_secret_name(deployment), namespace)
    except NotFound:
        return None
    encoded = (secret.get("data") or {}).get(inference_manifests.API_KEY_KEY)
    if not encoded:
        return None
    key = base64.b64decode(encoded).decode(errors="replace")
    register_secret(key)
    return key


def _refuse(message: str, hint: str, **details: Any) -> PreconditionFailed:
    return PreconditionFailed(message + " Nothing was sent.", hint=hint, details=details)


def through_balancer(app: AppContext, row: ClusterRow, api: Api, target: Target, *,
                     keyed: bool) -> Target:
    """`target` (a self-managed Service) routed to its load balancer address, with the API key when the server has
    one. Refused (PreconditionFailed, nothing sent): a Service that is not a LoadBalancer, not the one InstantStart
    created (uid), or without an address yet."""
    ns, service = target.namespace, str(target.service)
    deployment = service.removesuffix("-service")
    svc = kube_call("read the Service", core_kinds.read_service, api, service, ns)
    secret = inference_manifests.api_key_secret_name(deployment)
    if wire.service_type(svc) != "LoadBalancer":
        if keyed:
            raise _refuse(f"{ns}/{deployment} demands an API key (Secret {ns}/{secret}) but has no load balancer; "
                          "the Kubernetes API server's service proxy does not forward an Authorization header, so "
                          "inference_call_model cannot call it.",
                          "Redeploy it with serviceType external (sourceRanges including this control plane's "
                          "address) and apiKey.", apiKeySecret=f"{ns}/{secret}")
        raise _refuse(f"{ns}/{service} is a {wire.service_type(svc)} Service, not a load balancer.",
                      'Leave via out (the service proxy reaches it), or deploy with serviceType "external".')
    recorded = recorded_service_uid(app, row.tag, ns, deployment)
    if recorded is None or recorded != wire.uid(svc):
        raise _refuse(f"{ns}/{service} is not the Service InstantStart created for {ns}/{deployment} (uid "
                      f"{wire.uid(svc)} is not the one its deploy operation recorded), so its load balancer "
                      "address is not followed.",
                      "Redeploy it with inference_deploy_container (inference_undeploy first), or ask the "
                      "namespace's owner who replaced the Service.", service=f"{ns}/{service}")
    ingress = wire.ingress(svc)
    address = (ingress[0].get("hostname") or ingress[0].get("ip")) if ingress else None
    if not address:
        raise _refuse(f"{ns}/{service} has no load balancer address yet.",
                      "Wait until inference_list_public_services shows its URL (AWS takes a few minutes to "
                      "provision a load balancer), then call again.", service=f"{ns}/{service}")
    port = int(wire.ports(svc)[0]["port"])
    return replace(target, address=str(address), port=port, api_key=api_key(api, deployment, ns) if keyed else None,
                   label=f"the load balancer {address}:{port} of {ns}/{service}")
