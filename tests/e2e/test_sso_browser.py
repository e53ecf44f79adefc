"""SSO in a browser: the sign-in page offers "Sign in with SSO" (axe: no violations), the provider (npm
oidc-provider) signs the user in, and the UI comes back signed in with the role their groups map to."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.support.browser import audit, shot
from tests.support.oidc_idp import sso_server

pytestmark = pytest.mark.e2e


def test_sign_in_with_sso_lands_signed_in_with_the_mapped_role(browser: Any, tmp_path: Path) -> None:
    with sso_server(tmp_path) as (idp, server):
        idp.set_users({"olga": {"email": "olga@example.com", "groups": ["operators", "ml"]}})
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        context.set_default_timeout(20_000)
        page = context.new_page()
        try:
            page.goto(server.url + "/")
            sso = page.get_by_role("link", name="Sign in with SSO")
            expect(sso).to_be_visible()
            audit(page, "sign-in page with SSO")
            sso.click()
            page.wait_for_url(idp.issuer + "/**")  # the provider's own login form
            page.locator("input[name=login]").fill("olga")
            page.locator("input[name=password]").fill("any")
            page.locator("button[type=submit]").click()
            expect(page.locator("#whoami")).to_have_text("olga (operator)")
            assert page.url.rstrip("/") == server.url
            shot(page, "sso-signed-in")
        finally:
            context.close()
