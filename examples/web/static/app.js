// The page draws what the server tells it and keeps no countdown of its own:
// the button's state and seconds come from the engine's events
// (/events/button), the login gate's, the orders and the store's state
// (online or not) from /events/gate. Both are server-sent events, which the
// browser reopens by itself when a server goes away.
//
// The number typed is kept in sessionStorage, so a reload shows it with its
// running countdown. On the admin listener the server adds the activity
// panel (#log) and the operator's panel (#refusals, #records): what this
// server refused and why (/api/stats) and the guard's last decisions
// (/api/records), read at the start, after each answer and every 5 s.
//
// When the guard asks a challenge, /send answers with a proof of work: the
// page says it is checking, does the work (proof.js) and sends again with
// the answer, once per tap.
//
// The page runs under a strict Content-Security-Policy: no inline script or
// style, so the strings this script draws come in the body's data-text.
"use strict";

const $ = (id) => document.getElementById(id);
const TEXT = JSON.parse(document.body.dataset.text);
const phoneField = $("phone"), codeField = $("code"), button = $("get-code"), loginButton = $("login");
const PHONE = /^\+[1-9][0-9]{6,14}$/, CODE = /^[0-9]{6}$/;
let buttonStream = null, gateStream = null, watchedPhone = null;
// What the page knows: the key's last button event, the store's state, the session.
let shown = null, storeOnline = true, loggedIn = false, busy = false, checking = false;

function format(template, fields) {
  return template.replace(/\{(\w+)\}/g, (_, name) => String(fields[name]));
}

function note(kind, text) {
  if (!$("log")) return;  // the activity panel is there on the admin listener only
  const item = document.createElement("li");
  item.dataset.kind = kind;
  item.textContent = `${new Date().toLocaleTimeString()} ${text}`;
  $("log").prepend(item);
}

function say(text, ok = false) {
  $("message").textContent = text;
  $("message").className = ok ? "ok" : "";
}

function phone() {
  return phoneField.value.replace(/\s/g, "");
}

// -- what can act now ----------------------------------------------------------

function open(source) {
  return source !== null && source.readyState === EventSource.OPEN;
}

function drawControls() {
  // A stream that failed and is being reopened: this server is out of reach.
  const lost = [buttonStream, gateStream].some((s) => s !== null && s.failed);
  const online = storeOnline && open(gateStream);
  const ready = open(buttonStream) && shown !== null && shown.phone === phone();
  button.disabled = checking || !(online && ready && shown.enabled);
  loginButton.disabled = busy || !(online && PHONE.test(phone()) && CODE.test(codeField.value.trim()));
  $("orders-link").disabled = !online;
  let offline = "";
  if (!storeOnline) offline = TEXT.offline;
  else if (lost) offline = TEXT.reconnecting;
  $("offline").textContent = offline;
  $("offline").hidden = offline === "";
  document.body.classList.toggle("offline", offline !== "");
  if ($("link")) $("link").textContent = online && !lost ? "live" : "offline";
}

function drawSession() {
  $("signin").hidden = loggedIn;
  $("account").hidden = !loggedIn;
  if (!loggedIn) $("orders").hidden = true;
}

// An EventSource that reports its state; if the browser gives up on it
// (readyState CLOSED), it is opened again a second later.
function stream(url, handlers) {
  const source = new EventSource(url);
  source.failed = false;
  source.onopen = () => { source.failed = false; drawControls(); };
  source.onerror = () => {
    source.failed = true;
    drawControls();
    if (source.readyState === EventSource.CLOSED) {
      setTimeout(() => { if (handlers.current() === source) handlers.reopen(); }, 1000);
    }
  };
  for (const [name, fn] of Object.entries(handlers.events)) {
    source.addEventListener(name, (message) => { fn(JSON.parse(message.data)); drawControls(); });
  }
  return source;
}

// -- the "Get code" button -----------------------------------------------------

function drawButton(number, event) {
  const minutes = Math.ceil(event.seconds / 60);
  const before = shown;
  shown = { ...event, phone: number };
  button.textContent = format(TEXT[event.state] || TEXT.IDLE, { s: event.seconds, m: minutes });
  button.dataset.state = event.state;
  // The live region: the countdown when it starts, every 10 s and when it ends.
  let live = "";
  if (event.state === "COOLING") {
    const started = !before || before.state !== "COOLING" || before.phone !== number;
    live = started || event.seconds % 10 === 0 ? format(TEXT.counting, { s: event.seconds }) : $("countdown").textContent;
  } else if (event.state === "LOCKED") {
    live = format(TEXT.locked, { m: minutes });
  } else if (before && before.state === "COOLING" && before.phone === number) {
    live = TEXT.ready;
  }
  $("countdown").textContent = live;
  if (event.kind !== "TICK") note("button", `${event.kind}: ${button.textContent}`);
}

