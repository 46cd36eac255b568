"""The scheduler as a JupyterHub service, against a real Hub (conftest.py): who may see and
change what, through users' own servers and directly at the service; scopes; a user's server
stopped and started while their job trains; activity reported to the Hub."""

from __future__ import annotations

import base64
import re
import urllib.error
import urllib.request
from datetime import datetime
from urllib.parse import parse_qs, urlsplit

import pytest
from hubkit import SERVICE, synthetic
from servers import call, get_json, wait_for
from traitlets.config.loader import PyFileConfigLoader

from jupyter_elastic_gpu.hub import scopes

USERS = ("alice", "bob")


@pytest.fixture(scope="session")
def tokens(hub) -> dict[str, str]:
    """An API token with all their scopes for alice, bob and the admin."""
    return {user: hub.token(user) for user in (*USERS, "admin")}


@pytest.fixture(scope="session")
def servers(hub) -> dict[str, str]:
    """alice's and bob's servers, running: {user: their server's elastic-gpu API}."""
    for user in USERS:
        hub.start_server(user)
    return {user: hub.user_api(user) for user in USERS}


def test_users_servers_are_in_hub_mode_as_their_user(hub, servers, tokens):
    for user in USERS:
        who = get_json(servers[user] + "whoami", tokens[user])
        assert who == {"user": user, "admin": False, "mode": "hub"}
    assert get_json(hub.service_api() + "whoami", tokens["admin"])["admin"] is True


def test_a_user_cannot_reach_another_users_job(hub, servers, tokens):
    alice, bob = servers["alice"], servers["bob"]
    code, job = call("POST", alice + "jobs", tokens["alice"], synthetic("alice-secret", 300))
    assert code == 201, job
    assert job["user"] == "alice"
    # The owner is the Hub's user: a body that names one is refused.
    forged = {**synthetic("b", 10), "user": "alice"}
    assert call("POST", hub.service_api() + "jobs", tokens["bob"], forged)[0] == 400
    for api, token in ((bob, tokens["bob"]), (hub.service_api(), tokens["bob"])):
        for route in ("", "/logs", "/events", "/progress"):
            code, answer = call("GET", f"{api}jobs/{job['id']}{route}", token)
            assert code == 403, (api, route, answer)
            assert "belongs to alice" in answer["message"]
        code, answer = call("POST", f"{api}jobs/{job['id']}/cancel", token, {})
        assert code == 403, answer
    # Bob sees alice's job in the queue as owner, size and state only.
    listing = get_json(bob + "jobs", tokens["bob"])["jobs"]
    theirs = next(j for j in listing if j["id"] == job["id"])
    assert "name" not in theirs and "job_dir" not in theirs
    # The admin reads and cancels it (an admin action).
    code, seen = call("GET", f"{hub.service_api()}jobs/{job['id']}", tokens["admin"])
    assert code == 200 and seen["name"] == "alice-secret"
    code, cancelled = call(
        "POST", f"{hub.service_api()}jobs/{job['id']}/cancel", tokens["admin"], {}
    )
    assert code == 202, cancelled


def test_scopes_decide_what_a_token_may_do(hub):
    # A server token without the service's scope (the Hub's default server scopes) is refused.
    plain = hub.token("alice", ["access:servers!server=alice/", "users:activity!user=alice"])
    code, answer = call("GET", hub.service_api() + "jobs", plain)
    assert code in (401, 403), answer
    # Reaching the service without custom:elastic-gpu:submit: read, but not submit.
    reader = hub.token("alice", [scopes.ACCESS])
    assert call("GET", hub.service_api() + "jobs", reader)[0] == 200
    assert call("GET", hub.service_api() + "queue", reader)[0] == 200
    code, answer = call("POST", hub.service_api() + "jobs", reader, synthetic("no", 10))
    assert code == 403 and scopes.SUBMIT in answer["message"], answer
    # No token at all, or a made-up one.
    assert call("GET", hub.service_api() + "jobs", None)[0] in (401, 403)
    assert call("GET", hub.service_api() + "jobs", "not-a-token")[0] in (401, 403)


