// The page for the person who approves: microagent.host's protocol, spoken with fetch(). The story is
// the session's notebook, a line per note: a run's events add lines as they stream in, and when it
// ends the notebook is read again. What a person, the brain or a tool wrote goes in as text, never markup.
const $ = (id) => document.getElementById(id);
let token = sessionStorage.getItem("token") || "";  // this tab's memory only: never in the address
let sid = "";          // the session, from the address's #fragment (which the browser never sends)
let shown = -1;        // the index in the notebook of the story's last line
let waiting = null;    // the decision that waits for a verdict: {tool, args, call, approval_token}
let thinking = null;   // the line the brain's words stream into, while they come

function line(kind, text) {
  const li = document.createElement("li");
  li.className = kind;
  li.textContent = text;  // subtle: never innerHTML: a tool may return "<img src=x onerror=...>"
  return $("story").appendChild(li);
}

function add(m, at) {  // note number `at` of the notebook, as a line of the story
  const args = typeof m.args === "string" ? m.args : JSON.stringify(m.args);
  if (m.role === "user" && !m.tool) line("question", `asked: ${m.content}`);
  else if (m.role === "user" && m.args) line("verdict", `${m.name} approved ${m.tool} ${args}`);
  else if (m.role === "user") line("verdict", `${m.name} denied ${m.tool}: ${m.content}`);
  else if (m.tool) line("call", `→ ${m.tool} ${args}` + (m.content ? `   (${m.content})` : ""));
  else if (m.role === "tool") line(m.error ? "error" : "result", `← ${m.name}: ${m.content}`);
  else line(m.error ? "error" : "note", (m.error ? "no move: " : "") + m.content);  // a remark, or no move
  shown = at;
}

// what the page is doing, and what went wrong; and the buttons, off while a run streams
const say = (text, problem = "") => { $("status").textContent = text; $("problem").textContent = problem; };
const buttons = (on) => document.querySelectorAll("button").forEach((b) => { b.disabled = !on; });

async function call(method, path, body) {  // one request: its JSON answer, or the Response of a stream
  const headers = {Authorization: `Bearer ${token}`, "Content-Type": "application/json"};
  const response = await fetch(path, {method, headers, body: body && JSON.stringify(body)});
  if (response.ok && response.headers.get("Content-Type") === "text/event-stream") return response;
  const data = await response.json();
  if (!response.ok) throw new Error(`${response.status}: ${data.error}`);
  return data;
}

async function story() {  // the session's notebook, drawn again as the story, and as a picture
  const session = await call("GET", `/sessions/${sid}`);
  $("story").replaceChildren();
  session.notebook.messages.forEach(add);
  const svg = await fetch(`/sessions/${sid}/picture`, {headers: {Authorization: `Bearer ${token}`}});
  if ($("picture").src) URL.revokeObjectURL($("picture").src);
  $("picture").src = URL.createObjectURL(await svg.blob());  // subtle: an image, so no script in it could run
  $("picture").hidden = false;
  return session;
}

async function stream(route, body, accepted) {  // POST, then show each event of the run as it arrives
  if (!sid) return say("", "start a session first (New session)");
  buttons(false);
  say("the agent is working…");
  try {
    const response = await call("POST", `/sessions/${sid}/${route}`, body);
    if (accepted) accepted();  // the server took the request, and wrote its note first
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let rest = "", stopped = false;
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) {
      const blocks = (rest + chunk.value).split("\n\n");
      rest = blocks.pop();  // subtle: the network may cut an event in two; keep its start for later
      for (const block of blocks) {
        stopped = event(block.match(/^event: (.*)$/m)[1], JSON.parse(block.match(/^data: (.*)$/m)[1]));
      }
    }
    if (!stopped) say("", "the stream ended before the run said why it stopped: Resume goes on");
    await story();
  } catch (error) {
    say("", error.message);
  } finally {
    buttons(true);
  }
}

function event(name, data) {  // one server-sent event; true if it says why the run stopped
  if (name === "thinking") {  // the brain's words as they come: no note (the notebook keeps its decision)
    thinking = thinking || line("thinking", "");
    thinking.textContent += data.text;
    return false;
  }
  thinking = null;
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
    waiting = data;
    $("tool").textContent = data.tool;
    $("args").value = JSON.stringify(data.args, null, 1);
    $("approval").hidden = false;
    say(`${data.tool} waits for your verdict`);
  } else if (name === "done") say("done: the agent answered");
  else if (name === "out_of_steps") say("", `out of steps: ${data.note}`);
  else if (name === "cancelled") say("", "the run was cancelled: Resume goes on");
  else say("", data.error || `the run stopped: ${name}`);  // "error": what failed, in generic words
  return true;
}

async function open() {  // the session in the address: its notebook, and a fresh token for what waits
  sid = location.hash.slice(1);
  $("story").replaceChildren();
  $("approval").hidden = $("picture").hidden = true;
  $("session").textContent = sid ? `session ${sid}` : "no session yet";
  if (!sid) return say("");
  if (!/^[\w-]+$/.test(sid)) return say("", "a session id is letters, digits, - and _");
  if (!token) return say("paste your bearer token to open this session");
  try {
    const session = await story();
    if (session.running) say("a run is streaming on this session elsewhere: reload when it ends");
    else if (session.pending) await stream("resume", {});  // the old token is not kept: ask for one
    else say("ready");
  } catch (error) {
    say("", error.message);
  }
}

function verdict(approve, extra, note) {  // send the verdict on what waits, then stream the rest
  stream("approvals", {approval_token: waiting.approval_token, approve, ...extra}, () => {
    $("approval").hidden = true;
    add({role: "user", name: "you", tool: waiting.tool, ...note}, waiting.call + 1);
  });
}

$("login").onsubmit = (e) => {
  e.preventDefault();
  token = $("token").value.trim();
  sessionStorage.setItem("token", token);
  open();
};
$("new").onclick = () => call("POST", "/sessions", {})
  .then((session) => { location.hash = session.id; })  // the hashchange opens it
  .catch((error) => say("", error.message));
$("ask").onsubmit = (e) => {
  e.preventDefault();
  const text = $("text").value;
  stream("messages", {text}, () => {
    $("text").value = "";
    add({role: "user", content: text}, shown + 1);
  });
};
$("resume").onclick = () => stream("resume", {});
$("approve").onclick = () => verdict(true, {}, {args: waiting.args});
$("edited").onclick = () => {
  try {
    const args = JSON.parse($("args").value);
    verdict(true, {args}, {args});
  } catch (error) {  // JSON.parse's; the server checks what the arguments mean
    say("", `the arguments are not JSON: ${error.message}`);
  }
};
$("deny").onclick = () => {
  const reason = $("reason").value.trim();
  if (reason) verdict(false, {reason}, {content: reason});
  else say("", "say why: the agent reads the reason and tells the customer");
};
window.addEventListener("hashchange", open);
$("token").value = token;
open();
