"""The page for the person who approves, driven in a real headless browser against a real host.

Each test starts microagent.host on 127.0.0.1 (a free port) in this process and
opens its page in Debian's Chromium, driven by Playwright: it types a token,
clicks and reads the page as a person would. Without /usr/bin/chromium (apt-get
install chromium) or the playwright package (the dev extra), the tests skip.

    python tests/test_page.py docs/page_approval.png   # the README's screenshot, mid-approval
"""

import http.client
import json
import os
import pathlib
import re
import sqlite3
import sys
import tempfile
import threading

import pytest

from microagent import Action, Agent, final_answer, scripted
from microagent.host import Server, refund_office, thinking
from microagent.schema import as_tool

CHROMIUM = "/usr/bin/chromium"
if not os.path.exists(CHROMIUM):
    pytest.skip(f"no {CHROMIUM}: install Debian's browser with `apt-get install chromium` (.ci/run does)",
                allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright (in the dev extra)")
expect = sync_api.expect
expect.set_options(timeout=30_000)  # generous: CI is a busy 2-core machine

PAGE = pathlib.Path(__file__).parent.parent / "microagent" / "host"
USERS = {"alice": "alice-token-0123456789", "bob": "bob-token-0123456789"}
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


def answer(text):
    return f'→ final_answer {json.dumps({"answer": text})}   (all set, time to reply to the customer)'


class Host:
    """A real server on a free port, in a thread; the refund office unless told otherwise."""

    def __init__(self, db, office=refund_office, **settings):
        self.db = str(db)
        self.server = Server(office, self.db, USERS, b"s" * 32, quiet=True, **settings)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

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

    def __init__(self, browser, host, user, session=""):
        self.context = browser.new_context(viewport={"width": 900, "height": 700})
        self.page = self.context.new_page()
        self.dialogs, self.urls = [], []
        self.page.on("dialog", lambda dialog: (self.dialogs.append(dialog.message), dialog.dismiss()))
        self.page.on("request", lambda request: self.urls.append(request.url))
        self.page.goto(host.url + (f"#{session}" if session else ""))
        self.page.fill("#token", USERS[user])
        self.page.click("text=Use it")

    def start(self, text=QUESTION) -> str:
        """A new session, a question sent: the session's id."""
        self.page.click("#new")
        expect(self.page.locator("#status")).to_have_text("ready")
        self.page.fill("#text", text)
        self.page.click("text=Send")
        return self.page.evaluate("location.hash").removeprefix("#")

    def story(self):
        return self.page.locator("#story li")

    def close(self):
        self.context.close()


@pytest.fixture
def person(browser):
    made = []

    def arrive(host, user="alice", session="") -> Person:
        made.append(Person(browser, host, user, session))
        return made[-1]
    yield arrive
    for p in made:
        p.close()


def waits_for_refund(alice):
    expect(alice.page.locator("#approval")).to_be_visible()
    expect(alice.page.locator("#tool")).to_have_text("issue_refund")
    assert json.loads(alice.page.input_value("#args")) == {"order_id": "A1234", "amount": 79}
    expect(alice.story()).to_have_text(ASKED)
    expect(alice.page.locator("#status")).to_have_text("issue_refund waits for your verdict")


# ----------------------------------------------------------------------------
# the page itself

def test_the_page_is_served_with_headers_that_allow_only_its_own_script(host):
    h = host()
    for path, kind in [("/", "text/html"), ("/page.js", "text/javascript"), ("/page.css", "text/css")]:
        conn = http.client.HTTPConnection("127.0.0.1", h.server.server_address[1], timeout=30)
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
    # what the host's README claims: the page and its script are small enough to read in a sitting
    lines, css = re.search(r"(\d+) lines in all \(and (\d+) of CSS\)", (PAGE / "README.md").read_text()).groups()
    assert sum(len((PAGE / name).read_text().splitlines()) for name in ("page.html", "page.js")) == int(lines)
    assert len((PAGE / "page.css").read_text().splitlines()) == int(css)


# ----------------------------------------------------------------------------
# a person at the page

def test_a_whole_refund_with_an_approval_and_the_story_again_after_a_reload(host, person):
    h = host()
    alice = person(h)
    sid = alice.start()
    waits_for_refund(alice)
    assert h.refunds() == []  # nothing paid before the human says yes
    alice.page.click("#approve")
    done = "Good news, A1234 qualifies. I refunded $79 to your card, here in 3 to 5 days."
    story = ASKED + ['alice approved issue_refund {"order_id": "A1234", "amount": 79}',
                     "← issue_refund: $79 refunded to the original card (receipt R1)",
                     answer(done), f"← final_answer: {done}"]
    expect(alice.story()).to_have_text(story)
    expect(alice.page.locator("#status")).to_have_text("done: the agent answered")
    expect(alice.page.locator("#approval")).to_be_hidden()
    assert h.refunds() == [("A1234", 79)]
    # the session is in the address's fragment, the token in no address the page ever asked for
    assert alice.page.url == h.url + "#" + sid
    assert not any(USERS["alice"] in url for url in alice.urls)
    alice.page.reload()  # the story again, read from the notebook
    expect(alice.page.locator("#status")).to_have_text("ready")
    expect(alice.story()).to_have_text(story)
    assert alice.dialogs == [] and h.refunds() == [("A1234", 79)]
    # and the run drawn as a picture (microagent.picture), loaded as an image with the token
    picture = alice.page.locator("#picture")
    expect(picture).to_be_visible()
    alice.page.wait_for_function("document.getElementById('picture').naturalWidth > 500")
    assert picture.get_attribute("src").startswith("blob:") and not any("picture?" in url for url in alice.urls)


def test_a_denial_needs_a_reason_and_the_agent_reads_it(host, person):
    h = host()
    alice = person(h)
    alice.start()
    waits_for_refund(alice)
    alice.page.click("#deny")  # no reason yet: nothing is sent
    expect(alice.page.locator("#problem")).to_have_text("say why: the agent reads the reason and tells the customer")
    expect(alice.page.locator("#approval")).to_be_visible()
    alice.page.fill("#reason", "the box was opened: send it to the lab first")
    alice.page.click("#deny")
    sorry = "Sorry, I can't refund A1234 right now. A teammate will follow up by email within a day."
    expect(alice.story()).to_have_text(ASKED + [
        "alice denied issue_refund: the box was opened: send it to the lab first",
        "← issue_refund: denied by alice: the box was opened: send it to the lab first",
        f'→ final_answer {json.dumps({"answer": sorry})}   (no refund this time, so tell the customer honestly)',
        f"← final_answer: {sorry}"])
    expect(alice.page.locator("#problem")).to_have_text("")
    assert alice.page.locator("#story li.error").count() == 1  # the denial is an error note, drawn so
    assert h.refunds() == []


def test_edited_arguments_the_server_refuses_show_its_error_then_a_good_edit_goes_through(host, person):
    h = host()
    alice = person(h)
    alice.start()
    waits_for_refund(alice)
    alice.page.fill("#args", '{"order_id": "A1234", "amount": "seventy"}')
    alice.page.click("#edited")
    problem = alice.page.locator("#problem")  # the server's words, after the status
    expect(problem).to_contain_text("amount must be number, not str 'seventy'")
    assert problem.inner_text().startswith("400: ")
    alice.page.fill("#args", '{"order_id": "A1234", "amount": 70')  # the page checks it is JSON at all
    alice.page.click("#edited")
    expect(alice.page.locator("#problem")).to_contain_text("the arguments are not JSON")
    # nothing changed: the same decision waits, the same token still works
    expect(alice.page.locator("#approval")).to_be_visible()
    expect(alice.story()).to_have_text(ASKED)
    alice.page.fill("#args", '{"order_id": "A1234", "amount": 70}')
    alice.page.click("#edited")
    done = "Good news, A1234 qualifies. I refunded $70 to your card, here in 3 to 5 days."
    expect(alice.story()).to_have_text(ASKED + [
        'alice approved issue_refund {"order_id": "A1234", "amount": 70}',
        "← issue_refund: $70 refunded to the original card (receipt R1)",
        answer(done), f"← final_answer: {done}"])
    expect(alice.page.locator("#problem")).to_have_text("")
    assert h.refunds() == [("A1234", 70)]


def test_a_reload_while_a_refund_waits_shows_it_again_and_a_fresh_token_works(host, person):
    h = host()
    alice = person(h)
    alice.start()
    waits_for_refund(alice)
    alice.page.reload()  # the page asks for a fresh token (POST /resume): the old one is gone with the tab
    waits_for_refund(alice)
    alice.page.click("#approve")
    expect(alice.page.locator("#status")).to_have_text("done: the agent answered")
    assert h.refunds() == [("A1234", 79)]


def test_a_second_user_cannot_see_or_approve_the_first_users_session(host, person):
    h = host()
    alice = person(h)
    sid = alice.start()
    waits_for_refund(alice)
    bob = person(h, "bob", session=sid)  # bob has the link, with his own token
    expect(bob.page.locator("#problem")).to_have_text("404: no such session")
    expect(bob.story()).to_have_count(0)
    expect(bob.page.locator("#approval")).to_be_hidden()
    assert "A1234" not in bob.page.inner_text("body") and "issue_refund" not in bob.page.content()
    bob.page.click("#resume")  # and driving it gets the same answer as a session that does not exist
    expect(bob.page.locator("#problem")).to_have_text("404: no such session")
    # alice's refund still waits for alice, untouched
    alice.page.reload()
    waits_for_refund(alice)
    assert h.refunds() == []


def test_a_token_nobody_knows_gets_the_servers_answer_and_nothing_else(host, person):
    h = host()
    eve = person(h)
    eve.page.fill("#token", "not-a-token-anyone-has")
    eve.page.click("text=Use it")
    eve.page.click("#new")
    expect(eve.page.locator("#problem")).to_have_text(
        "401: send Authorization: Bearer <token>, with a token this server knows")
    assert eve.page.evaluate("location.hash") == ""


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
    expect(alice.page.locator("#status")).to_have_text("done: the agent answered")
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
    expect(alice.page.locator("#status")).to_have_text("the agent is working…")
    expect(alice.page.locator("#problem")).to_have_text("")
    go_on.set()
    story += ['→ final_answer {"answer": "shorter now"}   (again, briefly)', "← final_answer: shorter now"]
    expect(alice.story()).to_have_text(story)
    expect(alice.page.locator("#status")).to_have_text("done: the agent answered")
    assert alice.page.locator("#story li.error").count() == 1
    alice.page.reload()
    expect(alice.story()).to_have_text(story)


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
    expect(alice.page.locator("#status")).to_have_text("the agent is working…")
    assert alice.page.locator("b").count() == 0  # the brain's words are text too
    # the same link in a second tab: the notebook so far, and no second run while this one streams
    second = person(h, session=sid)
    expect(second.page.locator("#status")).to_have_text("a run is streaming on this session elsewhere: reload when it ends")
    expect(second.story()).to_have_text(["asked: think"])
    second.page.fill("#text", "and another thing")
    second.page.click("text=Send")
    expect(second.page.locator("#problem")).to_have_text("409: a run is streaming on this session: wait for it to end")
    go_on.set()
    # and when the run ends, the story is the notebook (the thinking was the brain's, not a note)
    story = ["asked: think", '→ final_answer {"answer": "thought it over"}   (done thinking)',
             "← final_answer: thought it over"]
    expect(alice.story()).to_have_text(story)
    second.page.reload()
    expect(second.story()).to_have_text(story)


# ----------------------------------------------------------------------------
# the README's screenshot

def screenshot(path: str) -> None:
    """The page mid-approval: the refund office's run, waiting for alice."""
    with tempfile.TemporaryDirectory() as folder, sync_api.sync_playwright() as playwright:
        h, browser = Host(pathlib.Path(folder) / "host.db"), launch(playwright)
        alice = Person(browser, h, "alice")
        alice.start()
        waits_for_refund(alice)
        alice.page.screenshot(path=path, full_page=True)
        browser.close()
        h.close()


if __name__ == "__main__":
    screenshot(sys.argv[1])