function watchPhone() {
  const number = phone();
  if (number === watchedPhone) return drawControls();
  if (buttonStream) buttonStream.close();
  buttonStream = null;
  watchedPhone = number;
  shown = null;
  button.textContent = TEXT.IDLE;
  $("countdown").textContent = "";
  if (PHONE.test(number)) {
    sessionStorage.setItem("phone", number);
    // Until the key's first event the button stays disabled (nothing is known yet).
    const open = () => {
      buttonStream = stream(`/events/button?phone=${encodeURIComponent(number)}`, {
        events: { button: (event) => drawButton(number, event) },
        current: () => buttonStream,
        reopen: open,
      });
    };
    open();
  }
  drawControls();
}

let typing = null;
phoneField.addEventListener("input", () => {
  clearTimeout(typing);
  drawControls();
  typing = setTimeout(watchPhone, 250);
});
codeField.addEventListener("input", drawControls);

async function post(path, body) {
  try {
    const response = await fetch(path, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body || {}),
    });
    try {
      return await response.json();
    } catch {
      return { ok: false, message: format(TEXT.answered, { status: response.status }) };
    }
  } catch {
    return { ok: false, message: TEXT.reconnecting };
  }
}

function whenFree(ms) {
  const at = new Date(Date.now() + ms).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  return format(TEXT.frees, { at, m: Math.ceil(ms / 60000) });
}

// A challenge's proof of work, done: the same send again with its answer
// (or, if no answer was found, the tap's end).
async function passChallenge(number, challenge) {
  checking = true;
  drawControls();
  say(TEXT.checking);
  let answer;
  try {
    const solved = await proofOfWork.solve(challenge);
    if (solved === null) return { ok: false, message: TEXT.check_again };
    note("challenge-solved", `Proof of work: ${solved.tries} tries in ${solved.ms} ms`);
    answer = await post("/send", { phone: number, challenge, nonce: solved.nonce });
  } finally {
    checking = false;
    drawControls();
  }
  // Challenged again (the pass went to another tap): the next tap does it again.
  return answer.challenge ? { ...answer, message: TEXT.check_again } : answer;
}

button.addEventListener("click", async () => {
  // No local disabling beyond the engine's: a double click sends two
  // requests, and the engine grants one of them.
  const number = phone();
  let answer = await post("/send", { phone: number });
  if (answer.challenge) {
    note("challenge", "The guard asks a challenge: a proof of work");
    answer = await passChallenge(number, answer.challenge);
  }
  const text = answer.frees_in_ms !== undefined ? `${answer.message} ${whenFree(answer.frees_in_ms)}` : answer.message;
  say(text, answer.ok);
  note(answer.ok ? "sent" : "refused", text);
  if (answer.ok) codeField.focus();
  drawRefusals();
  drawRecords();
});

// -- the operator's panel (admin listener): what was refused and why -------------

async function drawRefusals() {
  const table = $("refusals");
  if (!table) return;
  let stats;
  try {
    const response = await fetch("/api/stats");
    if (!response.ok) return;
    stats = await response.json();
  } catch {
    return;  // the server is out of reach: the banner says so
  }
  const rows = Object.entries(stats.sends.refused);
  if (stats.verifications.refused_code_dead > 0) rows.push(["code_dead", stats.verifications.refused_code_dead]);
  const answers = Object.entries(stats.challenges || {}).filter(([what]) => what.startsWith("refused_"))
    .reduce((sum, [, n]) => sum + n, 0);
  if (answers > 0) rows.push(["challenge_refused", answers]);
  rows.sort((a, b) => b[1] - a[1]);
  table.tBodies[0].replaceChildren(...rows.map(([reason, count]) => {
    const row = document.createElement("tr");
    row.dataset.reason = reason;
    const what = document.createElement("td");
    what.textContent = TEXT.reasons[reason] || reason;
    const times = document.createElement("td");
    times.textContent = String(count);
    row.append(what, times);
    return row;
  }));
  const refused = Object.values(stats.sends.refused).reduce((sum, n) => sum + n, 0);
  $("refusals-summary").textContent = rows.length === 0 ? TEXT.refusals_none : format(TEXT.refusals_summary, {
    server: stats.server, granted: stats.sends.granted, refused, local: stats.sends.refused_locally,
  });
}

