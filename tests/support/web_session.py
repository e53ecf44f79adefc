"""Browser sessions for web tests: sign in with a token, or a fresh tab signed in as a new user of some role."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from playwright.sync_api import expect

from tests.support.browser import Served


def sign_in(page: Any, url: str, token: str) -> None:
    """Sign in on the sign-in page with `token`; returns once the header names the user."""
    page.goto(url + "/")
    page.get_by_label("API token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#whoami")).not_to_be_empty()


@contextmanager
def signed_in_as(browser: Any, served: Served, name: str, role: str) -> Iterator[Any]:
    """A new user `name` with `role` (made by the admin) signed in with their own token, in a tab of its own."""
    with served.api() as admin:
        assert admin.post("/api/v1/users", json={"name": name, "role": role}).status_code == 200
        token = admin.post("/api/v1/tokens", json={"name": "browser", "user": name}).json()["token"]
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(20_000)
    try:
        page = context.new_page()
        sign_in(page, served.url, token)
        expect(page.locator("#whoami")).to_have_text(f"{name} ({role})")
        yield page
    finally:
        context.close()
