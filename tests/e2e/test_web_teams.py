"""The Teams page in a real browser against `instantstart serve --twin`: an operator's bad quota is refused beside
the field, a team is created with its quota and member, its Kueue queue shows (a member's job admitted, the GPUs it
holds), the team is changed and deleted; a member sees the teams but no create, change or delete; axe-core finds no
WCAG 2.0/2.1 A or AA violation."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from tests.support.browser import Served, audit, shot
from tests.support.flows import make_hyperpod
from tests.support.waits import wait_terminal

pytestmark = pytest.mark.e2e

TAG = "webteams"


def sign_in(page: Any, served: Served, token: str, who: str) -> None:
    page.goto(served.url + "/")
    page.get_by_label("API token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#whoami")).to_have_text(who)
    page.get_by_role("link", name="Teams").click()
    expect(page.locator("#teams-title")).to_have_text("Teams")


def test_teams_page_creates_changes_and_deletes_a_team(page: Any, browser: Any, served: Served) -> None:
    with served.api() as api:
        make_hyperpod(api, TAG, acceleratedInstanceType="ml.g5.12xlarge")  # one node, 4 GPUs
        ref = api.post("/api/v1/tools/hyperpod_update_advanced_features",
                       json={"trainingOperator": {"enabled": True}, "taskGovernance": {"enabled": True}})
        assert ref.status_code in (200, 202), ref.text
        assert wait_terminal(api, ref.json()["operationId"], timeout=120)["status"] == "SUCCEEDED"
        for name, role in (("opal", "operator"), ("mia", "member")):
            assert api.post("/api/v1/users", json={"name": name, "role": role}).status_code == 200
        opal = api.post("/api/v1/tokens", json={"name": "browser", "user": "opal"}).json()["token"]
        mia = api.post("/api/v1/tokens", json={"name": "browser", "user": "mia"}).json()["token"]

    sign_in(page, served, opal, "opal (operator)")
    expect(page.locator("#teams-list")).to_contain_text("No teams yet.")
    form = page.locator("#team-create")
    # A quota on an instance type name that is not one: refused beside its field.
    form.get_by_label("Name").fill("vision")
    form.get_by_label("Instance type").fill("g5.12xlarge")
    form.get_by_label("GPUs").fill("2")
    form.get_by_label("Members").fill("mia")
    page.get_by_role("button", name="Create team").click()
    expect(page.locator("#team-new-type")).to_have_attribute("aria-invalid", "true")
    expect(form.locator(".field-error[data-for='quota.instanceType']")).to_contain_text("pattern")
    audit(page, "teams-refused")
    # A member who does not exist: refused naming the field (the operation is never submitted).
    form.get_by_label("Instance type").fill("ml.g5.12xlarge")
    form.get_by_label("Members").fill("mia, nobody")
    page.get_by_role("button", name="Create team").click()
    expect(form.locator(".form-error")).to_contain_text("no user named nobody")
    form.get_by_label("Members").fill("mia")
    page.get_by_role("button", name="Create team").click()
    row = page.locator("#teams tr[data-team=vision]")
    expect(row).to_contain_text("2 GPUs of ml.g5.12xlarge", timeout=60_000)
    expect(row).to_contain_text("mia")
    expect(row).to_contain_text("hyperpod-ns-vision · hyperpod-ns-vision-localqueue")
    expect(row).to_contain_text("Created")

    # mia's job lands in the team's queue; the page shows it admitted and the GPUs it holds.
    with served.api() as api:
        api.headers["Authorization"] = f"Bearer {mia}"
        ref = api.post("/api/v1/tools/training_job_submit", json={
            "jobName": "vis1", "image": "example/train:1", "command": "train.py", "instanceType": "ml.g5.12xlarge",
            "gpusPerNode": 2, "vcpu": 8, "memoryGiB": 32,
            "podAnnotations": {"twin.instantstart.io/run-seconds": "1000000"}})
        assert ref.status_code in (200, 202), ref.text
        assert wait_terminal(api, ref.json()["operationId"], timeout=120)["status"] == "SUCCEEDED"

    def queue_shows(text: str) -> None:
        for _ in range(60):
            page.get_by_role("button", name="↻ Refresh").click()
            try:
                expect(row).to_contain_text(text, timeout=2_000)
                return
            except AssertionError:
                continue
        expect(row).to_contain_text(text)

    queue_shows("1 admitted, 0 pending; in use 2 nvidia.com/gpu")
    audit(page, "teams")
    shot(page, "teams")

    # Change the quota to 3 GPUs.
    row.get_by_text("Change vision").click()
    change = page.locator("#team-vision-change")
    change.get_by_label("GPUs").fill("3")
    change.get_by_role("button", name="Save vision").click()
    expect(row).to_contain_text("3 GPUs of ml.g5.12xlarge", timeout=60_000)

    # A member sees the teams, not what only operators may do.
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(20_000)
    member = context.new_page()
    try:
        sign_in(member, served, mia, "mia (member)")
        member_row = member.locator("#teams tr[data-team=vision]")
        expect(member_row).to_contain_text("3 GPUs of ml.g5.12xlarge")
        expect(member.locator("#team-create-card")).to_be_hidden()
        expect(member_row.get_by_role("button", name="Delete team vision")).to_be_hidden()
        expect(member_row.get_by_text("Change vision")).to_be_hidden()
        audit(member, "teams-member")
    finally:
        context.close()

    # Delete it (confirmed): the list is empty again.
    row.get_by_role("button", name="Delete team vision").click()
    page.get_by_role("button", name="Delete team", exact=True).click()
    expect(page.locator("#teams-list")).to_contain_text("No teams yet.", timeout=60_000)
    assert not page.page_errors
