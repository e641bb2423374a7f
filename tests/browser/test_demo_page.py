"""What `make run` promises a person: the printed address opens the sidebar, and a demo
conversation is found by a word and by a phrase in quotes."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from backscroll.demo.guide import what_to_try
from backscroll.demo.loader import create_demo_tokens, load_demo
from backscroll.demo.runner import tokens_path
from tests.browser.support import item_ids, search, sign_in
from tests.world import settings_for


def test_the_demo_conversations_are_found_from_the_page(db_url, world, server, page, shot):
    info = load_demo(world.conn)
    tokens = create_demo_tokens(world.conn)
    printed = what_to_try(info, server, tokens, tokens_path(settings_for(db_url)))
    assert f"open {server}/ in a browser" in printed

    sign_in(page, server, tokens["BACKSCROLL_READER_TOKEN"])
    assert len(item_ids(page)) > 0
    search(page, "rose")
    assert info.ids["rose_room"] in item_ids(page)
    expect(page.locator(f"#list li[data-id='{info.ids['rose_room']}'] .reason").first).to_be_visible()
    search(page, '"double booking"')
    assert info.ids["double_booking"] in item_ids(page)
    page.locator(f"#list li[data-id='{info.ids['double_booking']}'] a").click()
    expect(page.locator("#messages li.message.matched")).to_have_count(1)
    expect(page.locator("#messages li.message.matched .body")).to_contain_text(re.compile("double booking", re.I))
    shot(page, "demo-phrase-hit")

    # A colleague's private DM is in the corpus, and is not this reader's to find.
    page.goto(f"{server}/c/{info.ids['surprise']}")
    expect(page.locator("#reader-state")).to_have_attribute("data-state", "not-found")
