"""The admin page (``{base_url}elastic-gpu/admin``) in a real browser (Debian's Chromium via
Playwright), on a Jupyter server under a base URL, logged in by its cookie as a browser is:
every action goes through the page's own script, with Jupyter's XSRF header."""

from __future__ import annotations

import getpass

import pytest
from browserkit import expect
from servers import JupyterServerProcess, call, free_port, get_json, wait_for

pytestmark = pytest.mark.slow


#: A base URL as JupyterHub gives users' servers: the page must keep every URL under it.
BASE_URL = "/user/someone/"


class Server(JupyterServerProcess):
    """A Jupyter server with the extension under ``BASE_URL``."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{BASE_URL}"

    def submit(self, body: dict) -> dict:
        code, job = call("POST", self.api_url + "jobs", self.token, body)
        assert code == 201, job
        return job

    def job(self, job_id: str) -> dict:
        return get_json(f"{self.api_url}jobs/{job_id}", self.token)


def admin_server(root, name: str, admin: bool) -> Server:
    """Started; its user is an admin (``c.ElasticGPUApp.admin_users``) when ``admin``."""
    extra = [f"--ServerApp.base_url={BASE_URL}"]
    if admin:
        extra.append(f"--ElasticGPUApp.admin_users={getpass.getuser()}")
    server = Server(root=root, port=free_port(), name=name, extra_args=extra)
    server.start()
    return server


def synthetic(name: str) -> dict:
    return {
        "name": name,
        "kind": "synthetic",
        "min_gpus": 1,
        "max_gpus": 1,
        "synthetic": {"work": 1e8, "throughput": {"1": 100}, "batch": 10},
    }


def running(server, job_id: str) -> dict | None:
    job = server.job(job_id)
    return job if job["state"] == "running" else None


def test_the_admin_page_shows_everything_and_acts(browser, tmp_path):
    server = admin_server(tmp_path, "admin", admin=True)
    try:
        moved = server.submit(synthetic("moved"))
        doomed = server.submit(synthetic("doomed"))
        gpu = wait_for(lambda: running(server, moved["id"]), 40, what="a job to run")["gpus"][0]
        wait_for(lambda: running(server, doomed["id"]), 40, what="the other job to run")

        context = browser.new_context()
        page = context.new_page()
        requests: list[str] = []
        page.on("request", lambda r: requests.append(r.url))
        page.goto(f"{server.url}elastic-gpu/admin?token={server.token}")  # logs in (cookie)
        response = page.goto(f"{server.url}elastic-gpu/admin")  # the cookie alone from here
        assert response.status == 200
        expect(page.locator("#who")).to_contain_text(f"{getpass.getuser()} (admin")
        expect(page.locator("#gpus tr[data-gpu-id]")).to_have_count(4)
        for job in (moved, doomed):
            row = page.locator(f'#jobs tr[data-job-id="{job["id"]}"]')
            expect(row).to_have_attribute("data-state", "running")
            expect(row).to_contain_text(job["name"])
        expect(page.locator("#shares-note")).not_to_be_empty()  # fair share, or why not

        # A confirm dismissed changes nothing; accepted, the GPU is drained and the job moves.
        page.once("dialog", lambda d: d.dismiss())
        gpu_row = page.locator(f'#gpus tr[data-gpu-id="{gpu}"]')
        gpu_row.locator('button[data-action="drain"]').click()
        expect(gpu_row.locator('button[data-action="drain"]')).to_be_visible()
        assert not get_json(server.api_url + "gpus", server.token)["gpus"][int(gpu)]["drained"]
        page.once("dialog", lambda d: d.accept())
        gpu_row.locator('button[data-action="drain"]').click()
        expect(gpu_row.locator('button[data-action="undrain"]')).to_be_visible()
        expect(page.locator("#message")).to_contain_text(f"GPU {gpu} drained")
        after = wait_for(
            lambda: (j := running(server, moved["id"])) and gpu not in j["gpus"] and j,
            40,
            what="the job to move off the drained GPU",
        )
        moved_row = page.locator(f'#jobs tr[data-job-id="{moved["id"]}"]')
        expect(moved_row).to_contain_text(after["gpus"][0])  # the page follows by itself
        expect(gpu_row.locator("td.state")).to_contain_text("drained")

        # Cancel through the page.
        page.once("dialog", lambda d: d.accept())
        page.locator(f'#jobs tr[data-job-id="{doomed["id"]}"] button[data-action="cancel"]').click()
        wait_for(lambda: server.job(doomed["id"])["state"] == "cancelled", 40, what="the cancel")
        expect(page.locator(f'#jobs tr[data-job-id="{doomed["id"]}"]')).to_have_attribute(
            "data-state", "cancelled"
        )
        # Everything the page asked for lies under the server's base URL.
        assert requests and all(u.startswith(server.url) for u in requests), requests
        context.close()
    finally:
        server.stop()


def test_a_user_who_is_no_admin_sees_what_is_needed(browser, tmp_path, page_errors):
    page_errors.allow_status(403, "the page refuses a user who is no admin", "/elastic-gpu/admin")
    server = admin_server(tmp_path, "plain", admin=False)
    try:
        page = browser.new_page()
        response = page.goto(f"{server.url}elastic-gpu/admin?token={server.token}")
        assert response.status == 403
        expect(page.locator("h2")).to_have_text("Admins only")
        expect(page.locator("main")).to_contain_text("c.ElasticGPUApp.admin_users")
        expect(page.locator("main")).to_contain_text("custom:elastic-gpu:admin")
        page.close()
    finally:
        server.stop()


def test_the_login_from_the_admin_page_returns_there_without_the_stale_token(browser, tmp_path):
    """Not logged in, at the admin page with a token that is no longer good: the server's
    login page, then the admin page; the stale token is in no Location header the browser
    got, nor in the server's log."""
    server = admin_server(tmp_path, "login", admin=True)
    stale = "a-stale-token-0123456789"
    try:
        page = browser.new_page()
        locations: list[str] = []
        page.on("response", lambda r: locations.append(r.headers.get("location") or ""))
        page.goto(f"{server.url}elastic-gpu/admin?token={stale}")
        page.wait_for_url("**/login?next=**")
        page.fill("#password_input", server.token)
        page.click("#login_submit")
        page.wait_for_url(f"{server.url}elastic-gpu/admin")
        expect(page.locator("#who")).to_contain_text(f"{getpass.getuser()} (admin")
        page.close()
        assert f"{BASE_URL}login?next=" in " ".join(locations), locations
        assert [loc for loc in locations if stale in loc] == []
        assert stale not in server.log_path.read_text()
    finally:
        server.stop()
