// The page for the people who ask and who approve: microagent.host's protocol, spoken with fetch(). The story is
// the session's notebook, a line per note: a run's events add lines as they stream in, and when it ends the
// notebook is read again. What a person, the brain or a tool wrote goes in as text, never markup.
const $ = (id) => document.getElementById(id);
const POLL = 1500;     // ms between two looks at what someone else may change: a session, the queue
const TRIES = 5;       // times the page reconnects to a run's events after a drop, a second apart
let token = sessionStorage.getItem("token") || "";  // this tab's memory only: never in the address
let me = null;         // who the token says we are: {user, roles, approves_own}
let view = 0;          // counts the sessions opened: what comes late for one opened before is dropped
let sid = "";          // the session, from the address's #fragment (which the browser never sends)
let shown = -1;        // the index in the notebook of the story's last line
let notes = [];        // the notes the story shows, so a verdict can say what it changed
let seen = "";         // what the story was drawn from: drawn again only when the session changed
let waiting = null;    // the decision that waits for our verdict: {tool, args, call, approval_token, asker}
let asked = "";        // the arguments as the box first showed them
let thinking = null;   // the line the brain's words stream into, while they come
let working = null;    // the line a tool's progress shows on, written over as it comes
let busy = false;      // a run streams to this page
let watching = 0;      // the timer that looks at a session again while it waits for someone else

// What a note says, as the story shows it: a line break starts a line marked "|" (no note can print a line
// that passes for another's), and what prints as nothing or moves other text shows as its escape: a control,
// half a character, a format character (U+200B makes A12\u200b34 read A1234; U+202E shows $97 as $79) and
// the rest Unicode calls default-ignorable. The box of arguments escapes them too (and the breaks JSON
// leaves as they are): still JSON, and what the approver reads is what is carried out.
const SHOWN = /(\r\n|[\n\r\v\f\x1c-\x1e\x85\u2028\u2029])|(?!\t)[\p{Cc}\p{Cs}\p{Cf}\p{DI}]/gu;
const UNSEEN = /(?!\n)[\p{Cc}\p{Cf}\p{DI}\u2028\u2029]/gu;  // the \n JSON.stringify writes lays it out
const escaped = (c) => c.split("").map((u) => "\\u" + u.charCodeAt(0).toString(16).padStart(4, "0")).join("");
const plain = (text) => String(text).replace(SHOWN, (c, wrap) => (wrap ? "\n  | " : escaped(c)));
const json = (value, indent) => JSON.stringify(value, null, indent).replace(UNSEEN, escaped);

function line(kind, text) {
  const li = document.createElement("li");
  li.className = kind;
  li.textContent = plain(text);  // subtle: never innerHTML: a tool may return "<img src=x onerror=...>"
  return $("story").appendChild(li);
}

function add(m, at) {  // note number `at` of the notebook, as a line of the story
  const args = typeof m.args === "string" || m.args == null ? m.args : json(m.args);
  const before = notes[at - 1];
  if (m.role === "user" && !m.tool) line("question", `asked: ${m.content}`);
  else if (m.role === "user" && m.args) {
    const edit = before && before.args && before.args !== args ? ` (it asked for ${before.args})` : "";
    line("verdict", `${m.name} approved ${m.tool} ${args}${edit}`);
  } else if (m.role === "user") line("verdict", `${m.name} denied ${m.tool}: ${m.content}`);
  else if (m.tool) line("call", `→ ${m.tool} ${args}` + (m.content ? `   (${m.content})` : ""));
  else if (m.role === "tool") line(m.error ? "error" : "result", `← ${m.name}: ${m.content}`);
  else line(m.error ? "error" : "note", (m.error ? "no move: " : "") + m.content);  // a remark, or no move
  notes[at] = {...m, args};
  shown = at;
}

// what the page is doing, and what went wrong (in words for the person reading, never a route's name)
const tell = (text) => { $("status").textContent = text; };
const warn = (text) => { $("problem").textContent = text; };
const buttons = (on) => document.querySelectorAll("button").forEach((b) => { b.disabled = !on; });
const may = (role) => Boolean(me && me.roles.includes(role));
const LOST = "The server can't be reached (it may have stopped). What was done is kept: reload the page once "
  + "it is back.";