def test_the_services_root_leads_to_the_admin_page(hub, tokens):
    for entry in ("", "admin", "admin/?token=ignored"):  # the root, and the address people guess
        request = urllib.request.Request(hub.url + SERVICE + entry)
        request.add_header("Authorization", f"token {tokens['alice']}")
        with pytest.raises(urllib.error.HTTPError) as redirect:
            urllib.request.build_opener(NoRedirect).open(request, timeout=15)
        assert redirect.value.code == 302, entry
        assert redirect.value.headers["Location"] == f"/{SERVICE}elastic-gpu/admin"
    # Without credentials: the Hub's login (OAuth) first.
    with pytest.raises(urllib.error.HTTPError) as login:
        urllib.request.build_opener(NoRedirect).open(hub.url + SERVICE, timeout=15)
    assert login.value.code == 302
    assert "/hub/api/oauth2/authorize" in login.value.headers["Location"]


def test_a_token_in_the_address_beside_the_header_is_ignored(hub, tokens):
    """A ``?token=`` beside a good ``Authorization`` header changes nothing (no 5xx: the
    service never makes a cookie of it)."""
    api = hub.service_api()
    for url in (f"{api}whoami?token=not-this-one", f"{hub.url}{SERVICE}elastic-gpu/admin?token=x"):
        request = urllib.request.Request(url, headers={"Authorization": f"token {tokens['admin']}"})
        with urllib.request.urlopen(request, timeout=30) as answer:
            assert answer.status == 200, url
            cookies = {c.split("=", 1)[0] for c in answer.headers.get_all("Set-Cookie") or []}
            assert cookies <= {"_xsrf"}, cookies  # no login cookie made of the token


def test_the_admin_pages_login_keeps_its_oauth_state_whole_and_no_token(hub, tokens):
    """Not logged in, at the admin page with a ``?token=`` (which the service ignores in a
    page's address: JupyterHub's ``allow_token_in_url``), here a real token of the admin: the
    redirect to the Hub's OAuth keeps its ``state`` as the service set it in its cookie, and
    carries no token."""
    token = tokens["admin"]
    for entry in ("elastic-gpu/admin", "admin"):
        with pytest.raises(urllib.error.HTTPError) as login:
            urllib.request.build_opener(NoRedirect).open(
                f"{hub.url}{SERVICE}{entry}?token={token}", timeout=15
            )
        assert login.value.code == 302, entry
        location = login.value.headers["Location"]
        assert token not in location, location
        query = urlsplit(location).query
        assert "?" not in query, location  # one query, not a second one appended
        (state,) = parse_qs(query)["state"]
        assert re.fullmatch(r"[\w-]+", state), state  # the id the service made, nothing after
        # The state the Hub hands back is the one the service keeps in its signed cookie
        # (tornado's format: "2|1:0|10:<time>|<n>:<name>|<n>:<base64 value>|<signature>").
        (cookie,) = [c for c in login.value.headers.get_all("Set-Cookie") if "oauth-state" in c]
        value = cookie.split("=", 1)[1].strip('"').split(";")[0].split("|")[4]
        assert base64.b64decode(value.split(":", 1)[1]).decode() == state


def test_the_demo_hub_waits_for_slow_servers_and_logs_no_deprecated_authenticator(hub):
    """hub-demo's configuration (as the Hub ran it) gives users' servers time to start on a
    busy machine, and the Hub it started warned of no deprecated authenticator setting."""
    config = PyFileConfigLoader("jupyterhub_config.py", path=str(hub.state)).load_config()
    spawner = dict(config.Spawner)
    assert spawner.get("start_timeout", 0) >= 120  # JupyterHub's 60 and 30 were too short
    assert spawner.get("http_timeout", 0) >= 120
    log = hub.log_path.read_text()
    assert "SharedPasswordAuthenticator" in log  # "Using Authenticator: ..."
    warned = [
        line
        for line in log.splitlines()
        if "authenticator" in line.lower()
        and ("deprecat" in line.lower() or "not meant for production" in line)
    ]
    assert warned == []


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def _page_status(url: str, token: str) -> int:
    request = urllib.request.Request(url, headers={"Authorization": f"token {token}"})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status
    except urllib.error.HTTPError as e:
        return e.code


