"""Users & tokens and alert settings in a real browser against `instantstart serve --twin`: a user added (a bad
name refused beside its field, nothing typed lost), their role changed, a token made for them shown once and working,
then revoked; the audit trail filtered by user; an alert rule's threshold saved and read back; the notification
channels set; keyboard only; a viewer is offered only their own tokens; axe-core finds no WCAG 2 A/AA violation."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.support.browser import Served, audit, shot
from tests.support.keyboard import tab_reaches_every_operation
from tests.support.servers import SSL_CONTEXT
from tests.support.web_session import sign_in, signed_in_as

pytestmark = pytest.mark.e2e

def test_users_tokens_and_the_audit_trail(page: Any, served: Served) -> None:
    sign_in(page, served.url, served.token)
    page.get_by_role("link", name="Users & Tokens").click()
    expect(page.locator('#users [data-operation="user_list"]')).to_contain_text("admin")
    audit(page, "Users & tokens")

    # A bad name is refused beside its field; what was typed stays.
    form = page.locator("#add-user")
    form.get_by_label("Name").fill("Not Valid")
    form.get_by_label("Role").select_option("member")
    page.get_by_role("button", name="Add user").click()
    expect(page.locator('#add-user .field-error[data-for="name"]')).to_be_visible()
    expect(form.get_by_label("Name")).to_have_attribute("aria-invalid", "true")
    expect(form.get_by_label("Name")).to_have_value("Not Valid")
    expect(form.get_by_label("Role")).to_have_value("member")
    audit(page, "Users & tokens with a field error")
    form.get_by_label("Name").fill("ada")
    page.get_by_role("button", name="Add user").click()
    row = page.locator('#users tr[data-user="ada"]')
    expect(row.get_by_label("Role of ada", exact=True)).to_have_value("member")

    # Her role changes in the row.
    row.get_by_label("Role of ada", exact=True).select_option("operator")
    row.get_by_role("button", name="Save the role of ada").click()
    with served.api() as api:
        expect(row.get_by_label("Role of ada", exact=True)).to_have_value("operator")
        users = {u["name"]: u["role"] for u in api.get("/api/v1/users").json()["users"]}
    assert users["ada"] == "operator"

    # A token for her, keyboard only: the secret is shown once and works.
    page.get_by_label("Whose tokens").select_option("ada")
    page.get_by_label("Token name").focus()
    page.keyboard.type("laptop")
    page.keyboard.press("Enter")
    secret = page.locator("#token-secret")
    expect(secret).to_be_visible()
    token = secret.inner_text().strip()
    expect(page.locator('#tokens tr[data-token="laptop"]')).to_contain_text("active")
    shot(page, "50-admin-token-shown-once")
    audit(page, "Users & tokens with a new token shown")
    me = httpx.get(served.url + "/api/v1/me", headers={"Authorization": f"Bearer {token}"}, verify=SSL_CONTEXT)
    assert me.status_code == 200 and me.json()["user"] == "ada" and me.json()["role"] == "operator"
    users_call = httpx.get(served.url + "/api/v1/users", headers={"Authorization": f"Bearer {token}"},
                           verify=SSL_CONTEXT)
    assert users_call.status_code == 403  # admin-only: her refused call is in the audit trail (reads are not)
    page.reload()
    page.get_by_label("Whose tokens").select_option("ada")
    expect(page.locator('#tokens tr[data-token="laptop"]')).to_be_visible()
    expect(page.locator("#token-secret")).to_have_count(0)
    assert token not in page.content()

    # Revoked through the row: her token no longer works.
    page.locator('#tokens tr[data-token="laptop"]').get_by_role("button", name="Revoke laptop").click()
    page.get_by_role("dialog").get_by_role("button", name="Revoke token").click()
    expect(page.locator('#tokens tr[data-token="laptop"]')).to_contain_text("revoked")
    refused = httpx.get(served.url + "/api/v1/me", headers={"Authorization": f"Bearer {token}"}, verify=SSL_CONTEXT)
    assert refused.status_code == 401

    # The audit trail, filtered by user: ada's refused call through the API.
    page.locator("#audit-user").fill("ada")
    page.locator("#audit-filter").get_by_role("button", name="Filter").click()
    entries = page.locator("#audit-list tbody tr")
    expect(entries).to_have_count(1)
    expect(entries.first).to_have_attribute("data-audit-operation", "user_list")
    expect(entries.first).to_contain_text("denied")
    expect(entries.first).to_contain_text("laptop")
    page.locator("#audit-user").fill("Nobody!")
    page.locator("#audit-filter").get_by_role("button", name="Filter").click()
    expect(page.locator('#audit-filter .field-error[data-for="user"]')).to_be_visible()
    audit(page, "Users & tokens with the audit filtered")
    tab_reaches_every_operation(page)

    # Deleting her (confirmed) leaves the list.
    row.get_by_role("button", name="Delete ada").click()
    page.get_by_role("dialog").get_by_role("button", name="Delete user").click()
    expect(row).to_have_count(0)
    assert not page.page_errors, page.page_errors


def test_alert_rules_and_channels(page: Any, served: Served) -> None:
    import boto3

    from hyperpod_twin.twin import ACCESS_KEY_ID, SECRET_ACCESS_KEY

    page.goto(served.url + "/#/monitoring")
    page.locator("#alerts-bell").click()
    expect(page.get_by_role("link", name="Alert rules & channels")).to_be_visible()
    audit(page, "the bell's panel with its link to the alert settings")
    page.get_by_role("link", name="Alert rules & channels").click()
    expect(page.locator("#alerts-panel")).to_be_hidden()
    rule = page.locator('#alert-rules tr[data-rule="pod_crash_looping"]')
    minutes = rule.get_by_label("pod_crash_looping minutes")
    expect(minutes).to_be_visible()
    audit(page, "Alert settings")

    # A duration over the limit is refused beside its field; the value typed stays.
    minutes.fill("99999")
    page.get_by_role("button", name="Save rules").click()
    expect(page.locator('#rules-form .field-error[data-for="rules.pod_crash_looping.minutes"]')).to_be_visible()
    expect(minutes).to_have_value("99999")
    audit(page, "Alert settings with a field error")
    minutes.fill("45")
    page.get_by_role("button", name="Save rules").click()
    expect(page.locator("#rules-status")).to_have_text("Saved: pod_crash_looping.")
    expect(minutes).to_have_value("45")
    with served.api() as api:
        rules = {r["name"]: r for r in api.get("/api/v1/alerts/rules").json()["rules"]}
    assert rules["pod_crash_looping"]["minutes"] == 45

    # Channels: a webhook without its secret is refused; an SNS topic of the account is kept.
    page.get_by_label("Webhook URL").fill("https://hooks.example.com/instantstart")
    page.get_by_role("button", name="Save channels").click()
    expect(page.locator("#channels-form .form-error")).to_contain_text("webhookSecret")
    expect(page.get_by_label("Webhook URL")).to_have_value("https://hooks.example.com/instantstart")
    page.get_by_label("Webhook URL").fill("")
    sns = boto3.client("sns", endpoint_url=served.twin_url, region_name="us-west-2",
                       aws_access_key_id=ACCESS_KEY_ID, aws_secret_access_key=SECRET_ACCESS_KEY)
    topic = sns.create_topic(Name="ui-alerts")["TopicArn"]
    page.get_by_label("SNS topic ARN").fill(topic)
    page.get_by_role("button", name="Save channels").click()
    expect(page.locator("#channels-status")).to_have_text("Saved.")
    expect(page.locator("#channels-current")).to_contain_text(topic)
    with served.api() as api:
        assert api.get("/api/v1/alerts/rules").json()["channels"]["snsTopicArn"] == topic
    shot(page, "51-alert-settings")
    audit(page, "Alert settings saved")
    tab_reaches_every_operation(page)
    assert not page.page_errors, page.page_errors


def test_a_viewer_manages_only_their_own_tokens(browser: Any, served: Served) -> None:
    with signed_in_as(browser, served, "vic", "viewer") as page:
        page.get_by_role("link", name="Users & Tokens").click()
        expect(page.locator('#tokens tr[data-token="browser"]')).to_be_visible()
        expect(page.locator("#users")).to_be_hidden()
        expect(page.locator("#audit")).to_be_hidden()
        expect(page.get_by_label("Whose tokens")).to_be_hidden()
        page.get_by_label("Token name").fill("second")
        page.get_by_role("button", name="Create token").click()
        expect(page.locator("#token-secret")).to_be_visible()
        audit(page, "Users & tokens as a viewer")
        page.goto(served.url + "/#/alerts")
        expect(page.locator('#alert-rules tr[data-rule="pod_crash_looping"]')).to_be_visible()
        expect(page.get_by_role("button", name="Save rules")).to_be_hidden()
        expect(page.locator("#alert-channels")).to_be_hidden()
        audit(page, "Alert settings as a viewer")
    with served.api() as admin:
        names = [t["name"] for t in admin.get("/api/v1/tokens", params={"user": "vic"}).json()["tokens"]]
    assert sorted(names) == ["browser", "second"]