const DECIDED = "Someone else has decided this already, or it is gone: it is no longer yours to decide.";

function words(response, error, path = "") {  // a refusal, for the person at the page
  const status = response.status;
  if (status === 401) return "This server does not know that token: paste the one you were given.";
  if (status === 404 && path.endsWith("/approvals")) return DECIDED;
  if (status === 404) return "There is no such session, or it is not yours to open.";
  if (status === 429) return `Too many requests: try again in ${response.headers.get("Retry-After")} seconds.`;
  if (status >= 500 || !error) return "The server failed (it wrote down why): try again, or tell whoever runs it.";
  return error[0].toUpperCase() + error.slice(1) + ".";  // the server's words say what to do
}

async function call(method, path, body) {  // one request: its JSON answer, or the Response of a stream
  const headers = {Authorization: `Bearer ${token}`, "Content-Type": "application/json"};
  const response = await fetch(path, {method, headers, body: body && JSON.stringify(body)})
    .catch(() => { throw new Error(LOST); });  // fetch itself says only "Failed to fetch"
  if (response.ok && response.headers.get("Content-Type") === "text/event-stream") return response;
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw Object.assign(new Error(words(response, data.error, path)), {status: response.status});
  return data;
}

async function signIn() {  // who the token says we are, and what the page offers them
  me = null;
  $("me").textContent = "";
  $("queue").hidden = $("ask").hidden = $("new").hidden = true;
  if (!token) return;
  me = await call("GET", "/me");
  const both = may("asks") && may("approves");
  $("me").textContent = `You are ${me.user}: you ` + (both ? "ask, and approve " + (me.approves_own ? "any request"
    : "others' requests") : may("asks") ? "ask, and an approver decides" : "approve others' requests") + ".";
  $("ask").hidden = $("new").hidden = !may("asks");
  $("queue").hidden = !may("approves");
}

async function queue() {  // the decisions across sessions that wait for this approver, in full
  if (!may("approves")) return [];
  const {waiting: items} = await call("GET", "/approvals");
  // subtle: only what changed goes out or comes in, so a look every few seconds never takes the keyboard's
  // place away (a list drawn anew would drop the focus to the page's top)
  const list = $("queue-list"), keys = items.map((w) => `${w.session} ${w.call}`);
  [...list.children].filter((li) => !keys.includes(li.dataset.key)).forEach((li) => li.remove());
  items.forEach((w, i) => {
    const li = [...list.children].find((old) => old.dataset.key === keys[i]) || entry(w, keys[i]);
    if (list.children[i] !== li) list.insertBefore(li, list.children[i] || null);
    li.className = w.session === sid ? "open" : "";
  });
  $("queue-empty").hidden = items.length > 0;
  return items;
}

function entry(w, key) {  // a line of the queue: who asks what (a link to it), and the call in full
  const li = document.createElement("li"), open = document.createElement("a");
  const args = document.createElement("pre");
  open.href = `#${w.session}`;  // opens its story and picture
  open.textContent = plain(`${w.asker} asks: ${w.question}`);
  args.textContent = `${plain(w.tool)} ${json(w.args, 1)}`;
  li.dataset.key = key;
  li.append(open, args);
  return li;
}

async function drawing() {  // the run drawn as a picture, fetched with the token: a blob, or null
  const response = await fetch(`/sessions/${sid}/picture`, {headers: {Authorization: `Bearer ${token}`}});
  return response.ok ? response.blob() : null;
}

function unpicture() {
  if ($("picture").src) URL.revokeObjectURL($("picture").src);
  $("picture").removeAttribute("src");
  $("picture").hidden = true;
}

