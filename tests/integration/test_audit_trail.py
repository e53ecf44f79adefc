"""The audit trail as the `instantstart audit list` CLI shows it: a member's refused call and failed call with the
user, role, token name, face and source address, filtered by user; and no secret the calls carried (a webhook
secret, a model server's API key, a freshly made token) in the trail, the CLI's answer or the database's audit
table."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from instantstart.cli.main import build_app
from instantstart.services import load_all
from instantstart.settings import Settings
from tests.support.servers import Running

load_all()

WEBHOOK_SECRET = "whsec-audit-TOPSECRET-0001"
API_KEY = "sk-audit-ANOTHERSECRET-0002"


def post(running: Running, name: str, args: dict[str, Any], token: str | None = None) -> tuple[int, dict[str, Any]]:
    with dataclasses.replace(running, token=token or running.token).client() as client:
        response = client.post(f"/api/v1/tools/{name}", json=args)
    return response.status_code, response.json()


def test_instantstart_audit_lists_who_with_which_token_and_never_a_secret(server: Running) -> None:
    assert post(server, "user_create", {"name": "sam", "role": "member"})[0] == 200
    status, made = post(server, "token_create", {"name": "laptop", "user": "sam"})
    assert status == 200
    token = made["token"]
    # Refused (admin only), carrying a webhook secret; allowed to a member but failing (no cluster), with an API key.
    status, denied = post(server, "alert_channels_update",
                          {"webhookUrl": "https://hooks.example.com/x", "webhookSecret": WEBHOOK_SECRET}, token)
    assert status == 403 and denied["error"]["code"] == "FORBIDDEN"
    status, failed = post(server, "inference_deploy_container", {
        "deploymentCommand": "vllm serve Qwen/Qwen3-0.6B", "deploymentName": "audited", "apiKey": API_KEY,
        "serviceType": "LoadBalancer"}, token)
    assert status >= 400, failed

    result = CliRunner().invoke(build_app(Settings(data_dir=server.data_dir, server_url=server.url)),
                                ["audit", "list", "--user", "sam", "-o", "json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    entries = json.loads(result.output)["entries"]
    assert [(e["operation"], e["outcome"]) for e in entries] == [
        ("inference_deploy_container", "error"), ("alert_channels_update", "denied")]
    for e in entries:
        assert (e["user"], e["role"], e["tokenName"], e["face"], e["source"]) == (
            "sam", "member", "laptop", "rest", "127.0.0.1")
    assert entries[1]["errorCode"] == "FORBIDDEN" and entries[0]["errorCode"]
    # The admin's token_create for sam is the admin's entry, not sam's.
    _, trail = post(server, "audit_list", {"operation": "token_create"})
    assert {(e["user"], e["tokenName"]) for e in trail["entries"]} == {("admin", "bootstrap")}

    everything = json.dumps(post(server, "audit_list", {"limit": 1000})[1]) + result.output
    for secret in (WEBHOOK_SECRET, API_KEY, token):
        assert secret not in everything
    db_file = Path(server.database_url.removeprefix("sqlite:///"))
    with sqlite3.connect(db_file) as conn:
        rows = conn.execute("SELECT * FROM audit").fetchall()
    assert rows and not [r for r in rows for secret in (WEBHOOK_SECRET, API_KEY, token) if secret in repr(r)]
