"""URL-mode elicitation in a real JupyterLab: the host named, nothing opened without a click.

A scripted agent asks the user to open pages: first addresses with tricks
(``javascript:``, ``data:``, ``user@host``, a newline in the host), which the
kernel declines without showing them; then a page on an IDN host (shown in
punycode, with a warning naming its Unicode form), which the test declines;
then a page on a server of the test's own on 127.0.0.1, with a hostile message
(raw HTML, a code span across a line break, math, a ``javascript:`` link).
Before the click nothing opened (the context's ``page`` event, a
``window.open`` spy) and nothing was fetched (the server's log); after the
click on "Open 127.0.0.1", exactly one page opened, at exactly that address,
and the agent's ``elicitation/complete`` shows the page done.
"""

from __future__ import annotations

import http.server
import json
import re
import sys
import threading
from collections.abc import Iterator

import pytest

from .conftest import AGENTS, TURN, Notebook, skip_unless_browser

skip_unless_browser()

from playwright.sync_api import expect

from .test_hostile_ui import FIND_LIVE, _js

END_TURN = re.compile(r"^Done\b")
MESSAGE = (f'Sign in <img src=x onerror="{_js("url:img")}"> `a\nb` $x$ $$y$$ \\(z\\) '
           f"[click](javascript:{_js('url:mdlink')}) at https://evil.example/")
TRICKS = [
    f"javascript:{_js('url:scheme')}",
    "data:text/html,<script>alert(1)</script>",
    "https://good.example@evil.example/",
    "https://evil.example\n.com/",
]
IDN = "https://аррӏе.example/login"  # Cyrillic letters that look like "apple"

SPY = """() => {
  window.__acp_opens = [];
  const real = window.open;
  window.open = function (...args) { window.__acp_opens.push(args.map(String)); return real.apply(this, args); };
}"""


class _Pages(http.server.BaseHTTPRequestHandler):
    seen: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        type(self).seen.append(self.path)
        body = b"<!doctype html><title>signed in</title><p>signed in"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def pages() -> Iterator[tuple[str, list[str]]]:
    """A page server on 127.0.0.1 (a free port): its base URL and the paths fetched."""
    handler = type("Pages", (_Pages,), {"seen": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler.seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def _pages(fetched: list[str]) -> list[str]:
    """What was fetched but the icon the browser asks for by itself with a page."""
    return [path for path in fetched if path != "/favicon.ico"]


def _ask(eid: str, url: str) -> dict:
    return {"request": {"method": "elicitation/create", "params": {
        "sessionId": "$SID", "mode": "url", "elicitationId": eid, "url": url, "message": MESSAGE}}}


@pytest.mark.slow
def test_the_host_is_named_and_nothing_opens_without_a_click(nb: Notebook, pages) -> None:
    base, fetched = pages
    url = f"{base}/signin?e=e1&next=%2Fhome"
    context = nb.page.context
    opened: list[object] = []

    def on_page(new_page: object) -> None:
        opened.append(new_page)

    context.on("page", on_page)
    try:
        _run(nb, url, fetched, opened)
    finally:
        context.remove_listener("page", on_page)


def _run(nb: Notebook, url: str, fetched: list[str], opened: list[object]) -> None:
    page, context = nb.page, nb.page.context
    actions = [_ask(f"t{i}", trick) for i, trick in enumerate(TRICKS)]
    actions += [_ask("idn", IDN), _ask("e1", url),
                {"send": {"jsonrpc": "2.0", "method": "elicitation/complete", "params": {"elicitationId": "e1"}}},
                {"chunk": "\n\nThe last words."}]
    scenario = nb.lab.root / "url-scenario.json"
    scenario.write_text(json.dumps({"prompt": actions}))
    out0 = nb.run(0, f"%agent --command {sys.executable} {AGENTS / 'scripted_agent.py'} {scenario}")
    expect(out0).to_contain_text("it starts with the next prompt", timeout=TURN)
    page.evaluate(SPY)

    out = nb.run(1, "go")
    # The tricks were declined without being shown, each with a notice.
    expect(out.locator(".acp-notice").filter(has_text="declined without showing it")).to_have_count(len(TRICKS), timeout=TURN)
    # The IDN host: named in punycode, its Unicode form in a warning; declined.
    idn = out.locator(".acp-url").first
    expect(idn.locator(".acp-url-host")).to_have_text("xn--80ak6aa92e.example", timeout=TURN)
    expect(idn.locator(".acp-url-warn")).to_contain_text("аррӏе.example")
    idn.get_by_role("button", name="Decline", exact=True).click()
    expect(idn).to_contain_text("→ declined", timeout=TURN)

    # The page on 127.0.0.1: the host named, the address and the message as text.
    block = out.locator(".acp-url").nth(1)
    expect(block.locator(".acp-url-host")).to_have_text("127.0.0.1", timeout=TURN)
    expect(block.locator(".acp-url-full")).to_have_text(url)
    expect(block.locator(".acp-url-message")).to_have_text(MESSAGE)
    open_button = block.get_by_role("button", name="Open 127.0.0.1", exact=True)
    expect(open_button).to_be_enabled()
    nb.screenshot("url-elicitation.png")
    # Nothing opened, nothing fetched, nothing ran, no link in any output.
    assert opened == [] and fetched == []
    assert page.evaluate("window.__acp_opens") == []
    assert page.evaluate("window.__acp_pwned === undefined ? null : window.__acp_pwned") is None
    assert page.evaluate(FIND_LIVE) == []
    assert out.locator("a[href]").count() == 0

    with context.expect_page(timeout=TURN) as popup_info:
        open_button.click()
    popup = popup_info.value
    popup.wait_for_load_state("load", timeout=TURN)
    assert popup.url == url
    assert page.evaluate("window.__acp_opens") == [[url, "_blank", "noopener,noreferrer"]]
    assert _pages(fetched) == ["/signin?e=e1&next=%2Fhome"]
    popup.close()

    # The agent's completion, then the end of the turn: a static output that says so.
    expect(out.locator(".jp-OutputArea-output sub").last).to_have_text(END_TURN, timeout=TURN)
    expect(out).to_contain_text("the agent says it is done")
    expect(out).to_contain_text('RESULT {"action": "accept"}')
    assert out.locator(".acp-url").count() == 0  # the widget is gone
    assert out.locator("a[href]").count() == 0 and page.evaluate(FIND_LIVE) == []
    assert len(opened) == 1 and _pages(fetched) == ["/signin?e=e1&next=%2Fhome"]
    assert page.evaluate("window.__acp_pwned === undefined ? null : window.__acp_pwned") is None
