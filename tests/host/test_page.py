"""The page for the people who ask and who approve, driven in a real headless browser against a real host.

Each test starts microagent.host on 127.0.0.1 (a free port) in this process and
opens its page in Debian's Chromium, driven by Playwright: it types a token,
clicks and reads the page as a person would. Alice asks, bob and carol
approve, dan asks too. Without /usr/bin/chromium (apt-get install chromium) or
the playwright package (the dev extra), the tests skip.

    python tests/host/test_page.py docs/page_approval.png   # the README's screenshot: bob's queue, a refund open
"""

import contextlib
import http.client
import json
import os
import pathlib
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import types

import pytest

from host_offices import Listener, gated_refund_office
from microagent import Action, Agent, approval, final_answer, scripted
from microagent.host import Server, ledger_refund, refund_office, thinking
from microagent.progress import report
from microagent.schema import as_tool

CHROMIUM = "/usr/bin/chromium"
if not os.path.exists(CHROMIUM):
    pytest.skip(f"no {CHROMIUM}: install Debian's browser with `apt-get install chromium` (.ci/run does)",
                allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright (in the dev extra)")
expect = sync_api.expect
expect.set_options(timeout=30_000)  # generous: CI is a busy 2-core machine

TESTS = pathlib.Path(__file__).resolve().parents[1]  # tests/, where host_offices.py is
PAGE = TESTS.parent / "microagent" / "host"
ROLES = {"alice": ["asks"], "bob": ["approves"], "carol": ["approves"], "dan": ["asks"]}
USERS = {name: f"{name}-token-0123456789" for name in ROLES}
QUESTION = "Can I get a refund for order A1234? It arrived broken."
MARKUP = "<img src=x onerror=alert(1)>"
# the refund office's story, as the page shows the notebook (after a verdict, which each test adds)
ASKED = [
    f"asked: {QUESTION}",
    '→ look_up_order {"order_id": "A1234"}   (let me pull up the order first)',
    "← look_up_order: A1234, Wireless Headphones, $79, delivered, reported defective",
    '→ check_policy {"order_id": "A1234"}   (now check if it qualifies)',
    "← check_policy: eligible, within the 30 day window and reported defective",
    '→ issue_refund {"order_id": "A1234", "amount": 79}   (it qualifies, and a refund needs a human to sign off)',
]
DONE = "Done: the agent answered."
LOST = "The server can't be reached (it may have stopped). What was done is kept: reload the page once it is back."
DECIDED = "Someone else has decided this already, or it is gone: it is no longer yours to decide."
PHONE = {"viewport": {"width": 375, "height": 800}, "is_mobile": True, "has_touch": True}


def answer(text):
    return f'→ final_answer {json.dumps({"answer": text})}   (all set, time to reply to the customer)'


def approved(amount, by="bob"):
    done = f"Good news, A1234 qualifies. I refunded ${amount} to your card, here in 3 to 5 days."
    edit = "" if amount == 79 else ' (it asked for {"order_id": "A1234", "amount": 79})'
    return ASKED + [f'{by} approved issue_refund {{"order_id": "A1234", "amount": {amount}}}{edit}',
                    f"← issue_refund: ${amount} refunded to the original card (receipt R1)",
                    answer(done), f"← final_answer: {done}"]


class Host:
    """A real server on a free port, in a thread; the refund office unless told otherwise."""

    def __init__(self, db, office=refund_office, **settings):
        self.db = str(db)
        users = {name: {"token": USERS[name], "roles": roles} for name, roles in ROLES.items()}
        self.server = Server(office, self.db, users, b"s" * 32, quiet=True, **settings)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def api(self, user, method, path, body=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        conn.request(method, path, None if body is None else json.dumps(body), {"Authorization": f"Bearer {USERS[user]}"})
        text = conn.getresponse().read().decode()
        conn.close()
        return json.loads(text) if text.startswith("{") else text

    def asked(self, user="alice", text=QUESTION) -> str:
        """A session made and asked over HTTP, as another client would: its id."""
        sid = self.api(user, "POST", "/sessions", {})["id"]
        self.api(user, "POST", f"/sessions/{sid}/messages", {"text": text})
        return sid

    def refunds(self) -> list[tuple]:
        with sqlite3.connect(self.db) as db:
            return db.execute("SELECT order_id, amount FROM refunds").fetchall()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def launch(playwright):
    return playwright.chromium.launch(executable_path=CHROMIUM, args=[
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run", "--disable-sync"])


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as playwright:
        browser = launch(playwright)
        yield browser
        browser.close()


@pytest.fixture
def host(tmp_path):
    made = []

    def start(office=refund_office, **settings) -> Host:
        made.append(Host(tmp_path / f"host{len(made)}.db", office, **settings))
        return made[-1]
    yield start
    for h in made:
        h.close()


class Person:
    """One person at the page in a browser context of their own (their own tab storage)."""

    def __init__(self, browser, url, user, session="", **options):
        self.context = browser.new_context(**{"viewport": {"width": 900, "height": 700}, **options})
        self.page = self.context.new_page()
        self.dialogs, self.urls = [], []
        self.page.on("dialog", lambda dialog: (self.dialogs.append(dialog.message), dialog.dismiss()))
        self.page.on("request", lambda request: self.urls.append(request.url))
        self.page.goto(url + (f"#{session}" if session else ""))
        self.page.fill("#token", USERS.get(user, user))
        self.page.click("text=Use it")

    def start(self, text=QUESTION) -> str:
        """A new session, a question sent: the session's id."""
        self.page.click("#new")
        expect(self.status).to_have_text("Ready: ask the agent something.")
        self.page.fill("#text", text)
        self.page.click("text=Send")
        return self.page.evaluate("location.hash").removeprefix("#")

    def story(self):
        return self.page.locator("#story li")

    @property
    def status(self):
        return self.page.locator("#status")

    @property
    def problem(self):
        return self.page.locator("#problem")

    def said(self) -> str:
        """What the page says, checked to be in words for a person: no route, no status code."""
        text = self.page.inner_text("#news")
        assert not re.search(r"\b(GET|POST)\b|/sessions|/approvals|/resume|\b[45]\d\d:", text), text
        return text

    def close(self):
        self.context.close()


@pytest.fixture
def person(browser):
    made = []

    def arrive(host, user="alice", session="", **options) -> Person:
        made.append(Person(browser, host.url, user, session, **options))
        return made[-1]
    yield arrive
    for p in made:
        p.close()


def waits_for_an_approver(alice, story=ASKED):
    expect(alice.page.locator("#waits")).to_be_visible()
    expect(alice.page.locator("#waits-what")).to_have_text('issue_refund {"order_id":"A1234","amount":79}')
    expect(alice.story()).to_have_text(story)
    expect(alice.status).to_have_text("Your request waits for an approver: the verdict shows here when it comes.")
    expect(alice.page.locator("#approval")).to_be_hidden()


def offered(bob, story=ASKED, args=None):
    expect(bob.page.locator("#approval")).to_be_visible()
    expect(bob.page.locator("#tool")).to_have_text("issue_refund")
    expect(bob.page.locator("#asker")).to_have_text("(asked by alice)")
    expect(bob.story()).to_have_text(story)
    expect(bob.status).to_have_text("issue_refund waits for your verdict.")
    expect(bob.page.locator("#unseen")).to_be_hidden()  # nothing in the arguments prints as nothing
    assert json.loads(bob.page.input_value("#args")) == (args or {"order_id": "A1234", "amount": 79})


def opens_from_the_queue(bob, sid):
    link = bob.page.locator(f'#queue-list a[href="#{sid}"]')
    expect(link).to_have_text(f"alice asks: {QUESTION}")
    link.click()
    offered(bob)


# ----------------------------------------------------------------------------
# the page itself

def test_the_page_is_served_with_headers_that_allow_only_its_own_script(host):
    h = host()
    for path, kind in [("/", "text/html"), ("/page.js", "text/javascript"), ("/page.css", "text/css")]:
        conn = http.client.HTTPConnection("127.0.0.1", h.port, timeout=30)
        conn.request("GET", path)  # no bearer token: the page asks the person for one
        response = conn.getresponse()
        body = response.read()
        conn.close()
        assert response.status == 200 and body == (PAGE / ("page.html" if path == "/" else path[1:])).read_bytes()
        assert response.getheader("Content-Type") == f"{kind}; charset=utf-8"
        assert response.getheader("Content-Security-Policy") == ("default-src 'self'; script-src 'self'; img-src 'self' blob:; "
                                                                 "object-src 'none'; base-uri 'none'; frame-ancestors 'none'")
        assert response.getheader("X-Content-Type-Options") == "nosniff"
    html = (PAGE / "page.html").read_text()
    assert "<script>" not in html and "onclick" not in html and "style=" not in html  # nothing inline
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in html
    # what the host's README claims: the page and its script are small enough to read in a sitting
    lines, css = re.search(r"(\d+) lines in all \(and (\d+) of CSS\)", (PAGE / "README.md").read_text()).groups()
    assert sum(len((PAGE / name).read_text().splitlines()) for name in ("page.html", "page.js")) == int(lines)
    assert len((PAGE / "page.css").read_text().splitlines()) == int(css)


def test_a_long_link_in_a_question_wraps_on_a_phone_375_pixels_wide(host, person):
    h = host()
    link = "https://shop.example/orders/A1234/photos?ids=" + "%2C".join(f"p{n}" for n in range(1000, 1060))
    alice = person(h, **PHONE)
    sid = alice.start(f"{QUESTION} See {link}")
    expect(alice.page.locator("#waits")).to_be_visible()
    bob = person(h, "bob", session=sid, **PHONE)  # the question, link and all, in his queue and in the story
    expect(bob.page.locator("#queue-list a")).to_have_text(f"alice asks: {QUESTION} See {link}")
    expect(bob.page.locator("#approval")).to_be_visible()
    expect(bob.story().first).to_have_text(f"asked: {QUESTION} See {link}")
    for someone in (alice, bob):
        assert someone.page.evaluate("document.documentElement.scrollWidth") <= 375


def test_a_phone_gets_the_page_at_its_own_width_and_a_link_with_a_query_gets_the_page(host, person):
    h = host()
    phone = person(h, viewport={"width": 390, "height": 800}, is_mobile=True, has_touch=True)
    assert phone.page.evaluate("innerWidth") == 390  # not the desktop's 980 shrunk to 40%
    assert phone.page.evaluate("document.documentElement.scrollWidth") <= 390
    mail = person(h, "bob")
    mail.page.goto(h.url + "?from=mail")  # a link from a mail: the page, not a JSON refusal
    expect(mail.page.locator("h1")).to_have_text("The approval desk")


# ----------------------------------------------------------------------------
# one person asks, another approves

def test_alice_asks_bob_approves_from_his_queue_and_alice_sees_the_verdict(host, person):
    h = host()
    alice = person(h)
    expect(alice.page.locator("#me")).to_have_text("You are alice: you ask, and an approver decides.")
    expect(alice.page.locator("#queue")).to_be_hidden()
    sid = alice.start()
    waits_for_an_approver(alice)
    bob = person(h, "bob")
    expect(bob.page.locator("#me")).to_have_text("You are bob: you approve others' requests.")
    expect(bob.page.locator("#ask")).to_be_hidden()
    # his queue: who asked what, and the arguments in full
    expect(bob.page.locator("#queue-list li")).to_have_count(1)
    expect(bob.page.locator("#queue-list pre")).to_have_text('issue_refund {\n "order_id": "A1234",\n "amount": 79\n}')
    opens_from_the_queue(bob, sid)  # its story and its picture
    bob.page.wait_for_function("document.getElementById('picture').naturalWidth > 500")
    assert bob.page.evaluate("document.activeElement.id") == "args"  # the keyboard is where the verdict is
    assert h.refunds() == []  # nothing paid before the approver says yes
    bob.page.click("#approve")
    expect(bob.story()).to_have_text(approved(79))
    expect(bob.status).to_have_text(f"bob approved issue_refund. {DONE}")
    expect(bob.page.locator("#approval")).to_be_hidden()
    assert bob.page.evaluate("document.activeElement.id") == "session"  # not dropped to the page's top
    expect(bob.page.locator("#queue-empty")).to_be_visible()
    assert h.refunds() == [("A1234", 79)]
    # alice's page looks again while it waits, and shows the verdict when it comes
    expect(alice.story()).to_have_text(approved(79))
    expect(alice.status).to_have_text(f"bob approved issue_refund. {DONE}")
    expect(alice.page.locator("#waits")).to_be_hidden()
    alice.page.reload()  # the story again, read from the notebook
    expect(alice.story()).to_have_text(approved(79))
    for someone in (alice, bob):  # the session is in the address's fragment, a token in no address at all
        assert not any(token in url for url in someone.urls for token in USERS.values())
        assert someone.dialogs == []
        someone.said()
    assert alice.page.url == h.url + "#" + sid and h.refunds() == [("A1234", 79)]


def test_approve_carries_out_the_arguments_in_the_box_and_an_edit_that_does_not_fit_is_refused(host, person):
    h = host()
    sid = h.asked()
    bob = person(h, "bob")
    opens_from_the_queue(bob, sid)
    for field, name in [("#token", "Your token"), ("#args", "The arguments to approve (JSON)"),
                        ("#reason", "Why not (the agent reads it and tells the customer)")]:
        assert bob.page.get_by_label(name).evaluate("e => '#' + e.id") == field  # named, not by a placeholder
    assert bob.page.evaluate("[...document.querySelectorAll('input, textarea')].every(e => e.labels.length)")
    bob.page.fill("#args", '{"order_id": "A1234", "amount": "seventy"}')
    bob.page.click("#approve")
    expect(bob.problem).to_have_text("The edited arguments don't fit issue_refund: amount must be number, "
                                     "not str 'seventy'.")
    bob.page.fill("#args", '{"order_id": "A1234\\ud800", "amount": 79}')  # half a character, or nine deep
    bob.page.click("#approve")
    expect(bob.problem).to_have_text("The text holds a lone surrogate (\\ud800), which is not valid Unicode: send "
                                     "whole characters.")
    bob.page.fill("#args", '{"order_id": "A1234", "amount": 79, "why": [[[[[[[["deep"]]]]]]]]}')
    bob.page.click("#approve")
    expect(bob.problem).to_have_text("The JSON is nested deeper than 8 levels (objects and lists inside one another): "
                                     "send it flatter.")
    bob.page.fill("#args", '{"order_id": "A1234", "amount": 5')  # the page checks it is JSON at all
    bob.page.click("#approve")
    expect(bob.problem).to_contain_text("The arguments are not JSON")
    expect(bob.page.locator("#approval")).to_be_visible()  # nothing changed: the same decision waits
    expect(bob.story()).to_have_text(ASKED)
    bob.said()
    bob.page.fill("#args", '{"order_id": "A1234", "amount": 5}')
    bob.page.click("#approve")  # plain Approve: what the box says
    expect(bob.story()).to_have_text(approved(5))
    expect(bob.problem).to_have_text("")
    assert h.refunds() == [("A1234", 5)]


def test_a_denial_needs_a_reason_and_enter_in_the_reason_denies(host, person):
    h = host()
    alice = person(h)
    alice.start()
    waits_for_an_approver(alice)
    bob = person(h, "bob", session=alice.page.evaluate("location.hash").removeprefix("#"))
    offered(bob)
    bob.page.click("text=Deny")  # no reason yet: nothing is sent
    expect(bob.problem).to_have_text("Say why: the agent reads the reason and tells the customer.")
    expect(bob.page.locator("#approval")).to_be_visible()
    bob.page.fill("#reason", "the box was opened: send it to the lab first")
    bob.page.press("#reason", "Enter")
    sorry = "Sorry, I can't refund A1234 right now. A teammate will follow up by email within a day."
    story = ASKED + [
        "bob denied issue_refund: the box was opened: send it to the lab first",
        "← issue_refund: denied by bob: the box was opened: send it to the lab first",
        f'→ final_answer {json.dumps({"answer": sorry})}   (no refund this time, so tell the customer honestly)',
        f"← final_answer: {sorry}"]
    expect(bob.story()).to_have_text(story)
    expect(bob.problem).to_have_text("")
    assert bob.page.locator("#story li.error").count() == 1  # the denial is an error note, drawn so
    expect(alice.story()).to_have_text(story)
    expect(alice.status).to_have_text("bob said no to issue_refund: the box was opened: send it to the lab first. "
                                      + DONE)
    assert h.refunds() == []


def test_a_reload_shows_what_waits_again_to_each_of_them_and_a_fresh_token_works(host, person):
    h = host()
    sid = h.asked()
    alice, bob = person(h, session=sid), person(h, "bob", session=sid)
    waits_for_an_approver(alice)
    offered(bob)
    alice.page.reload()
    bob.page.reload()  # the token comes from his queue again
    waits_for_an_approver(alice)
    offered(bob)
    bob.page.click("#approve")
    expect(bob.status).to_have_text(f"bob approved issue_refund. {DONE}")
    assert h.refunds() == [("A1234", 79)]


def test_someone_who_may_not_see_a_session_sees_nothing_and_no_picture_stays_behind(host, person):
    h = host()
    sid = h.asked()
    dan = person(h, "dan", session=sid)  # dan has the link, with his own token: he only asks
    expect(dan.problem).to_have_text("There is no such session, or it is not yours to open.")
    expect(dan.story()).to_have_count(0)
    expect(dan.page.locator("#approval")).to_be_hidden()
    assert "A1234" not in dan.page.inner_text("body") and "issue_refund" not in dan.page.content()
    dan.page.click("#resume")  # driving it gets the same answer as a session that does not exist
    expect(dan.problem).to_have_text("There is no such session, or it is not yours to open.")
    # alice opens hers, picture and all, then a link to a session that is not there: nothing of hers stays
    alice = person(h, session=sid)
    waits_for_an_approver(alice)
    expect(alice.page.locator("#picture")).to_be_visible()
    alice.page.goto(h.url + "#no-such-session")
    expect(alice.problem).to_have_text("There is no such session, or it is not yours to open.")
    expect(alice.story()).to_have_count(0)
    expect(alice.page.locator("#picture")).to_be_hidden()
    expect(alice.page.locator("#waits")).to_be_hidden()
    assert alice.page.get_attribute("#picture", "src") is None
    assert h.refunds() == []


def test_a_token_nobody_knows_gets_words_for_a_person_and_nothing_else(host, person):
    h = host()
    eve = person(h, "not-a-token-anyone-has")
    expect(eve.problem).to_have_text("This server does not know that token: paste the one you were given.")
    expect(eve.page.locator("#queue")).to_be_hidden()
    expect(eve.page.locator("#ask")).to_be_hidden()
    assert eve.page.evaluate("location.hash") == ""
    eve.said()


def test_the_queue_looked_at_again_keeps_the_keyboard_where_it_was_and_redraws_only_what_changed(host, person):
    h = host()
    first = h.asked()
    bob = person(h, "bob")
    link = bob.page.locator(f'#queue-list a[href="#{first}"]')
    expect(link).to_have_count(1)
    link.focus()  # bob tabbed to alice's request, and reads it
    item = f"document.querySelector('#queue-list a[href=\"#{first}\"]').closest('li')"
    bob.page.evaluate(f"{item}.dataset.seen = 'before'")  # the very line the page drew first
    second = h.asked("dan")  # dan asks meanwhile: the queue, looked at again, brings his request in
    expect(bob.page.locator("#queue-list li")).to_have_count(2)
    assert bob.page.evaluate("document.activeElement.getAttribute('href')") == f"#{first}"
    for look in range(2):  # and a look that finds nothing new changes nothing
        with bob.page.expect_response(lambda r: r.url.endswith("/approvals") and r.request.method == "GET"):
            pass
    assert bob.page.evaluate(f"[{item}.dataset.seen, document.activeElement === {item}.firstChild]") == ["before", True]
    assert bob.page.evaluate("[...document.querySelectorAll('#queue-list a')].map(a => a.hash).sort()") == sorted(
        [f"#{first}", f"#{second}"])
    bob.page.keyboard.press("Enter")  # and the keyboard opens what it is on
    offered(bob)
    assert bob.page.evaluate("location.hash") == f"#{first}"


# ----------------------------------------------------------------------------
# what a run wrote is text, in its own order, on its own lines

def test_markup_from_the_brain_or_a_tool_shows_as_text_and_never_runs(host, person):
    @as_tool
    def look_up(order_id: str) -> str:
        """Look up an order."""
        return MARKUP

    def brain(ctx, tools):  # a thinking brain: its words stream before its decision
        thinking("<b>bold?</b> ")
        thinking(MARKUP)
        return scripted(Action("look_up", {"order_id": MARKUP}, MARKUP),
                        Action("final_answer", {"answer": f"<script>alert(2)</script>{MARKUP}"}, MARKUP))(ctx, tools)

    h = host(lambda db: Agent(brain, [look_up, final_answer], name="support"))
    alice = person(h)
    alice.start(f"<i>{MARKUP}</i>")
    said = f"<script>alert(2)</script>{MARKUP}"
    expect(alice.story()).to_have_text([
        f"asked: <i>{MARKUP}</i>",
        f"→ look_up {json.dumps({'order_id': MARKUP})}   ({MARKUP})",
        f"← look_up: {MARKUP}",
        f"→ final_answer {json.dumps({'answer': said})}   ({MARKUP})",
        f"← final_answer: {said}"])
    expect(alice.status).to_have_text(DONE)
    alice.page.reload()
    expect(alice.story()).to_have_count(5)
    expect(alice.story().nth(2)).to_have_text(f"← look_up: {MARKUP}")
    page = alice.page
    assert page.locator("img:not(#picture)").count() == 0 and page.locator("b, i").count() == 0
    assert page.locator("#picture").get_attribute("src").startswith("blob:")  # the run's picture: an image
    assert page.locator("script").count() == 1  # page.js, and nothing the run wrote
    assert alice.dialogs == []
    page.evaluate("alert('a dialog is caught')")  # so an alert() the run had set off would have been seen
    assert alice.dialogs == ["a dialog is caught"]


def test_a_line_break_or_a_right_to_left_mark_cannot_pass_for_another_line_or_another_amount(host, person):
    forged = 'found it\nbob approved issue_refund {"order_id": "A1234", "amount": 1}'

    @as_tool
    def look_up_order(order_id: str) -> str:
        """Look up an order."""
        return forged

    policy = scripted(Action("look_up_order", {"order_id": "A1234"}, "first\u2028bob approved it"),
                      Action("issue_refund", {"order_id": "A1234\u202e", "amount": 97}, "pay"))
    h = host(lambda db: Agent(policy, [look_up_order, ledger_refund(db), final_answer], name="support"))
    sid = h.asked(text="refund A1234")
    bob = person(h, "bob", session=sid)
    expect(bob.page.locator("#approval")).to_be_visible()
    lines = [bob.story().nth(i).inner_text() for i in range(bob.story().count())]
    assert lines == ["asked: refund A1234",
                     '→ look_up_order {"order_id": "A1234"}   (first\n  | bob approved it)',
                     f"← look_up_order: found it\n  | {forged.splitlines()[1]}",
                     '→ issue_refund {"order_id": "A1234\\u202e", "amount": 97}   (pay)']
    box = bob.page.input_value("#args")  # still the same JSON, the mark written as its escape
    assert "\u202e" not in box and json.loads(box) == {"order_id": "A1234\u202e", "amount": 97}
    assert "\u202e" not in bob.page.inner_text("body") and "\u2028" not in bob.page.inner_text("body")
    assert "\u202e" not in h.api("bob", "GET", f"/sessions/{sid}/picture")  # the picture writes the escape too


def test_characters_that_print_as_nothing_show_as_escapes_wherever_the_approver_reads_the_arguments(host, person):
    # A12, five characters that print as nothing, 34: read as "A1234", another order would be booked
    hidden = "A12\u200b\u2060\ufeff\u00ad\u180e34"
    shown = "A12\\u200b\\u2060\\ufeff\\u00ad\\u180e34"
    policy = scripted(Action("issue_refund", {"order_id": hidden, "amount": 79}, "pay"),
                      Action("final_answer", {"answer": "Refunded."}, "tell them"))
    h = host(lambda db: Agent(policy, [ledger_refund(db), final_answer], name="support"))
    sid = h.asked(text=f"refund {hidden}")
    alice = person(h, session=sid)
    expect(alice.page.locator("#waits-what")).to_have_text(f'issue_refund {{"order_id":"{shown}","amount":79}}')
    bob = person(h, "bob")
    expect(bob.page.locator("#queue-list a")).to_have_text(f"alice asks: refund {shown}")
    expect(bob.page.locator("#queue-list pre")).to_have_text(f'issue_refund {{\n "order_id": "{shown}",\n "amount": 79\n}}')
    bob.page.locator("#queue-list a").click()
    expect(bob.page.locator("#approval")).to_be_visible()
    expect(bob.page.locator("#unseen")).to_be_visible()  # and the panel says to look closely
    expect(bob.story()).to_have_text([f"asked: refund {shown}",
                                      f'→ issue_refund {{"order_id": "{shown}", "amount": 79}}   (pay)'])
    box = bob.page.input_value("#args")  # the escapes, and still the same JSON
    assert f'"{shown}"' in box and json.loads(box) == {"order_id": hidden, "amount": 79}
    svg = h.api("bob", "GET", f"/sessions/{sid}/picture")
    for text in (bob.page.inner_text("body"), alice.page.inner_text("body"), box, svg):
        assert not set(hidden) & set(text) - set("A1234")
    bob.page.click("#approve")  # as asked: what he read is what is booked
    expect(bob.story().nth(2)).to_have_text(f'bob approved issue_refund {{"order_id": "{shown}", "amount": 79}}')
    expect(bob.status).to_have_text(f"bob approved issue_refund. {DONE}")
    assert h.refunds() == [(hidden, 79)]


def test_a_reply_with_no_move_shows_what_was_wrong_as_it_comes_and_after_a_reload(host, person):
    go_on = threading.Event()

    def brain(ctx, tools):  # no move first; then, once the test has looked, an answer
        if len(ctx) == 1:
            return Action(None, reasoning="your reply was cut off at 200 tokens")
        go_on.wait(120)
        return Action("final_answer", {"answer": "shorter now"}, "again, briefly")

    h = host(lambda db: Agent(brain, [final_answer], name="support"), lease=300)
    alice = person(h)
    alice.start("go")
    story = ["asked: go", "no move: your reply was cut off at 200 tokens"]
    expect(alice.story()).to_have_text(story)  # as it came, while the brain thinks again
    expect(alice.status).to_have_text("The agent is working…")
    expect(alice.problem).to_have_text("")
    go_on.set()
    story += ['→ final_answer {"answer": "shorter now"}   (again, briefly)', "← final_answer: shorter now"]
    expect(alice.story()).to_have_text(story)
    expect(alice.status).to_have_text(DONE)
    assert alice.page.locator("#story li.error").count() == 1
    alice.page.reload()
    expect(alice.story()).to_have_text(story)


def test_a_tools_progress_shows_on_one_line_written_over_as_it_comes(host, person):
    step = threading.Semaphore(0)

    def copy_files(count: int) -> str:
        """Copy some files, a step each time the test lets it."""
        for i in range(1, count + 1):
            step.acquire(timeout=120)
            report(i, count, f"copying <b>file {i}</b>")
        return f"copied {count} files"
    brain = scripted(Action("copy_files", {"count": 2}, "copy them"), Action("final_answer", {"answer": "copied"}))
    h = host(lambda db: Agent(brain, [as_tool(copy_files), final_answer], name="support"), lease=300)
    alice = person(h)
    alice.start("copy")
    step.release()
    expect(alice.page.locator("#story li.progress")).to_have_text("… 1 of 2: copying <b>file 1</b>")
    expect(alice.status).to_have_text("The agent is working…")  # a report is no stop
    step.release()
    expect(alice.page.locator("#story li.progress")).to_have_text("… 2 of 2: copying <b>file 2</b>")
    assert alice.page.locator("b").count() == 0  # a tool's words are text
    # when the run ends, the story is the notebook: a report is no note
    expect(alice.story()).to_have_text(["asked: copy", '→ copy_files {"count": 2}   (copy them)',
                                        "← copy_files: copied 2 files", '→ final_answer {"answer": "copied"}',
                                        "← final_answer: copied"])
    expect(alice.status).to_have_text(DONE)


def test_the_brains_words_show_as_they_come(host, person):
    go_on = threading.Event()

    def brain(ctx, tools):  # says a word, then waits for the test before it says the rest
        thinking("let me <b>think</b>")
        go_on.wait(120)
        thinking(" about it")
        return Action("final_answer", {"answer": "thought it over"}, "done thinking")

    # a lease longer than the test: while the brain waits, the session stays taken however slow the machine
    h = host(lambda db: Agent(brain, [final_answer], name="support"), lease=300)
    alice = person(h)
    sid = alice.start("think")
    # the first words are on the page while the brain is still thinking
    expect(alice.page.locator("#story li.thinking")).to_have_text("let me <b>think</b>")
    expect(alice.status).to_have_text("The agent is working…")
    assert alice.page.locator("b").count() == 0  # the brain's words are text too
    # the same link in a second tab: the notebook so far, and no second run while this one streams
    second = person(h, session=sid)
    expect(second.status).to_have_text("A run is streaming on this session elsewhere: the page shows it when it ends.")
    expect(second.story()).to_have_text(["asked: think"])
    second.page.fill("#text", "and another thing")
    second.page.click("text=Send")
    expect(second.problem).to_have_text("A run is streaming on this session: wait for it to end.")
    second.said()
    go_on.set()
    # and when the run ends, the story is the notebook (the thinking was the brain's, not a note); the
    # second tab looks again while the run streams elsewhere, so it shows it too
    story = ["asked: think", '→ final_answer {"answer": "thought it over"}   (done thinking)',
             "← final_answer: thought it over"]
    expect(alice.story()).to_have_text(story)
    expect(second.story()).to_have_text(story)


# ----------------------------------------------------------------------------
# what waits, and what went wrong, always in sight; nothing stale

def long_office(db):
    """22 quick steps, then a wire of six arguments that needs approval."""
    @as_tool
    def tick() -> str:
        """A quick turn."""
        return "tick"

    @as_tool(needs_approval=True)
    def wire(to: str, amount: float, memo: str, account: str, bank: str, when: str) -> str:
        """Wire money."""
        return f"wired {amount} to {to}"
    args = {"to": "ACME", "amount": 12.5, "memo": "for the parts " * 12, "account": "DE89 3704 0044",
            "bank": "COBADEFFXXX", "when": "today"}
    policy = scripted(*[Action("tick", {})] * 22, Action("wire", args, "pay the supplier"),
                      Action("final_answer", {"answer": "paid"}))
    return Agent(policy, [tick, wire, final_answer], max_steps=30, name="support")


def test_after_a_long_run_the_verdict_and_the_errors_are_on_the_first_screen(host, person):
    h = host(long_office)
    sid = h.asked(text="pay ACME")
    bob = person(h, "bob", session=sid, viewport={"width": 900, "height": 800})
    expect(bob.story()).to_have_count(1 + 2 * 22 + 1)
    expect(bob.page.locator("#approval")).to_be_in_viewport()  # 22 steps, and the verdict waits on top
    box = bob.page.locator("#args")  # as tall as its six arguments: none is below its fold
    assert box.evaluate("b => b.scrollHeight <= b.clientHeight + 1") and "when" in box.input_value()
    bob.page.mouse.wheel(0, 10_000)  # down at the end of the story, an error still shows
    bob.page.evaluate("document.getElementById('args').value = '{'")
    bob.page.evaluate("document.getElementById('approve').click()")
    expect(bob.problem).to_contain_text("The arguments are not JSON")
    expect(bob.problem).to_be_in_viewport()
    alice = person(h, session=sid, viewport={"width": 900, "height": 800})
    expect(alice.page.locator("#waits")).to_be_in_viewport()


def test_back_during_another_sessions_run_shows_nothing_of_it_under_the_first(host, person):
    release = threading.Event()

    @as_tool
    def look_up_order(order_id: str) -> str:
        """Look up an order."""
        return "the other session's order"

    def brain(ctx, tools):  # "slow": waits for the test, looks the order up, then asks for a refund
        question = next(m.content for m in reversed(ctx.messages) if m.kind == "question")
        if question == "slow" and ctx.last().kind == "question":
            release.wait(60)
            return Action("look_up_order", {"order_id": "A1234"}, "looking")
        if question == "slow":
            return Action("issue_refund", {"order_id": "A1234", "amount": 79}, "it qualifies")
        return Action("final_answer", {"answer": f"about {question}"}, "answered")
    h = host(lambda db: Agent(brain, [look_up_order, ledger_refund(db), final_answer], name="support"), lease=300)
    alice = person(h)
    first = alice.start("quick")
    expect(alice.status).to_have_text(DONE)
    story = ["asked: quick", '→ final_answer {"answer": "about quick"}   (answered)', "← final_answer: about quick"]
    second = alice.start("slow")  # it runs, and alice goes back to the first session meanwhile
    expect(alice.status).to_have_text("The agent is working…")
    alice.page.go_back()
    assert alice.page.evaluate("location.hash") == f"#{first}"
    expect(alice.story()).to_have_text(story)
    release.set()
    deadline = time.monotonic() + 60
    while not h.api("alice", "GET", f"/sessions/{second}")["pending"] and time.monotonic() < deadline:
        time.sleep(0.05)  # until the other run has paused, its refund waiting
    alice.page.wait_for_timeout(300)  # its last events reached this page by now, and were dropped
    expect(alice.story()).to_have_text(story)  # no line of the other run's, no panel of its refund
    assert "the other session's order" not in alice.page.inner_text("body")
    expect(alice.page.locator("#waits")).to_be_hidden()
    expect(alice.page.locator("#approval")).to_be_hidden()
    expect(alice.status).to_have_text(DONE)


def offered_to_bob_twice_and_carol(host, person):
    """A refund that waits for a verdict, offered in two tabs of bob's and in carol's."""
    h = host()
    sid = h.asked()
    tabs = [person(h, name, session=sid) for name in ("bob", "bob", "carol")]
    for someone in tabs:
        offered(someone)
    return h, *tabs


def decided_by_someone_else(carol):
    """What an approver sees once another decided: the words, and no panel, story or picture left."""
    expect(carol.problem).to_have_text(DECIDED)
    expect(carol.page.locator("#approval")).to_be_hidden()
    expect(carol.story()).to_have_count(0)
    expect(carol.status).to_have_text("")  # not "The agent is working…" for ever
    expect(carol.page.locator("#picture")).to_be_hidden()


def test_after_a_409_or_a_404_the_panel_goes_and_the_page_shows_the_session_as_it_is(host, person):
    h, bob, again, carol = offered_to_bob_twice_and_carol(host, person)
    for someone in (again, carol):  # their queues are not looked at again (that shows the verdict: the test below)
        someone.page.route("**/approvals", lambda route: route.abort() if route.request.method == "GET"
                           else route.continue_())
    bob.page.click("#approve")
    expect(bob.status).to_have_text(f"bob approved issue_refund. {DONE}")
    again.page.click("#approve")  # bob's other tab: he has decided already (409)
    expect(again.problem).to_have_text("Nothing here waits for a verdict any more: it was decided, or the run "
                                       "moved on.")
    expect(again.page.locator("#approval")).to_be_hidden()
    expect(again.story()).to_have_text(approved(79))  # the session as it is now
    carol.page.click("#approve")  # carol did not decide it, so it is hers neither to decide nor to see (404)
    decided_by_someone_else(carol)
    for someone in (again, carol):
        someone.said()
    assert h.refunds() == [("A1234", 79)]


def test_when_another_approver_decides_first_the_page_says_so_without_a_click(host, person):
    h, bob, again, carol = offered_to_bob_twice_and_carol(host, person)
    again.page.fill("#reason", "half typed")
    bob.page.click("#approve")
    expect(bob.status).to_have_text(f"bob approved issue_refund. {DONE}")
    # a look at their queues finds it gone: bob's other tab shows what he decided, carol that someone did
    expect(again.page.locator("#approval")).to_be_hidden()
    expect(again.story()).to_have_text(approved(79))
    expect(again.status).to_have_text(f"bob approved issue_refund. {DONE}")
    decided_by_someone_else(carol)
    for someone in (again, carol):
        someone.said()
    assert h.refunds() == [("A1234", 79)]


def test_the_page_carries_out_a_verdict_a_crash_left_behind(host, person):
    h = host()
    sid = h.asked()
    # as the approvals route leaves it when the server dies between saving the verdict and carrying it out
    s = h.server.store.load(sid)
    h.server.store.save(sid, approval.verdict(s.context, h.server.agent.tools["issue_refund"], True, by="bob"),
                        s.version)
    alice = person(h, session=sid)
    expect(alice.story()).to_have_text(approved(79))
    expect(alice.status).to_have_text(f"bob approved issue_refund. {DONE}")
    assert h.refunds() == [("A1234", 79)]
    alice.page.fill("#text", "thanks!")  # and a new message goes in, no 409
    alice.page.click("text=Send")
    expect(alice.status).to_have_text(DONE)
    expect(alice.story()).to_have_count(len(approved(79)) + 5)  # asked, looked up (no order), answered


def test_when_the_server_stops_mid_run_the_page_says_so_in_its_own_words(tmp_path, person):
    (tmp_path / "gates").mkdir()
    users = {"alice": {"token": USERS["alice"], "roles": ["asks"]}}
    (tmp_path / "users.json").write_text(json.dumps(users))
    env = {**os.environ, "HOST_GATES": str(tmp_path / "gates"), "MICROAGENT_HOST_SECRET": "the page test's secret, 32 bytes",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen([sys.executable, "-m", "microagent.host", "--port", "0", "--users", "users.json",
                             "--office", "host_offices:gated_office"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    try:
        url = proc.stdout.readline().split(" ")[2]
        (tmp_path / "gates" / "block-before-check_policy").touch()
        alice = person(types.SimpleNamespace(url=url))
        alice.start()
        expect(alice.story()).to_have_count(3)  # the lookup came; check_policy is held at the gate
        proc.send_signal(signal.SIGKILL)
        expect(alice.problem).to_have_text(LOST)  # not "Failed to fetch", nor "network error"
        alice.said()
    finally:
        proc.kill()
        proc.wait(60)
        proc.stdout.close()


# ----------------------------------------------------------------------------
# runs that outlive their request, and events that resume

class Relay:
    """A TCP relay in front of the host whose connections the test cuts, as a proxy's idle timeout, a
    phone that sleeps or a closed laptop does; a connection made after the cut is relayed again."""

    def __init__(self, port: int):
        self.port, self.pairs, self.lock = port, [], threading.Lock()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/"
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                near = self.listener.accept()[0]
            except OSError:  # closed: the test is over
                return
            far = socket.create_connection(("127.0.0.1", self.port))
            with self.lock:
                self.pairs.append((near, far))
            for a, b in ((near, far), (far, near)):
                threading.Thread(target=self.pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def pipe(a, b):
        try:
            while data := a.recv(65536):
                b.sendall(data)
            b.shutdown(socket.SHUT_WR)
        except OSError:  # cut
            pass

    def cut(self):
        """Drop every connection relayed so far, both ends at once."""
        with self.lock:
            pairs, self.pairs = self.pairs, []
        for pair in pairs:
            for end in pair:
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)
                end.close()

    def close(self):
        self.cut()
        self.listener.close()


def test_alice_leaves_mid_run_comes_back_after_it_paused_and_follows_bobs_approval_given_on_the_page(host, person):
    entered, go = threading.Event(), threading.Event()
    h = host(gated_refund_office(entered, go))
    sid = h.api("alice", "POST", "/sessions", {})["id"]
    alice = Listener(h.port, "POST", f"/sessions/{sid}/messages", USERS["alice"],
                     {"text": QUESTION, "on_disconnect": "continue"})
    assert alice.next()[:2] == (2, "result")
    assert entered.wait(60)
    alice.leave()  # mid-run: check_policy is still working
    go.set()
    bob = person(h, "bob")
    expect(bob.page.locator("#queue-list li")).to_have_count(1)  # it went on, and paused for an approver
    back = Listener(h.port, "GET", f"/sessions/{sid}/events", USERS["alice"], headers={"Last-Event-ID": "2"}).rest()
    assert [(i, n) for i, n, _ in back] == [(4, "result"), (6, "approval_required")]
    assert back[-1][2]["waits_for"] == "an approver"
    opens_from_the_queue(bob, sid)
    bob.page.click("#approve")
    expect(bob.status).to_have_text(f"bob approved issue_refund. {DONE}")
    rest = Listener(h.port, "GET", f"/sessions/{sid}/events", USERS["alice"], headers={"Last-Event-ID": "6"}).rest()
    assert [(i, n) for i, n, _ in rest] == [(7, "result"), (9, "result"), (10, "done")]
    assert rest[-1][2]["answer"] == "Good news, A1234 qualifies. I refunded $79 to your card, here in 3 to 5 days."


def test_an_eventsource_in_the_browser_resumes_after_the_connection_drops_and_stops_at_the_end(host, person):
    entered, go = threading.Event(), threading.Event()
    h = host(gated_refund_office(entered, go))
    relay = Relay(h.port)
    try:
        sid = h.api("alice", "POST", "/sessions", {})["id"]
        run = Listener(h.port, "POST", f"/sessions/{sid}/messages", USERS["alice"],
                       {"text": QUESTION, "on_disconnect": "continue"})
        assert entered.wait(60)
        token = h.api("alice", "GET", f"/sessions/{sid}")["events_token"]  # an EventSource sends no header
        page = person(types.SimpleNamespace(url=relay.url)).page  # the page's origin, through the relay
        page.evaluate("""([sid, token]) => {
            window.got = [];
            window.source = new EventSource(`/sessions/${sid}/events?token=${token}`);
            for (const name of ["result", "approval_required", "done", "error", "stopped"]) {
              // the server's events hold data; the browser's own "error" (a drop) has none
              source.addEventListener(name, (e) => e.data && got.push([e.lastEventId, name]));
            }
        }""", [sid, token])
        page.wait_for_function("() => got.length === 1")  # look_up_order's result
        relay.cut()  # the server's side is gone: the browser reconnects by itself, with Last-Event-ID
        page.wait_for_function("() => source.readyState === EventSource.CONNECTING")
        go.set()
        page.wait_for_function("() => got.length === 3")
        # once it has every event the server answers 204, and an EventSource stops asking
        page.wait_for_function("() => source.readyState === EventSource.CLOSED")
        assert page.evaluate("got") == [["2", "result"], ["4", "result"], ["6", "approval_required"]]
        assert [(i, n) for i, n, _ in run.rest()] == [(2, "result"), (4, "result"), (6, "approval_required")]
    finally:
        relay.close()


def test_the_page_reconnects_by_itself_after_a_drop_and_says_so(host, person):
    entered, go = threading.Event(), threading.Event()
    h = host(gated_refund_office(entered, go))
    relay = Relay(h.port)
    try:
        alice = person(types.SimpleNamespace(url=relay.url))
        alice.start()
        assert entered.wait(60)
        expect(alice.story()).to_have_count(3)  # the question, and the lookup; check_policy works
        relay.cut()
        expect(alice.status).to_have_text("Reconnected: the run goes on where the page lost it.")
        go.set()
        waits_for_an_approver(alice)  # the rest of the run came over the new connection
        expect(alice.problem).to_have_text("")
        alice.said()
    finally:
        relay.close()


# ----------------------------------------------------------------------------
# the README's screenshot

def screenshot(path: str) -> None:
    """Bob's page: his queue of two refunds, and the first one open with its story and picture."""
    with tempfile.TemporaryDirectory() as folder, sync_api.sync_playwright() as playwright:
        h, browser = Host(pathlib.Path(folder) / "host.db"), launch(playwright)
        sid = h.asked()
        h.asked("dan", "My order A1234 came broken too: can I get my money back?")
        bob = Person(browser, h.url, "bob")
        expect(bob.page.locator("#queue-list li")).to_have_count(2)
        opens_from_the_queue(bob, sid)
        bob.page.wait_for_function("document.getElementById('picture').naturalWidth > 500")
        bob.page.evaluate("scrollTo(0, 0)")  # the status line sticks to the top of the window: put it there
        bob.page.screenshot(path=path, full_page=True)
        browser.close()
        h.close()


if __name__ == "__main__":
    screenshot(sys.argv[1])
