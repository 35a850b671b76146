"""Static files with DEBUG off, as docs/operations.md ("Deploy") deploys them: collectstatic into
a fresh directory, then the pages' own stylesheets and scripts are served by the web process
(whitenoise) under content-hashed names, from this server (the content security policy's 'self')."""

import base64
import json
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

ROOT = Path(__file__).resolve().parents[1]
PRODUCTION = {"DJANGO_DEBUG": "0", "DJANGO_SECRET_KEY": secrets.token_urlsafe(64), "DJANGO_ALLOWED_HOSTS": "testserver",
              "WARRANT_RECEIPT_SIGNING_KEY": base64.b64encode(Ed25519PrivateKey.generate().private_bytes_raw()).decode()}

# Runs in a production process: collectstatic, a migrated SQLite file, then every page's assets fetched.
WALK = r"""
import json, re, django
django.setup()
from django.core.management import call_command
call_command("collectstatic", "--noinput", verbosity=0)
call_command("migrate", "--noinput", verbosity=0)
from django.contrib.auth import get_user_model
from django.test import Client
client = Client()
client.force_login(get_user_model().objects.create_user("reader", password="x" * 12))  # not staff
pages = {}
for page in ["/admin/login/", "/api/v1/docs/", "/"]:
    answer = client.get(page, secure=True)
    html = answer.content.decode()
    if page == "/api/v1/docs/":
        html += client.get("/api/v1/docs/?script", secure=True).content.decode()
    assets = {}
    for url in re.findall(r'(?:href|src)="(/static/[^"]+)"', html):
        asset = client.get(url, secure=True)
        body = b"".join(asset.streaming_content) if asset.streaming else asset.content
        assets[url] = [asset.status_code, asset.get("Cache-Control", ""), len(body)]
    pages[page] = {"status": answer.status_code, "csp": answer.get("Content-Security-Policy", ""),
                   "inline_scripts": len(re.findall(r"<script(?![^>]*\bsrc=)", html)), "assets": assets}
print("WALK " + json.dumps(pages))
"""


def _walk(tmp_path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "WARRANT_", "DATABASE_URL"))}
    env.update(PRODUCTION, DJANGO_SETTINGS_MODULE="warrant.settings", WARRANT_DATA_DIR=str(tmp_path / "data"),
               DJANGO_STATIC_ROOT=str(tmp_path / "collected"))
    done = subprocess.run([sys.executable, "-c", WALK], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith("WALK "))
    return json.loads(line.removeprefix("WALK "))


HASHED = r"\.[0-9a-f]{12}\."


@pytest.mark.slow
def test_with_debug_off_pages_reference_hashed_static_files_that_the_web_process_serves(tmp_path):
    pages = _walk(tmp_path)
    assert (tmp_path / "collected" / "staticfiles.json").exists(), "collectstatic wrote into DJANGO_STATIC_ROOT"
    expected = {"/admin/login/": [r"/static/admin/css/base" + HASHED + "css",
                                  r"/static/warrant/workbench" + HASHED + "css"],
                "/api/v1/docs/": [r"/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle" + HASHED + "js",
                                  r"/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui" + HASHED + "css"],
                "/": [r"/static/admin/css/base" + HASHED + "css", r"/static/warrant/workbench" + HASHED + "css"]}
    for page, patterns in expected.items():
        seen = pages[page]
        assert seen["status"] == 200, page
        for pattern in patterns:
            assert any(re.fullmatch(pattern, url) for url in seen["assets"]), (page, pattern, list(seen["assets"]))
        for url, (status, cache, size) in seen["assets"].items():
            assert status == 200 and size > 0, (page, url, status)
            if re.search(HASHED, url):
                assert "immutable" in cache and "max-age=315360000" in cache, (url, cache)  # whitenoise's forever
        # Every script is a same-origin file, so "script-src 'self'" lets them all run.
        assert seen["inline_scripts"] == 0, page
        assert "script-src 'self'" in seen["csp"], page
