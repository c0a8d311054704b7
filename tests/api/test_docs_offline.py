"""/docs and /redoc work offline: every script, stylesheet and icon they load is served by this server."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest


class _Assets(HTMLParser):
    def __init__(self):
        super().__init__()
        self.urls: list[tuple[str, str]] = []  # (tag, url)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for key in ("src", "href"):
            if a.get(key):
                self.urls.append((tag, a[key]))


def _assets(html: str) -> list[tuple[str, str]]:
    p = _Assets()
    p.feed(html)
    return p.urls


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_docs_pages_load_only_local_assets(client, page):
    r = client.get(page)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    html = r.text
    assert not re.search(r"https?://", html.replace("http://www.w3.org", "")), \
        [u for u in re.findall(r"https?://[^\s\"'<>]+", html)]  # no CDN, no Google Fonts, no remote favicon
    urls = _assets(html)
    scripts = [u for t, u in urls if t == "script"]
    assert scripts, html
    for tag, url in urls:
        assert url.startswith("/"), url
        got = client.get(url)
        assert got.status_code == 200, url
        if tag == "script":
            assert "javascript" in got.headers["content-type"] and len(got.content) > 100_000, url
        elif url.endswith(".css"):
            assert got.headers["content-type"].startswith("text/css") and len(got.content) > 10_000, url
        else:
            assert got.headers["content-type"].startswith("image/"), url
    if page == "/docs":
        assert {"script", "link"} <= {t for t, _ in urls}  # Swagger UI's bundle and its stylesheet


def test_swagger_ui_is_a_version_that_reads_openapi_3_1(client):
    """FastAPI writes OpenAPI 3.1; Swagger UI before 5 cannot render it (a blank page of another kind)."""
    assert client.get("/openapi.json").json()["openapi"].startswith("3.1")
    js = client.get(next(u for t, u in _assets(client.get("/docs").text) if t == "script")).text
    versions = re.findall(r'"(5\.\d+\.\d+)"', js)
    assert versions, "no Swagger UI 5.x version string in the bundle"


def test_docs_need_no_token_and_stay_out_of_the_openapi_document(client):
    paths = client.get("/openapi.json").json()["paths"]
    assert not any(p.startswith(("/docs", "/redoc")) for p in paths)
