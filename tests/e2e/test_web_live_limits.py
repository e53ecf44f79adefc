"""The live indicator in a real browser when the server bounds WebSockets: a tab over this browser's allowance is
told so (close 4429) instead of flapping between live and offline, and the first tab stays live."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.servers import Running, thread_server


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Running]:
    with thread_server(tmp_path / "data", f"sqlite:///{tmp_path / 'state.db'}", ws_sockets_per_client=1) as running:
        yield running


def test_a_tab_over_the_allowance_says_why_it_is_offline(browser: Any, server: Running) -> None:
    from playwright.sync_api import expect

    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(20_000)
    try:
        first = context.new_page()
        first.goto(server.url + "/")
        first.get_by_label("API token").fill(server.token)
        first.get_by_role("button", name="Sign in").click()
        expect(first.locator("#live")).to_have_text("live")
        second = context.new_page()  # the same browser session: the same client, over its one socket
        second.goto(server.url + "/")
        expect(second.locator("#live")).to_have_text("offline: too many live tabs")
        expect(first.locator("#live")).to_have_text("live")
        second.close()
    finally:
        context.close()