async function refresh(mine) {  // the session as it is now: its story and picture, and what waits, for whom
  const session = await call("GET", `/sessions/${sid}`);
  const now = JSON.stringify([session.notebook.messages.length, session.running, session.pending]);
  if (mine !== view || (now === seen && !busy)) return mine === view ? watch(session, mine) : null;
  const mayRule = may("approves") && (session.asker !== me.user || me.approves_own);
  const offered = session.pending && mayRule && (await queue()).find((w) => w.session === sid);
  const svg = await drawing();
  if (mine !== view) return null;
  // subtle: from here on nothing awaits, so the page changes all at once: no click, no other look at the
  // session, ever finds the panel hidden or the decision gone half way through
  seen = now;
  $("story").replaceChildren();
  notes = [];
  thinking = working = null;
  session.notebook.messages.forEach(add);
  $("session").textContent = session.asker === me.user ? `Your session ${sid}` : `Session ${sid}, `
    + `asked by ${session.asker}`;
  unpicture();
  if (svg) {
    $("picture").src = URL.createObjectURL(svg);  // subtle: an image, so no script in it could run
    $("picture").hidden = false;
  }
  const before = waiting;
  waiting = null;
  $("approval").hidden = !offered;
  $("waits").hidden = true;
  if (session.running) tell("A run is streaming on this session elsewhere: the page shows it when it ends.");
  else if (offered) offer(offered, before);
  else if (session.pending && session.asker === me.user) waits(session.pending);
  else if (session.pending) tell("This waits for someone else's verdict.");
  else tell(ended(session));
  return watch(session, mine);
}

function ended(session) {  // how a session stands once nothing runs: the last verdict, and why it stopped
  const last = notes.findLastIndex((m) => m && m.role === "user");
  const ruled = last >= 0 && notes[last].tool ? notes[last] : null;  // the latest verdict, if no question since
  const verdict = !ruled ? "" : ruled.args ? `${ruled.name} approved ${ruled.tool}. `
    : `${ruled.name} said no to ${ruled.tool}: ${plain(ruled.content)}. `;
  const stopped = {done: "Done: the agent answered.", out_of_steps: "The agent ran out of steps.",
    paused: "A verdict is saved but not carried out yet."}[session.stopped];
  return verdict + (stopped || (shown < 0 ? "Ready: ask the agent something." : "Ready."));
}

function watch(session, mine) {  // while it waits for someone else, or runs elsewhere, look again in a while
  clearTimeout(watching);
  if (session.running || (session.pending && !waiting)) {
    watching = setTimeout(() => refresh(mine).catch((error) => { if (mine === view) warn(error.message); }), POLL);
  }
  return session;
}

function offer(w, before) {  // the decision that waits for our verdict, in the panel above the story
  waiting = w;
  $("approval").hidden = false;
  tell(plain(`${w.tool} waits for your verdict.`));
  if (before && before.session === w.session && before.call === w.call) return;  // keep what was typed
  $("tool").textContent = plain(w.tool);
  $("asker").textContent = w.asker === me.user ? "(your own request)" : `(asked by ${w.asker})`;
  $("args").value = asked = json(w.args, 1);
  $("unseen").hidden = asked === JSON.stringify(w.args, null, 1);  // nothing in them was written as an escape
  $("reason").value = "";
  grow();
  $("args").focus();  // in sight, and where the keyboard is
}

function grow() {  // the box as tall as its arguments, so none is below its fold (up to most of the screen)
  $("args").style.height = "auto";
  $("args").style.height = `${$("args").scrollHeight + 4}px`;
}

function waits(pending) {  // our request, waiting for an approver: the page looks again until the verdict comes
  $("waits-what").textContent = plain(`${pending.tool} ${json(pending.args)}`);
  $("waits").hidden = false;
  tell("Your request waits for an approver: the verdict shows here when it comes.");
}

