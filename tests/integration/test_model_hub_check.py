"""A model download asks the configured hub first (a real HTTP look-up, here of the twin's hub stand-in): an unknown
id, revision or token, or a gated model without a token, fails at once, naming what the hub has; no Job is made."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from hyperpod_twin.sim.hf_hub import GATED_TOKEN
from instantstart import hub
from instantstart.kube.log_tail import clip
from instantstart.twin_process import TwinProcess
from tests.support.twin import control_plane


def refused(client: httpx.Client, body: dict[str, str]) -> dict[str, object]:
    response = client.post("/api/v1/models/download", json=body)
    assert response.status_code == 422, response.text
    error: dict[str, object] = response.json()["error"]
    assert error["code"] == "INVALID_INPUT"
    return error


def test_the_hub_look_up_refuses_unknown_ids_revisions_and_tokens_before_any_job(
    twin: TwinProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub_url = str(twin.info["hub_url"])
    with control_plane(twin, tmp_path, monkeypatch, hf_endpoint=hub_url) as cp, cp.client() as client:
        typo = refused(client, {"modelId": "twin-org/tiny-lama"})
        assert typo["details"]["closest"][0] == "twin-org/tiny-llama", typo  # type: ignore[index]
        assert "twin-org/tiny-llama" in str(typo["message"]) and hub_url in str(typo["message"])
        stranger = refused(client, {"modelId": "nobody/nothing-like-it"})
        assert "twin-org/" in str(stranger["message"])  # the hub's ids, however far
        revision = refused(client, {"modelId": "twin-org/tiny-llama", "revision": "v9"})
        assert revision["details"]["fields"] == [{"field": "revision"}], revision  # type: ignore[index]
        gated = refused(client, {"modelId": "twin-org/gated-llama"})
        assert "gated" in str(gated["message"]) and gated["details"]["fields"] == [{"field": "hfToken"}]  # type: ignore[index]
        wrong = "hf_notAValidTokenAtAll000"
        bad_token = refused(client, {"modelId": "twin-org/gated-llama", "hfToken": wrong})
        assert "refused the token" in str(bad_token["message"]) and wrong not in str(bad_token)
        # What the hub accepts passes the look-up and reaches the next check (no cluster yet).
        for body in ({"modelId": "twin-org/tiny-llama", "revision": "v1"},
                     {"modelId": "twin-org/gated-llama", "hfToken": GATED_TOKEN}):
            passed = client.post("/api/v1/models/download", json=body).json()["error"]
            assert passed["code"] != "INVALID_INPUT" and "cluster" in passed["message"].lower(), passed
        assert client.get("/api/v1/operations").json()["operations"] == []


def test_an_unreachable_hub_is_left_to_the_job() -> None:
    assert hub.lookup_model("http://127.0.0.1:9", "twin-org/tiny-llama", "main", None).status == 0
    assert hub.model_ids("http://127.0.0.1:9", None, search="tiny") == []


def test_a_log_tail_is_clipped_and_redacted() -> None:
    text = "\n".join(f"line {i}" for i in range(50)) + "\nHF_TOKEN=hf_abcdefghijklmnop x\n" + "y" * 1000
    tail = clip(text)
    assert len(tail) == 20 and tail[0] == "line 32"
    assert "hf_abcdefghijklmnop" not in "".join(tail) and "[redacted]" in tail[-2]
    assert len(tail[-1]) == 301