def test_only_admins_reach_the_admin_page_and_its_actions(hub, tokens):
    page = hub.url + SERVICE + "elastic-gpu/admin"
    assert _page_status(page, tokens["alice"]) == 403
    assert _page_status(page, tokens["admin"]) == 200
    api = hub.service_api()
    gpu = get_json(api + "gpus", tokens["admin"])["gpus"][0]["id"]
    for user in USERS:  # plain users: refused, and nothing changes
        assert call("POST", f"{api}gpus/{gpu}/drain", tokens[user], {"drained": True})[0] == 403
        assert (
            call("PUT", f"{api}admin/groups/physics/weight", tokens[user], {"weight": 3})[0] == 403
        )
        assert call("GET", f"{api}admin/shares", tokens[user])[0] == 403
    assert not get_json(api + "gpus", tokens["admin"])["gpus"][0]["drained"]
    code, shares = call("PUT", f"{api}admin/groups/physics/weight", tokens["admin"], {"weight": 2})
    assert code == 200 and shares["groups"] is not None, shares
    code, shares = call("GET", f"{api}admin/shares", tokens["admin"])
    assert code == 200 and "half_life_s" in shares, shares


def _last_activity(hub, user: str) -> datetime:
    return datetime.fromisoformat(hub.api("GET", f"users/{user}")[1]["last_activity"])


def test_a_job_outlives_its_users_server_and_counts_as_activity(hub, servers, tokens):
    alice, service = servers["alice"], hub.service_api()
    code, job = call("POST", alice + "jobs", tokens["alice"], synthetic("long", 3000))
    assert code == 201, job
    # One that cannot finish during the test: an open job for as long as the server is down.
    code, endless = call("POST", alice + "jobs", tokens["alice"], synthetic("endless", 1e9))
    assert code == 201, endless

    def look() -> tuple[str, float]:
        doc = get_json(f"{service}jobs/{job['id']}", tokens["alice"])
        assert doc["state"] not in ("failed", "cancelled"), doc
        return doc["state"], (doc.get("progress") or {}).get("samples") or 0.0

    wait_for(lambda: look()[1] > 0, 90, what="alice's job to train")
    hub.stop_server("alice")
    # Her server is gone: her job trains on (or has finished meanwhile), and the service tells
    # the Hub she is active (no one else does while her server is down).
    before = look()[1]
    stopped_at = _last_activity(hub, "alice")
    wait_for(
        lambda: look()[0] == "done" or look()[1] > before,
        60,
        what="the job to go on without its server",
    )
    wait_for(
        lambda: _last_activity(hub, "alice") > stopped_at, 30, what="the job's activity report"
    )
    # A job sent meanwhile (a script, straight to the service) waits for her server, visibly,
    # instead of being started for nobody.
    code, later = call("POST", service + "jobs", tokens["alice"], synthetic("later", 1e9))
    assert code == 201, later

    def later_reason() -> str:
        doc = get_json(f"{service}jobs/{later['id']}", tokens["alice"])
        assert doc["state"] not in ("failed", "cancelled"), doc
        return doc["reason"]

    wait_for(lambda: "waiting for your server" in later_reason(), 60, what="the job to wait")
    hub.start_server("alice")
    wait_for(
        lambda: "waiting for your server" not in later_reason(), 60, what="the server's return"
    )

    def done():
        doc = get_json(f"{alice}jobs/{job['id']}", tokens["alice"])
        assert doc["state"] not in ("failed", "cancelled"), doc
        return doc if doc["state"] == "done" else None

    finished = wait_for(done, 120, what="alice's job to finish")
    assert finished["restarts"] == 0  # the same sidecar and trainer all along
    for leftover in (endless, later):
        code, answer = call("POST", f"{alice}jobs/{leftover['id']}/cancel", tokens["alice"], {})
        assert code == 202, answer


def test_group_weights_come_from_the_hubs_groups(hub, tokens):
    """A user's fair-share weight is their JupyterHub groups' (here set by the admin through
    the service): the Hub's identity carries the groups, the body never does."""
    code, answer = hub.api("POST", "groups/physics", {"users": ["bob"]})
    assert code in (201, 409), answer  # 409: an earlier test made it
    hub.api("POST", "groups/physics/users", {"users": ["bob"]})
    bob = hub.token("bob")  # a fresh token: the service caches what the Hub said of a token
    api = hub.service_api()
    code, job = call("POST", api + "jobs", bob, synthetic("weighted", 1e9))
    assert code == 201, job
    code, shares = call("PUT", f"{api}admin/groups/physics/weight", tokens["admin"], {"weight": 3})
    assert code == 200, shares
    row = next(u for u in shares["users"] if u["user"] == "bob")
    assert "physics" in row["groups"] and row["weight"] == 3, row
    group = next(g for g in shares["groups"] if g["group"] == "physics")
    assert group["weight"] == 3 and "bob" in group["users"], group
    assert call("POST", f"{api}jobs/{job['id']}/cancel", bob, {})[0] == 202