async function stream(route, body, accepted) {  // POST, then show each event of the run as it arrives
  const mine = view;
  busy = true;
  buttons(false);
  $("stop").hidden = $("stop").disabled = false;
  tell("The agent is working…");
  warn("");
  try {
    // the run goes on if the connection drops (a phone that sleeps, a proxy): the page comes back for it
    const response = await call("POST", `/sessions/${sid}/${route}`, {...body, on_disconnect: "continue"});
    if (accepted && mine === view) accepted();  // the server took the request, and wrote its note first
    let heard = await events(response, mine, shown);  // the story so far has the notes up to `shown`
    for (let tries = 1; heard.dropped && tries <= TRIES && mine === view; tries++) {
      tell(`The connection dropped: reconnecting to the run (${tries} of ${TRIES})…`);
      await new Promise((done) => setTimeout(done, 1000));
      const headers = {Authorization: `Bearer ${token}`, "Last-Event-ID": String(heard.last)};
      const again = await fetch(`/sessions/${sid}/events`, {headers}).catch(() => null);
      if (again && again.status === 204) heard = {stopped: true};  // nothing more: it ended meanwhile
      else if (again && again.ok) {
        tell("Reconnected: the run goes on where the page lost it.");
        tries = 0;
        heard = await events(again, mine, heard.last);
      } else if (again) {  // refused (a 404, say): the session as it is says the rest
        heard = {stopped: false};
        break;
      }
    }
    if (mine !== view) return;
    if (heard.dropped) throw new Error(LOST);
    if (!heard.stopped) warn("The run stopped before it said why: Resume goes on where it stopped.");
    busy = false;
    seen = "";  // drawn again from the notebook, whatever the stream said
    await refresh(mine);
  } catch (error) {  // a refusal, or the server gone mid-run
    if (mine !== view) return;
    warn(error.message);
    tell("");  // nothing works for us now: the session as it is says how it stands, if we may see it
    busy = false;
    seen = "";  // after a 409, say, the session as it is now, the panel gone; after a 404, nothing of it
    await refresh(mine).catch((gone) => { if (gone.status === 404 && mine === view) blank(); });
  } finally {
    if (mine === view) {
      busy = false;
      buttons(true);
      $("stop").hidden = true;
    }
  }
}

async function events(response, mine, last) {  // a stream's events shown as they come: {stopped, last, dropped}
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let rest = "", stopped = false;
  try {
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) {
      const blocks = (rest + chunk.value).split("\n\n");
      rest = blocks.pop();  // subtle: the network may cut an event in two; keep its start for later
      for (const block of blocks.filter(() => mine === view)) {  // another session open: this run goes unseen
        const id = block.match(/^id: (.*)$/m);  // the event's id: where to come back to after a drop
        if (id) last = Number(id[1]);
        stopped = event(block.match(/^event: (.*)$/m)[1], JSON.parse(block.match(/^data: (.*)$/m)[1])) || stopped;
      }
    }
  } catch (error) {  // the connection dropped ("network error"): the run may go on without us
  }
  return {stopped, last, dropped: !stopped};  // it ended before saying why: come back to hear it
}

function event(name, data) {  // one server-sent event; true if it says why the run stopped
  if (name === "thinking") {  // the brain's words as they come: no note (the notebook keeps its decision)
    thinking = thinking || line("thinking", "");
    thinking.textContent += plain(data.text);
    return false;
  }
  if (name === "progress") {  // how far a tool has got: no note either, one line written over
    working = working || line("progress", "");
    const of = data.total == null ? "" : ` of ${data.total}`;
    working.textContent = plain(`… ${data.done}${of}` + (data.message ? `: ${data.message}` : ""));
    return false;
  }
  thinking = working = null;
  if (name === "result") {
    const decision = {role: "assistant", tool: data.tool, args: data.args, content: data.reasoning};
    if (data.at - 1 > shown) add(decision, data.at - 1);  // after a verdict, the story has it already
    add({role: "tool", name: data.tool, content: data.content, error: data.error}, data.at);
    return false;
  }
  if (name === "no_move") {  // the brain's reply held no move: the note says what was wrong
    add({role: "assistant", content: data.note, error: true}, data.at);
    return false;
  }
  if (name === "approval_required") {
    if (data.call > shown) add({role: "assistant", tool: data.tool, args: data.args}, data.call);
  } else if (name === "done") tell("Done: the agent answered.");
  else if (name === "out_of_steps") warn(`The agent ran out of steps: ${plain(data.note)}`);
  else if (name === "cancelled" || name === "stopped") warn("The run was cancelled: Resume goes on where it stopped.");
  else warn(data.error ? words({}, data.error) : `The run stopped: ${name}.`);  // "error", in generic words
  return true;
}

function decided(mine) {  // someone else ruled on what we were to decide: the session as it is, if still ours
  seen = "";
  return refresh(mine).catch((error) => {
    if (mine !== view) return;
    if (error.status === 404) blank();  // and no longer ours to see
    warn(error.status === 404 ? DECIDED : error.message);
  });
}

