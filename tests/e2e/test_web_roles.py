"""The web UI signed in with a user's own token: the header names the user and role, and what the role may not
call is not offered (the server refuses it FORBIDDEN all the same)."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from tests.support.browser import Served

pytestmark = pytest.mark.e2e


def test_a_viewer_sees_who_they_are_and_no_cluster_changes(browser: Any, served: Served) -> None:
    with served.api() as admin:
        assert admin.post("/api/v1/users", json={"name": "vera", "role": "viewer"}).status_code == 200
        token = admin.post("/api/v1/tokens", json={"name": "browser", "user": "vera"}).json()["token"]
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(20_000)
    page = context.new_page()
    try:
        page.goto(served.url + "/")
        page.get_by_label("API token").fill(token)
        page.get_by_role("button", name="Sign in").click()
        expect(page.locator("#whoami")).to_have_text("vera (viewer)")
        expect(page.locator("#clusters")).to_be_visible()  # reads are shown
        expect(page.locator("#create")).to_be_hidden()
        expect(page.locator("#import")).to_be_hidden()
        expect(page.locator("#active-cluster")).to_be_disabled()
        status = page.evaluate(
            """async () => (await fetch('/api/v1/clusters/import', {method: 'POST', headers: {'Content-Type':
            'application/json', 'X-InstantStart-CSRF': document.querySelector('meta[name=csrf-token]').content},
            body: JSON.stringify({eksClusterName: 'x'})})).status"""
        )
        assert status == 403
    finally:
        context.close()
    with served.api() as admin:
        trail = admin.get("/api/v1/audit", params={"user": "vera"}).json()["entries"]
    assert [(e["operation"], e["face"], e["outcome"], e["tokenName"]) for e in trail] == [
        ("cluster_import", "ui", "denied", "browser")
    ]
