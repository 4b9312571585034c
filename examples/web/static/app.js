// The page draws what the server tells it and keeps no countdown of its own:
// the button's title, enabled state and seconds come from the engine's events
// (/events/button), the login prompt and the orders from the gate's
// (/events/gate). Both are server-sent events, which the browser reopens by
// itself when a server goes away.
"use strict";

const $ = (id) => document.getElementById(id);
const phoneField = $("phone"), codeField = $("code"), button = $("get-code");
const PHONE = /^\+[1-9][0-9]{6,14}$/;
let buttonStream = null, gateStream = null, watchedPhone = null;

function note(kind, text) {
  const item = document.createElement("li");
  item.dataset.kind = kind;
  item.textContent = `${new Date().toLocaleTimeString()} ${text}`;
  $("log").prepend(item);
}

function say(text, ok = false) {
  $("message").textContent = text;
  $("message").className = ok ? "ok" : "";
}

function showLink() {
  const live = [buttonStream, gateStream].every((s) => s === null || s.readyState === EventSource.OPEN);
  $("link").textContent = live ? "live" : "reconnecting…";
  $("link").className = live ? "" : "offline";
}

// An EventSource that reports its state; if the browser gives up on it
// (readyState CLOSED), it is opened again a second later.
function stream(url, handlers) {
  const source = new EventSource(url);
  source.onopen = showLink;
  source.onerror = () => {
    showLink();
    if (source.readyState === EventSource.CLOSED) {
      setTimeout(() => { if (handlers.current() === source) handlers.reopen(); }, 1000);
    }
  };
  for (const [name, fn] of Object.entries(handlers.events)) {
    source.addEventListener(name, (message) => fn(JSON.parse(message.data)));
  }
  return source;
}

// -- the "Get code" button -----------------------------------------------------

function drawButton(event) {
  button.textContent = event.title;
  button.disabled = !event.enabled;
  button.dataset.state = event.state;
  if (event.kind !== "TICK") note("button", `${event.kind}: ${event.title}`);
}

function watchPhone() {
  const phone = phoneField.value.replace(/\s/g, "");
  if (phone === watchedPhone) return;
  if (buttonStream) buttonStream.close();
  buttonStream = null;
  watchedPhone = phone;
  if (!PHONE.test(phone)) {
    button.textContent = "Get code";
    button.disabled = true;
    showLink();
    return;
  }
  // Until the new key's first event: disabled (nothing is known of it yet).
  button.textContent = "Get code";
  button.disabled = true;
  const open = () => {
    buttonStream = stream(`/events/button?phone=${encodeURIComponent(phone)}`, {
      events: { button: drawButton },
      current: () => buttonStream,
      reopen: open,
    });
  };
  open();
}

let typing = null;
phoneField.addEventListener("input", () => {
  clearTimeout(typing);
  typing = setTimeout(watchPhone, 250);
});

async function post(path, body) {
  const response = await fetch(path, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body || {}),
  });
  try {
    return await response.json();
  } catch {
    return { ok: false, message: `The server answered ${response.status}.` };
  }
}

function whenFree(ms) {
  const at = new Date(Date.now() + ms).toLocaleTimeString();
  const minutes = Math.ceil(ms / 60000);
  return `The next one is free at ${at} (in ${minutes} min).`;
}

button.addEventListener("click", async () => {
  // No local disabling: a double click sends two requests, and the engine
  // grants one of them.
  const answer = await post("/send", { phone: phoneField.value });
  const text = answer.frees_in_ms !== undefined ? `${answer.message} ${whenFree(answer.frees_in_ms)}` : answer.message;
  say(text, answer.ok);
  note(answer.ok ? "sent" : "refused", text);
});

// -- logging in and the orders behind the gate ---------------------------------

$("login").addEventListener("click", async () => {
  const answer = await post("/login", { phone: phoneField.value, code: codeField.value });
  say(answer.message, answer.ok);
  if (!answer.ok) note(answer.dead ? "code-dead" : "wrong-code", answer.message);
});

$("orders-link").addEventListener("click", async (click) => {
  click.preventDefault();
  const answer = await post("/orders");
  note("orders-request", `My orders: ${answer.message}`);
});

$("logout").addEventListener("click", () => post("/logout"));

function drawGate(event) {
  $("logout").hidden = !event.logged_in;
  if (event.kind === "LOGIN_REQUIRED") {
    $("prompt").hidden = false;
    phoneField.focus();
    note("login-required", "Login required: the login form is shown");
  } else if (event.kind === "LOGGED_IN") {
    $("prompt").hidden = true;
    note("logged-in", "Logged in");
  } else if (event.kind === "LOGGED_OUT" || event.kind === "EXPIRED") {
    $("orders").hidden = true;
    note("logged-out", event.kind === "EXPIRED" ? "Session expired" : "Logged out");
  }
}

function drawCancelled(data) {
  $("prompt").hidden = true;
  note("orders-cancelled", `My orders cancelled (${data.reason.toLowerCase().replace("_", " ")})`);
}

function drawOrders(data) {
  $("orders").hidden = false;
  $("orders-user").textContent = `Orders of ${data.user}`;
  $("orders-list").replaceChildren(...data.orders.map((order) => {
    const item = document.createElement("li");
    item.textContent = `${order.id}: ${order.item}`;
    return item;
  }));
  note("orders-opened", "Opened My orders");
}

function openGate() {
  gateStream = stream("/events/gate", {
    events: { gate: drawGate, orders: drawOrders, cancelled: drawCancelled },
    current: () => gateStream,
    reopen: openGate,
  });
}

openGate();
watchPhone();