// The guard's last decisions, of every server (Redis's stream of records):
// what was blocked and why. Each cell carries its column's name too (.label),
// which a narrow panel shows instead of the header row (style.css).
const RECORD_COLUMNS = ["when", "number", "country", "address", "outcome", "why"];

async function drawRecords() {
  const table = $("records");
  if (!table) return;
  let answer;
  try {
    const response = await fetch("/api/records");
    if (!response.ok) return;
    answer = await response.json();
  } catch {
    return;
  }
  const labels = [...table.tHead.rows[0].cells].map((header) => header.textContent);
  table.tBodies[0].replaceChildren(...answer.records.map((record) => {
    const row = document.createElement("tr");
    row.dataset.outcome = record.outcome;
    const why = record.warnings.length > 0
      ? record.warnings.map((w) => TEXT.reasons[w] || w).join(", ")
      : record.rule || (record.outcome === "refused" ? (TEXT.reasons[record.reason] || "") : "");
    const cells = [new Date(record.time_ms).toLocaleTimeString(), record.number, record.country,
                   record.address, record.challenge_passed ? TEXT.passed : TEXT[record.outcome] || record.outcome, why];
    row.append(...cells.map((value, column) => {
      const cell = document.createElement("td");
      cell.className = RECORD_COLUMNS[column];
      const label = document.createElement("span");
      label.className = "label";
      label.setAttribute("aria-hidden", "true");  // the column's header names it already
      label.textContent = labels[column];
      const text = document.createElement("span");
      text.className = "value";
      text.textContent = value;
      cell.append(label, text);
      return cell;
    }));
    return row;
  }));
  $("records-summary").textContent = answer.records.length === 0 ? TEXT.records_none : "";
}

// -- logging in and the orders behind the gate ---------------------------------

$("signin-form").addEventListener("submit", async (submit) => {
  submit.preventDefault();
  if (loginButton.disabled) return;
  busy = true;
  loginButton.disabled = true;
  const answer = await post("/login", { phone: phone(), code: codeField.value.trim() });
  busy = false;
  say(answer.message, answer.ok);
  drawRefusals();
  drawRecords();
  if (answer.ok) {
    codeField.value = "";
    showUser({ phone: answer.phone });
  } else {
    note(answer.dead ? "code-dead" : "wrong-code", answer.message);
  }
  drawControls();
});

$("orders-link").addEventListener("click", async () => {
  const answer = await post("/orders");
  note("orders-request", `My orders: ${answer.message}`);
});

$("logout").addEventListener("click", async () => {
  const answer = await post("/logout");
  say(answer.message, answer.ok);
});

function showUser(data) {
  if (data.phone) $("who").textContent = format(TEXT.signed_in_as, { phone: data.phone });
}

function drawGate(event) {
  loggedIn = event.logged_in;
  drawSession();
  if (event.kind === "LOGIN_REQUIRED") {
    $("prompt").hidden = false;
    phoneField.focus();
    note("login-required", "Login required: the login form is shown");
  } else if (event.kind === "LOGGED_IN") {
    $("prompt").hidden = true;
    $("logout").focus();
    note("logged-in", "Logged in");
  } else if (event.kind === "LOGGED_OUT" || event.kind === "EXPIRED") {
    note("logged-out", event.kind === "EXPIRED" ? "Session expired" : "Logged out");
  }
}

function drawStore(data) {
  if (data.online !== storeOnline) note(data.online ? "store-back" : "store-lost", data.online ? "Redis is back" : "Redis is lost");
  storeOnline = data.online;
}

function drawCancelled(data) {
  $("prompt").hidden = true;
  note("orders-cancelled", `My orders cancelled (${data.reason.toLowerCase().replace("_", " ")})`);
}

function drawOrders(data) {
  $("orders").hidden = false;
  $("orders-user").textContent = format(TEXT.orders_of, { user: data.user });
  $("orders-list").replaceChildren(...data.orders.map((order) => {
    const item = document.createElement("li");
    item.textContent = `${order.id}: ${order.item}`;
    return item;
  }));
  note("orders-opened", "Opened My orders");
}

function openGate() {
  gateStream = stream("/events/gate", {
    events: { gate: drawGate, orders: drawOrders, cancelled: drawCancelled, store: drawStore, user: showUser },
    current: () => gateStream,
    reopen: openGate,
  });
}

phoneField.value = sessionStorage.getItem("phone") || "";
openGate();
watchPhone();
if ($("refusals")) {
  drawRefusals();
  drawRecords();
  setInterval(() => { drawRefusals(); drawRecords(); }, 5000);
}
