"""The first minute: the landing page, a sign-in page for every user (staff or not, throttled like
the admin's), the signed-in page that says how to get a token, and the API docs for anyone signed in."""

import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

pytestmark = pytest.mark.django_db

PASSWORD = "reader-password-1"
BROWSER = {"HTTP_ACCEPT": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}


@pytest.fixture
def reader(db):
    """Signed up with a password, in no role, not staff: the admin would not let them in."""
    return get_user_model().objects.create_user("reader", password=PASSWORD)


def _sign_in(client: Client, password: str = PASSWORD, next_url: str = "", address: str = "10.7.7.7"):
    return client.post("/accounts/login/", {"username": "reader", "password": password, "next": next_url},
                       REMOTE_ADDR=address)


def test_the_landing_page_says_what_this_is_and_links_everywhere_a_newcomer_goes(db):
    page = Client().get("/")
    assert page.status_code == 200 and page["Content-Type"].startswith("text/html")
    html = page.content.decode()
    links = set(re.findall(r'href="([^"]+)"', html))
    assert {"/accounts/login/", "/admin/", "/api/v1/docs/", "/api/v1/schema/", "/healthz", "/readyz"} <= links
    assert "/static/warrant/workbench.css" in links
    assert not any(link.startswith(("http:", "https:", "//")) for link in links), "no external assets or links"
    assert "approve" in html and "receipt" in html


def test_the_admins_view_site_link_leads_to_the_landing_page(admin):
    client = Client()
    client.force_login(get_user_model().objects.get(username="admin"))
    html = client.get("/admin/").content.decode()
    assert re.search(r'<a href="/">View site</a>', html), "the admin's View site link"


def test_an_anonymous_browser_at_the_docs_is_sent_to_sign_in_and_comes_back_after(reader):
    client = Client()
    sent = client.get("/api/v1/docs/", **BROWSER)
    assert sent.status_code == 302 and sent["Location"] == "/accounts/login/?next=/api/v1/docs/"
    form = client.get(sent["Location"])
    assert form.status_code == 200 and 'name="next" value="/api/v1/docs/"' in form.content.decode()
    back = _sign_in(client, next_url="/api/v1/docs/")
    assert back.status_code == 302 and back["Location"] == "/api/v1/docs/"
    docs = client.get("/api/v1/docs/", **BROWSER)
    assert docs.status_code == 200 and "swagger-ui" in docs.content.decode()
    assert client.get("/api/v1/schema/").status_code == 200, "the viewer's schema, with the same session"


def test_an_api_client_without_credentials_still_gets_the_401_at_the_docs(db):
    answer = Client().get("/api/v1/docs/")  # no Accept: text/html, as curl or an SDK sends it
    assert answer.status_code == 401 and answer["WWW-Authenticate"].startswith("Token")


def test_a_non_staff_user_signs_in_and_is_told_how_to_get_a_token(reader):
    client = Client()
    landed = _sign_in(client)
    assert landed.status_code == 302 and landed["Location"] == "/accounts/"
    html = client.get("/accounts/").content.decode()
    assert "Signed in as reader" in html
    assert "POST /api/v1/tokens/" in html and "make -s token USER=reader" in html
    assert 'href="/admin/"' not in html, "no workbench link for a user who may not enter it"
    # What the page describes works: the session issues a token, and the token reads the API.
    client.get("/accounts/login/")  # sets the CSRF cookie, as the docs viewer has it
    issued = client.post("/api/v1/tokens/", {}, content_type="application/json",
                         HTTP_X_CSRFTOKEN=client.cookies["csrftoken"].value)
    assert issued.status_code == 201, issued.content
    by_token = Client().get("/api/v1/docs/", HTTP_AUTHORIZATION=f"Token {issued.json()['key']}")
    assert by_token.status_code == 200


def test_the_signed_in_page_needs_a_session(db):
    assert Client().get("/accounts/")["Location"] == "/accounts/login/?next=/accounts/"


def test_the_sign_in_page_is_throttled_like_the_admins(reader):
    client = Client()
    for _ in range(4):
        assert _sign_in(client, password="wrong").status_code == 200  # the form again, with the error
    assert _sign_in(client, password="wrong").status_code == 429
    assert _sign_in(client).status_code == 429, "the right password does not help once locked out"
    assert "_auth_user_id" not in client.session
    assert _sign_in(Client(), address="10.6.6.6").status_code == 302, "another address is not locked out"


def test_signing_out_takes_a_post_and_leads_to_the_landing_page(reader):
    client = Client()
    _sign_in(client)
    out = client.post("/accounts/logout/")
    assert out.status_code == 302 and out["Location"] == "/"
    assert client.get("/accounts/").status_code == 302