function blank() {  // no story, no picture, no panel: nothing of a session shown
  clearTimeout(watching);
  shown = -1;
  notes = [];
  seen = "";
  waiting = thinking = working = null;
  tell("");
  $("story").replaceChildren();
  unpicture();
  $("approval").hidden = $("waits").hidden = true;
}

async function open() {  // the session in the address: its story and picture, and what waits, for whom
  const mine = ++view;
  blank();
  sid = location.hash.slice(1);
  busy = false;
  buttons(true);
  $("stop").hidden = true;  // a run of the session opened before streams unseen: not ours to stop here
  $("session").textContent = sid ? `Session ${sid}` : "No session open";
  warn("");
  if (!sid) return tell(may("asks") ? "Start a session to ask the agent (New session)." : "");
  if (!/^[\w-]+$/.test(sid)) return warn("That address names no session: an id is letters, digits, - and _.");
  if (!me) return tell("Paste your token above to open this session.");
  try {
    const session = await refresh(mine);
    const last = session && session.notebook.messages.at(-1);
    const left = last && last.role === "user" && last.tool;  // a verdict a crash left, not carried out yet
    if (left && !session.running && (session.asker === me.user || last.name === me.user)) {
      await stream("resume", {});
    }
  } catch (error) {
    if (mine === view) warn(error.message);
  }
}

function verdict(approve, extra, note) {  // send the verdict on what waits, then stream the rest
  const w = waiting;
  stream("approvals", {approval_token: w.approval_token, approve, ...extra}, () => {
    $("approval").hidden = true;
    waiting = null;
    add({role: "user", name: me.user, tool: w.tool, ...note}, w.call + 1);
    $("session").focus();  // the panel is gone: the keyboard stays on the session, not the page's top
  });
}

async function start() {  // a token: who it is, their queue, and the session in the address
  try {
    await signIn();
    await queue();
  } catch (error) {
    me = null;
    return warn(error.message);
  }
  await open();
}

$("login").onsubmit = (e) => {
  e.preventDefault();
  token = $("token").value.trim();
  sessionStorage.setItem("token", token);
  start();
};
$("new").onclick = () => call("POST", "/sessions", {})
  .then((session) => { location.hash = session.id; })  // the hashchange opens it
  .catch((error) => warn(error.message));
$("ask").onsubmit = (e) => {
  e.preventDefault();
  if (!sid) return warn("Start a session first: New session.");
  const text = $("text").value;
  stream("messages", {text}, () => {
    $("text").value = "";
    add({role: "user", content: text}, shown + 1);
  });
};
$("resume").onclick = () => (sid ? stream("resume", {}) : warn("Start a session first: New session."));
$("stop").onclick = () => call("POST", `/sessions/${sid}/cancel`, {})  // heard before its next step
  .then(() => tell("Stopping the run…")).catch((error) => warn(error.message));
$("approve").onclick = () => {  // the arguments in the box, whatever they are: what you see is what you approve
  let args;
  try {
    args = JSON.parse($("args").value);
  } catch (error) {  // JSON.parse's; the server checks what the arguments mean
    return warn(`The arguments are not JSON: ${error.message}`);
  }
  const edited = $("args").value !== asked;  // unchanged: the call exactly as the agent asked it
  verdict(true, edited ? {args} : {}, {args: edited ? JSON.stringify(args) : notes[waiting.call].args});
};
$("denial").onsubmit = (e) => {  // the Deny button, or Enter in the reason
  e.preventDefault();
  const reason = $("reason").value.trim();
  if (reason) verdict(false, {reason}, {content: reason});
  else warn("Say why: the agent reads the reason and tells the customer.");
};
$("args").addEventListener("input", grow);
window.addEventListener("hashchange", open);
setInterval(() => {  // what others asked since; and if what waits for our verdict left the queue, why
  const mine = view, w = waiting;
  const still = (items) => items.some((i) => i.session === w.session && i.call === w.call);
  if (!busy) queue().then((items) => (w && w === waiting && !busy && !still(items) ? decided(mine) : null))
    .catch(() => {});
}, 2 * POLL);
$("token").value = token;
start();
