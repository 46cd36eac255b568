"""A browser logs in to the Hub and reaches the elastic-gpu service through OAuth, as its
user (tests/hubkit.py starts the Hub)."""

from __future__ import annotations

import json
from urllib.parse import quote, urljoin

from hubkit import PASSWORD, SERVICE, SERVICE_API, synthetic


def log_in(page, hub, user: str, then: str = "") -> None:
    """Log ``user`` in on the Hub's login page (then to ``then``, a path, if given)."""
    page.goto(f"{hub.url}hub/login" + (f"?next={quote(then)}" if then else ""))
    fill_login(page, user)


def fill_login(page, user: str) -> None:
    """Log ``user`` in on the Hub's login page, where the page is."""
    page.fill("#username_input", user)
    page.fill("#password_input", PASSWORD)
    page.click("#login_submit")


def test_alice_reaches_the_service_through_the_hubs_oauth(browser, hub, page_errors):
    page_errors.allow_status(403, "alice is no admin: the admin page refuses her", "/admin")
    page_errors.allow_status(403, "the test's POST without an XSRF token is refused")
    context = browser.new_context()
    try:
        page = context.new_page()
        # Log in, then go to the service: the Hub's OAuth (no confirmation page: the sample's
        # oauth_no_confirm), its callback sets the service's cookie, the root leads on.
        log_in(page, hub, "alice", then="/" + SERVICE)
        page.wait_for_url(f"**/{SERVICE}elastic-gpu/admin*")
        # The service's cookie authenticates alice's calls from its pages; GETs need no XSRF
        # token, a POST without one is refused.
        api = f"{hub.url}{SERVICE_API}"
        who = page.evaluate("url => fetch(url).then(r => r.json())", api + "whoami")
        assert who == {"user": "alice", "admin": False, "mode": "hub"}
        status = page.evaluate(
            "url => fetch(url, {method: 'POST', body: '{}'}).then(r => r.status)", api + "jobs"
        )
        assert status == 403
        # With the XSRF token Jupyter expects (the `_xsrf` cookie in X-XSRFToken), it passes.
        xsrf = next(c["value"] for c in context.cookies() if c["name"] == "_xsrf")
        post = """([url, xsrf, body]) => fetch(url, {method: 'POST', body: JSON.stringify(body),
            headers: {'X-XSRFToken': xsrf}}).then(async r => [r.status, await r.json()])"""
        code, job = page.evaluate(post, [api + "jobs", xsrf, synthetic("from-the-browser", 10)])
        assert code == 201 and job["user"] == "alice", job
        code, job = page.evaluate(post, [f"{api}jobs/{job['id']}/cancel", xsrf, {}])
        assert code == 202, job
        page.goto(api + "whoami")
        assert json.loads(page.inner_text("body"))["user"] == "alice"
    finally:
        context.close()


def test_the_admin_reaches_the_admin_page_from_the_services_menu_and_acts(browser, hub):
    """The Hub's admin logs in, opens the service (its Services menu link), lands on the admin
    page, sees alice's job and cancels it there (cookie + XSRF through the page's script)."""
    from playwright.sync_api import expect
    from servers import call, get_json, wait_for

    alice = hub.token("alice")
    code, job = call("POST", hub.url + SERVICE_API + "jobs", alice, synthetic("alices", 1e9))
    assert code == 201, job
    context = browser.new_context()
    try:
        page = context.new_page()
        log_in(page, hub, "admin")
        page.wait_for_url("**/hub/**")
        services = page.locator(f'a[href$="/{SERVICE}"]')  # the Services menu's entry
        expect(services.first).to_be_attached()
        page.goto(urljoin(page.url, services.first.get_attribute("href")))
        page.wait_for_url(f"**/{SERVICE}elastic-gpu/admin*")
        expect(page.locator("#who")).to_contain_text("admin (admin")
        row = page.locator(f'#jobs tr[data-job-id="{job["id"]}"]')
        expect(row).to_contain_text("alice")
        expect(page.locator("#shares-note")).not_to_be_empty()
        page.once("dialog", lambda d: d.accept())
        row.locator('button[data-action="cancel"]').click()
        wait_for(
            lambda: (
                get_json(f"{hub.url}{SERVICE_API}jobs/{job['id']}", alice)["state"] == "cancelled"
            ),
            40,
            what="the cancel from the admin page",
        )
        expect(row).to_have_attribute("data-state", "cancelled")
    finally:
        context.close()


def test_the_admin_logs_in_from_the_admin_pages_address_and_no_token_shows(browser, hub):
    """The admin, not logged in, opens the admin page's address (also ``/services/elastic-gpu/
    admin``, and with a ``?token=``: a real token of theirs, which the service ignores in a
    page's address): the Hub's login, its OAuth, and the admin page. The token is in no
    Location header the browser got, and in neither the Hub's log nor the service's (one
    file: the Hub runs the service)."""
    from playwright.sync_api import expect

    token = hub.token("admin")
    page_url = f"{hub.url}{SERVICE}elastic-gpu/admin"
    starts = [page_url, f"{page_url}?token={token}", f"{hub.url}{SERVICE}admin?token={token}"]
    locations: list[str] = []
    for start in starts:
        context = browser.new_context()  # not logged in
        try:
            page = context.new_page()
            page.on("response", lambda r: locations.append(r.headers.get("location") or ""))
            page.goto(start)
            page.wait_for_url("**/hub/login**")
            fill_login(page, "admin")
            page.wait_for_url(page_url)
            expect(page.locator("#who")).to_contain_text("admin (admin")
            expect(page.locator("#gpus tr[data-gpu-id]")).to_have_count(4)
        finally:
            context.close()
    assert any("/hub/api/oauth2/authorize" in loc for loc in locations), locations
    leaks = [loc for loc in locations if token in loc]
    assert leaks == []
    log = hub.log_path.read_text()
    assert token not in log, [line for line in log.splitlines() if token in line]
