"""`serve` starts holding no AWS client; its first authenticated caller starts building them in the background."""

from __future__ import annotations

from pathlib import Path

from starlette.testclient import TestClient

from instantstart.api.app import create_app
from instantstart.aws.clients import WARM_SERVICES
from instantstart.settings import Settings
from tests.unit.test_aws_warm_on_first_use import warm_thread


def test_the_first_authenticated_request_warms_the_aws_clients(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, aws_region="us-west-2", aws_endpoint_url="http://127.0.0.1:9")
    app = create_app(settings, warm_aws=True)
    aws = app.fastapi.state.context.aws  # type: ignore[attr-defined]
    with TestClient(app) as client:
        assert client.get("/healthz").status_code == 200
        assert client.get("/api/v1/me").status_code == 401  # no token: not a caller
        assert aws._clients == {} and warm_thread() is None
        token = (tmp_path / "api-token").read_text().strip()
        assert client.get("/api/v1/me", headers={"Authorization": f"Bearer {token}"}).status_code == 200
        thread = warm_thread()
        assert thread is not None
        thread.join(timeout=120)
    assert set(aws._clients) == {(service, "us-west-2") for service in WARM_SERVICES}
