"""What the browser tests do to the page, by the ids and data attributes the page exposes."""

from __future__ import annotations

from playwright.sync_api import Page, expect


def sign_in(page: Page, base: str, token: str, path: str = "/") -> None:
    page.goto(base + path)
    page.fill("#token", token)
    page.click("#signin-button")
    expect(page.locator("#app")).to_be_visible()
    settled(page)


def settled(page: Page) -> None:
    """The sidebar's current page has arrived (or failed): nothing is loading."""
    expect(page.locator("#list-state")).not_to_have_attribute("data-state", "loading")


def item_ids(page: Page) -> list[int]:
    return [int(i) for i in page.locator("#list li.item").evaluate_all("els => els.map(e => e.dataset.id)")]


def scroll_sidebar_to_end(page: Page) -> None:
    page.locator("#scroller").evaluate("el => { el.scrollTop = el.scrollHeight; }")


def search(page: Page, q: str) -> None:
    """Type a query and wait until the server's first page for it is shown (or failed)."""
    page.fill("#q", q)
    page.wait_for_function(
        "q => { const s = document.getElementById('list-state');"
        " return s.dataset.query === q && !!s.dataset.state && s.dataset.state !== 'loading'; }",
        arg=q.strip())
