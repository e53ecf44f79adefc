"""One boto3 session and cached clients per Region, with adaptive retries and an overridable endpoint."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, cast

import boto3
from botocore.config import Config

from instantstart import __version__
from instantstart.settings import Settings

if TYPE_CHECKING:
    from mypy_boto3_amp import PrometheusServiceClient
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_eks import EKSClient
    from mypy_boto3_elbv2 import ElasticLoadBalancingv2Client
    from mypy_boto3_fsx import FSxClient
    from mypy_boto3_grafana import ManagedGrafanaClient
    from mypy_boto3_iam import IAMClient
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sagemaker import SageMakerClient
    from mypy_boto3_service_quotas import ServiceQuotasClient
    from mypy_boto3_sts import STSClient

# The clients a cluster's creation and status reads use, in the order a first cluster_create needs them.
WARM_SERVICES = ("ec2", "service-quotas", "sagemaker", "sts", "iam", "eks", "s3")


class AwsClients:
    """boto3 clients for the control plane's account.

    Credentials come from the default chain (environment, profile, instance role). `aws_endpoint_url`
    (INSTANTSTART_AWS_ENDPOINT_URL, or boto3's own AWS_ENDPOINT_URL) points every service at one
    endpoint, which is how the digital twin is reached.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.default_region = settings.aws_region
        self._session = boto3.session.Session()
        self._clients: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()
        self._warm = "off"  # "armed": the first client asked for starts the warm-up; "started": it ran or runs
        # Its own lock: starting the warm-up (on the event loop, at the first caller) never waits for a client
        # being built under `_lock`.
        self._warm_lock = threading.Lock()
        self._config = Config(
            retries={"mode": "adaptive", "max_attempts": 8},
            connect_timeout=5,
            read_timeout=60,
            user_agent_extra=f"instantstart/{__version__}",
        )

    @property
    def session(self) -> boto3.session.Session:
        """The underlying boto3 session (for presigning)."""
        return self._session

    def client(self, service: str, region: str | None = None) -> Any:
        """A cached, thread-safe boto3 client for `service` in `region`."""
        key = (service, region or self.default_region)
        with self._lock:
            client = self._clients.get(key)
            if client is None:
                self._start_warming(only_if_armed=True)
                # The service name is dynamic, so the typed overloads of boto3-stubs cannot apply.
                factory: Any = self._session.client
                client = factory(
                    service, region_name=key[1], config=self._config, endpoint_url=self.settings.aws_endpoint_url
                )
                self._clients[key] = client
            return client

    def warm(self, services: tuple[str, ...] = WARM_SERVICES) -> None:
        """Build the default Region's clients of `services` now (blocking): each costs 0.05-0.3 s of model
        loading and 53 MB in all."""
        for service in services:
            self.client(service)

    def warm_on_first_use(self) -> None:
        """When a first client is asked for, build the others of WARM_SERVICES in a background thread: an idle
        control plane holds none (53 MB); `warm_in_background` starts it earlier (at the first caller)."""
        with self._warm_lock:
            if self._warm == "off" and not self._clients:
                self._warm = "armed"

    def warm_in_background(self) -> None:
        """Build WARM_SERVICES' clients in a background thread now, unless that started already."""
        self._start_warming(only_if_armed=False)

    def _start_warming(self, *, only_if_armed: bool) -> None:
        with self._warm_lock:
            if self._warm == "started" or (only_if_armed and self._warm != "armed"):
                return
            self._warm = "started"
        threading.Thread(target=self.warm, name="aws-warm", daemon=True).start()

    def sagemaker(self, region: str | None = None) -> SageMakerClient:
        """The SageMaker client (HyperPod clusters, nodes, training plans)."""
        return cast("SageMakerClient", self.client("sagemaker", region))

    def eks(self, region: str | None = None) -> EKSClient:
        """The EKS client."""
        return cast("EKSClient", self.client("eks", region))

    def ec2(self, region: str | None = None) -> EC2Client:
        """The EC2 client (network, offerings, zones)."""
        return cast("EC2Client", self.client("ec2", region))

    def iam(self, region: str | None = None) -> IAMClient:
        """The IAM client."""
        return cast("IAMClient", self.client("iam", region))

    def s3(self, region: str | None = None) -> S3Client:
        """The S3 client."""
        return cast("S3Client", self.client("s3", region))

    def sts(self, region: str | None = None) -> STSClient:
        """The STS client (caller identity)."""
        return cast("STSClient", self.client("sts", region))

    def quotas(self, region: str | None = None) -> ServiceQuotasClient:
        """The Service Quotas client."""
        return cast("ServiceQuotasClient", self.client("service-quotas", region))

    def elbv2(self, region: str | None = None) -> ElasticLoadBalancingv2Client:
        """The Elastic Load Balancing v2 client."""
        return cast("ElasticLoadBalancingv2Client", self.client("elbv2", region))

    def amp(self, region: str | None = None) -> PrometheusServiceClient:
        """The Amazon Managed Service for Prometheus client (observability workspaces)."""
        return cast("PrometheusServiceClient", self.client("amp", region))

    def fsx(self, region: str | None = None) -> FSxClient:
        """The Amazon FSx client (Lustre file systems)."""
        return cast("FSxClient", self.client("fsx", region))

    def grafana(self, region: str | None = None) -> ManagedGrafanaClient:
        """The Amazon Managed Grafana client (the observability feature's optional Grafana workspace)."""
        return cast("ManagedGrafanaClient", self.client("grafana", region))
