// The vtt-sync tracker page: a live view of one room, with controls by role.
// Room and token come from the URL fragment (#room=demo&token=...), which the
// browser never sends to the server; the WebSocket URL is derived from location.

import { VttSyncClient } from "./vtt-sync-client.js";

const $ = (sel, root = document) => root.querySelector(sel);
const $$ = (sel, root = document) => [...root.querySelectorAll(sel)];
const FEED_MAX = 200;

let client = null;
const cards = new Map(); // char id -> card element
let setupOrder = null; // GM's combat setup: [{id, on}]

// --- formatting --------------------------------------------------------------

const pad = (n) => String(n).padStart(2, "0");

export function formatClock(seconds) {
  const s = Math.max(0, Math.floor(seconds || 0));
  const d = Math.floor(s / 86400);
  const h = Math.floor((s % 86400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = s % 60;
  return `${d ? `${d}d ` : ""}${d ? pad(h) : h}h ${pad(m)}m ${pad(sec)}s`;
}

function formatDuration(seconds) {
  const s = Math.max(0, Math.floor(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${s % 60 ? ` ${pad(s % 60)}s` : ""}`;
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  return `${h}h${m ? ` ${pad(m)}m` : ""}`;
}

const REST_NAMES = { short: "Short rest", night: "Night's rest", bed: "Bed rest" };
const CHECK_NAMES = { medicine: "Medicine", constitution: "Constitution" };

function charName(id) {
  return client?.state?.characters?.[id]?.name ?? id ?? "?";
}

function userName(id) {
  if (!id) return "—";
  return client?.state?.users?.[id]?.name ?? id;
}

function signed(n) {
  return n >= 0 ? `+${n}` : `${n}`;
}

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = text;
  return node;
}

/** One event as a feed line (DOM nodes, never innerHTML). */
function describeEvent(ev) {
  const line = el("div", "line");
  const add = (text, cls) => line.append(cls ? el("span", cls, text) : document.createTextNode(text));
  const who = ev.char ? charName(ev.char) : null;
  if (who) add(who, "who");
  switch (ev.kind) {
    case "roll": {
      add(` ${CHECK_NAMES[ev.check] ?? ev.check ?? "check"}: `);
      add(`d20 ${ev.d20}`, "die");
      add(` ${signed(ev.mod ?? 0)}`, "mod");
      if (ev.bonus) add(` ${signed(ev.bonus)}`, "bonus");
      else add(" +0", "bonus");
      add(" = ");
      add(String(ev.total), "total");
      add(ev.dc === null || ev.dc === undefined ? " (no DC)" : ` vs DC ${ev.dc}`, "dc");
      add(" → ");
      add(String(ev.outcome ?? ""), `outcome outcome-${ev.outcome}`);
      if (ev.source === "queued" || ev.source === "gm") add(` (${ev.source} die)`, "muted");
      break;
    }
    case "damage": {
      const parts = [];
      if (ev.pe) parts.push(`${ev.pe} PE`);
      if (ev.pv) parts.push(`${ev.pv} PV`);
      add(` takes ${ev.amount}${ev.nonlethal ? " nonlethal" : ""} damage`);
      if (parts.length) add(` (${parts.join(", ")})`, "muted");
      break;
    }
    case "heal":
      add(` healed ${ev.amount} (${signed(ev.pv ?? 0)} PV)${ev.stabilize ? ", stabilizing" : ""}`);
      break;
    case "condition":
      add(" ");
      add(ev.from, `badge small cond-${ev.from}`);
      add(" → ");
      add(ev.to, `badge small cond-${ev.to}`);
      if (ev.cause) add(` ${String(ev.cause).replaceAll("_", " ")}`, "muted");
      break;
    case "pp":
      add(` ${signed(ev.delta)} PP`);
      if (ev.cause) add(` ${String(ev.cause).replaceAll("_", " ")}`, "muted");
      break;
    case "clock":
      add(`Clock ${formatClock(ev.from)} → ${formatClock(ev.to)}`);
      break;
    case "combat":
      add(ev.outcome === "start" ? `Combat starts: ${(ev.order || []).map(charName).join(", ")}` : "Combat ends");
      break;
    case "turn":
      add(` — round ${ev.round}, their turn`);
      break;
    case "rest":
      add(` ${REST_NAMES[ev.rest] ?? ev.rest}: ${String(ev.outcome).replaceAll("_", " ")}`);
      if (ev.cause) add(` (${String(ev.cause).replaceAll("_", " ")})`, "muted");
      break;
    case "recover":
      add(` recovers ${signed(ev.pv ?? 0)} PV, ${signed(ev.pe ?? 0)} PE, ${signed(ev.pp ?? 0)} PP`);
      break;
    case "tend":
      add(ev.outcome === "start" ? ` tends ${charName(ev.patient)}` : ` stops tending ${charName(ev.patient)}`);
      break;
    case "ability":
      add(` ${String(ev.ability).toUpperCase()} damage ${signed(ev.delta ?? 0)} (now ${ev.damage}, mod ${signed(ev.mod ?? 0)})`);
      break;
    case "character":
      add(` ${ev.change}`);
      break;
    case "user":
      add(`User ${ev.name ?? userName(ev.user)} ${String(ev.change).replaceAll("_", " ")}`);
      break;
    case "rolls_queued":
      add(`Queued d20s: ${(ev.rolls || []).join(", ")}`);
      break;
    default: {
      const rest = Object.entries(ev)
        .filter(([k]) => !["kind", "char", "v"].includes(k))
        .map(([k, v]) => `${k}=${typeof v === "object" ? JSON.stringify(v) : v}`)
        .join(" ");
      add(`${who ? " " : ""}${ev.kind}${rest ? ` ${rest}` : ""}`);
    }
  }
  return line;
}

// --- notices -----------------------------------------------------------------

function toast(kind, title, message) {
  const box = el("div", `toast ${kind}`);
  box.setAttribute("role", kind === "error" ? "alert" : "status");
  if (kind === "error") box.dataset.code = title;
  box.append(el("strong", "toast-title", title));
  if (message) box.append(el("span", "toast-msg", message));
  box.addEventListener("click", () => box.remove());
  $("#errors").prepend(box);
  while ($("#errors").children.length > 4) $("#errors").lastElementChild.remove();
  setTimeout(() => box.remove(), kind === "error" ? 10000 : 2500);
}

async function run(op, args, button) {
  if (!client) return null;
  if (button) button.disabled = true;
  try {
    return await client.command(op, args);
  } catch (err) {
    toast("error", err.code || "error", err.serverMessage || err.message);
    return null;
  } finally {
    if (button) button.disabled = false;
  }
}

// --- rendering ---------------------------------------------------------------

function isGM() {
  return client?.role === "gm";
}

function canAct(c) {
  return isGM() || (!!c.owner && c.owner === client.user);
}

function setBar(stat, cur, max) {
  const pct = max > 0 ? Math.max(0, Math.min(100, (cur / max) * 100)) : 0;
  $(".fill", stat).style.width = `${pct}%`;
  $(".value", stat).textContent = `${cur} / ${max}`;
  stat.dataset.value = String(cur);
  stat.dataset.max = String(max);
  stat.classList.toggle("low", max > 0 && cur / max <= 0.25);
}

function makeCard(id) {
  const card = $("#char-template").content.firstElementChild.cloneNode(true);
  card.dataset.char = id;
  card.addEventListener("click", (ev) => {
    const btn = ev.target.closest("button[data-action]");
    if (btn) onCardAction(id, btn.dataset.action, card, btn);
  });
  return card;
}

function onCardAction(id, action, card, btn) {
  const amount = Number.parseInt($(".amount", card).value, 10);
  switch (action) {
    case "damage":
    case "heal": {
      if (!Number.isFinite(amount) || amount < 0) {
        toast("error", "invalid_args", "Enter an amount of 0 or more.");
        return;
      }
      const args = { char: id, amount };
      if (action === "damage" && $(".opt-nonlethal", card).checked) args.nonlethal = true;
      run(action, args, btn);
      break;
    }
    case "stabilize":
    case "stay_in_fight":
    case "stop_rest":
      run(action, { char: id }, btn);
      break;
    case "rest":
      run("rest", { char: id, kind: $(".rest-kind", card).value }, btn);
      break;
    case "first_aid": {
      const medic = $(".medic", card).value;
      if (medic) run("first_aid", { char: medic, patient: id }, btn);
      break;
    }
    case "tend": {
      const healer = $(".healer-pick", card).value;
      if (healer) run("tend", { char: healer, patient: id }, btn);
      break;
    }
    case "untend":
      run("untend", { patient: id }, btn);
      break;
    default:
      break;
  }
}

function updateCard(card, id, c, state) {
  $(".name", card).textContent = c.name;
  $(".level", card).textContent = `Level ${c.level}`;
  $(".owner", card).textContent = c.owner ? userName(c.owner) : "GM";
  const cond = $(".condition", card);
  cond.textContent = c.condition;
  cond.className = `condition badge cond-${c.condition}`;
  card.dataset.condition = c.condition;
  setBar($(".pv", card), c.pv, c.pv_max);
  setBar($(".pe", card), c.pe, c.pe_max);
  setBar($(".pp", card), c.pp, c.pp_max);
  const combat = state.combat;
  const current = combat ? combat.order[combat.turn] : null;
  card.classList.toggle("current-turn", current === id);
  card.classList.toggle("mine", !!c.owner && c.owner === client.user);

  const activity = $(".activity", card);
  if (c.activity) {
    const left = c.activity.ends - state.clock;
    activity.textContent = `${REST_NAMES[c.activity.kind] ?? c.activity.kind} · ${formatDuration(left)} left`;
    activity.dataset.kind = c.activity.kind;
    activity.hidden = false;
  } else {
    activity.hidden = true;
    activity.textContent = "";
    delete activity.dataset.kind;
  }
  $(".nonlethal", card).hidden = !c.nonlethal;
  const healer = $(".healer", card);
  healer.hidden = !c.healer;
  healer.textContent = c.healer ? `tended by ${charName(c.healer)}` : "";
  const stab = $(".stability", card);
  if (c.condition === "stable" && c.stable_since !== null && c.stable_since !== undefined) {
    stab.hidden = false;
    stab.textContent = `stable ${formatDuration(state.clock - c.stable_since)} · ${c.stability_checks ?? 0}/8 checks`;
  } else stab.hidden = true;
  const dmg = Object.entries(c.ability_damage || {}).filter(([, v]) => v > 0);
  const abil = $(".ability-damage", card);
  abil.hidden = dmg.length === 0;
  abil.textContent = dmg.map(([k, v]) => `${k.toUpperCase()} −${v}`).join(" · ");

  // controls by role
  const dead = c.condition === "dead";
  $(".gm-only", card).hidden = !isGM();
  const own = $(".owner-only", card);
  own.hidden = !canAct(c) || dead;
  $('[data-action="stabilize"]', card).hidden = c.condition !== "dying";
  $('[data-action="stay_in_fight"]', card).hidden = c.condition !== "stable";
  const inCombat = !!combat && combat.order.includes(id);
  $(".rest-row", card).hidden = c.condition !== "conscious" || (inCombat && !c.activity);
  $('[data-action="rest"]', card).hidden = !!c.activity;
  $(".rest-kind", card).hidden = !!c.activity;
  $('[data-action="stop_rest"]', card).hidden = !c.activity;
  const hasOwnButtons = $$(".owner-only button", card).some((b) => !b.hidden && !b.closest("[hidden]"));
  if (!hasOwnButtons) own.hidden = true;

  // first aid (S1): a dying patient, a conscious medic the user may act as
  const medics = c.condition === "dying" ? helpers(state, id) : [];
  $(".aid", card).hidden = medics.length === 0 || client.role === "observer";
  fillPicker($(".medic", card), medics);

  // tending (L4): a stable patient, a conscious healer the user may act as;
  // the GM or the owner of the patient or of its healer may stop it.
  const healers = c.condition === "stable" && !c.healer ? helpers(state, id) : [];
  const healerChar = c.healer ? state.characters[c.healer] : null;
  const mayUntend = !!c.healer && (isGM() || canAct(c) || (healerChar && canAct(healerChar)));
  $(".tend", card).hidden = client.role === "observer" || (healers.length === 0 && !mayUntend);
  $('[data-action="tend"]', card).hidden = healers.length === 0;
  $(".healer-pick", card).hidden = healers.length === 0;
  $('[data-action="untend"]', card).hidden = !mayUntend;
  fillPicker($(".healer-pick", card), healers);
}

// Conscious characters, other than `id`, that this user may act as.
function helpers(state, id) {
  return Object.entries(state.characters)
    .filter(([hid, h]) => hid !== id && h.condition === "conscious" && canAct(h))
    .sort((a, b) => (a[1].seq ?? 0) - (b[1].seq ?? 0));
}

// Refill a <select> of characters only when its options change (keeps the choice).
function fillPicker(select, entries) {
  const keep = select.value;
  const wanted = entries.map(([cid]) => cid).join(",");
  if (select.dataset.options !== wanted) {
    select.replaceChildren(...entries.map(([cid, ch]) => new Option(ch.name, cid)));
    select.dataset.options = wanted;
    if (entries.some(([cid]) => cid === keep)) select.value = keep;
  }
}

function renderCharacters(state) {
  const box = $("#characters");
  const entries = Object.entries(state.characters || {}).sort((a, b) => (a[1].seq ?? 0) - (b[1].seq ?? 0));
  const seen = new Set();
  for (const [id, c] of entries) {
    seen.add(id);
    let card = cards.get(id);
    if (!card) {
      card = makeCard(id);
      cards.set(id, card);
    }
    updateCard(card, id, c, state);
    box.append(card); // keeps the order (moves existing nodes)
  }
  for (const [id, card] of cards) {
    if (!seen.has(id)) {
      card.remove();
      cards.delete(id);
    }
  }
  $("#no-characters").hidden = entries.length > 0;
  $("#char-count").textContent = entries.length ? `(${entries.length})` : "";
}

function renderCombat(state) {
  const combat = state.combat;
  const section = $("#combat");
  section.dataset.active = combat ? "true" : "false";
  $("#no-combat").hidden = !!combat || isGM();
  $("#combat-round").textContent = combat ? `Round ${combat.round}` : "";
  const list = $("#combat-order");
  list.replaceChildren();
  if (combat) {
    combat.order.forEach((id, i) => {
      const c = state.characters[id];
      const li = el("li", i === combat.turn ? "combatant current" : "combatant");
      li.dataset.char = id;
      if (i === combat.turn) li.setAttribute("aria-current", "true");
      li.append(el("span", "turn-marker", i === combat.turn ? "▶" : String(i + 1)));
      li.append(el("span", "cname", c ? c.name : id));
      if (c) {
        li.append(el("span", `badge small cond-${c.condition}`, c.condition));
        li.append(el("span", "mini muted", `PV ${c.pv}/${c.pv_max}`));
      }
      list.append(li);
    });
  }
  const current = combat ? combat.order[combat.turn] : null;
  const currentChar = current ? state.characters[current] : null;
  const endTurn = $("#end-turn");
  endTurn.hidden = !combat || !(isGM() || (currentChar && currentChar.owner === client.user));
  endTurn.textContent = currentChar ? `End ${currentChar.name}'s turn` : "End turn";
  $("#combat-end").hidden = !combat || !isGM();

  const setup = $("#combat-setup");
  setup.hidden = !!combat || !isGM();
  if (!setup.hidden) renderSetup(state);
}

function renderSetup(state) {
  const ids = Object.entries(state.characters || {})
    .sort((a, b) => (a[1].seq ?? 0) - (b[1].seq ?? 0))
    .map(([id]) => id);
  if (!setupOrder) setupOrder = ids.map((id) => ({ id, on: state.characters[id].condition !== "dead" }));
  setupOrder = setupOrder.filter((x) => ids.includes(x.id));
  for (const id of ids) if (!setupOrder.some((x) => x.id === id)) setupOrder.push({ id, on: true });
  const list = $("#combat-setup-list");
  list.replaceChildren(
    ...setupOrder.map((x, i) => {
      const li = el("li", "setup-item");
      li.dataset.char = x.id;
      const box = document.createElement("input");
      box.type = "checkbox";
      box.checked = x.on;
      box.addEventListener("change", () => (x.on = box.checked));
      const label = el("label", "setup-name");
      label.append(box, document.createTextNode(` ${charName(x.id)}`));
      const up = el("button", "icon", "▲");
      up.type = "button";
      up.title = "Earlier";
      up.disabled = i === 0;
      up.addEventListener("click", () => moveSetup(i, -1));
      const down = el("button", "icon", "▼");
      down.type = "button";
      down.title = "Later";
      down.disabled = i === setupOrder.length - 1;
      down.addEventListener("click", () => moveSetup(i, 1));
      li.append(label, up, down);
      return li;
    }),
  );
}

function moveSetup(i, delta) {
  const j = i + delta;
  [setupOrder[i], setupOrder[j]] = [setupOrder[j], setupOrder[i]];
  if (client.state) renderSetup(client.state);
}

function render() {
  const state = client.state;
  if (!state) return;
  document.body.dataset.role = client.role || "";
  $("#room-name").textContent = state.name || state.room;
  $("#room-id").textContent = state.room;
  const me = state.users?.[client.user];
  $("#whoami").textContent = `${me?.name ?? client.user} · ${client.role}`;
  $("#clock").textContent = formatClock(state.clock);
  $("#clock").dataset.seconds = String(state.clock);
  $("#version").textContent = `v${client.version}`;
  $("#gm-controls").hidden = !isGM();
  const queued = state.queued_rolls || [];
  $("#queued-rolls").textContent = queued.length ? `queued: ${queued.join(", ")}` : "no queued d20";
  $('[data-seconds="round"]').title = `One round (${state.round_seconds ?? 6} s)`;
  renderCharacters(state);
  renderCombat(state);
}

function eventItem(ev, patch) {
  const li = el("li", "event");
  li.dataset.kind = ev.kind;
  li.dataset.v = String(patch.v);
  if (ev.char) li.dataset.char = ev.char;
  if (ev.kind === "roll") li.dataset.outcome = ev.outcome;
  const stamp = el("span", "stamp muted", `v${patch.v}${patch.by ? ` · ${userName(patch.by)}` : ""}`);
  li.append(describeEvent(ev), stamp);
  return li;
}

/** Newest patch first; the events of one patch in their order. */
function addPatch(patch) {
  const events = patch.events || [];
  if (!events.length) return;
  const feed = $("#feed");
  const block = document.createDocumentFragment();
  for (const ev of events) block.append(eventItem(ev, patch));
  feed.prepend(block);
  while (feed.children.length > FEED_MAX) feed.lastElementChild.remove();
  $("#no-events").hidden = true;
}

function setStatus(status, detail) {
  const pill = $("#status");
  pill.dataset.status = status;
  const labels = {
    connecting: client && client.connections ? "reconnecting…" : "connecting…",
    connected: "live",
    disconnected: "reconnecting…",
    failed: "disconnected",
    closed: "closed",
  };
  pill.textContent = labels[status] ?? status;
  pill.title = detail || "";
  const banner = $("#conn-error");
  if (status === "failed") {
    banner.textContent = `Connection refused: ${detail}. Check the room and token in the address.`;
    banner.hidden = false;
  } else if (status === "connected") {
    banner.hidden = true;
  }
}

// --- global controls ---------------------------------------------------------

function wireControls() {
  $("#gm-controls").addEventListener("click", (ev) => {
    const btn = ev.target.closest("button[data-action]");
    if (!btn || !client?.state) return;
    const action = btn.dataset.action;
    if (action === "advance") {
      const raw = btn.dataset.seconds;
      const seconds = raw === "round" ? client.state.round_seconds || 6 : Number(raw);
      run("advance_clock", { seconds }, btn);
    } else if (action === "advance-custom") {
      const seconds = Number.parseInt($("#advance-seconds").value, 10);
      if (!Number.isFinite(seconds) || seconds <= 0) {
        toast("error", "invalid_args", "Enter a number of seconds above 0.");
        return;
      }
      run("advance_clock", { seconds }, btn);
    } else if (action === "queue_rolls") {
      const rolls = $("#queue-rolls")
        .value.split(/[\s,;]+/)
        .filter(Boolean)
        .map((x) => Number.parseInt(x, 10));
      if (!rolls.length || rolls.some((r) => !Number.isInteger(r))) {
        toast("error", "invalid_args", "Enter natural d20 results, e.g. 12, 4, 18.");
        return;
      }
      run("queue_rolls", { rolls }, btn).then((ack) => {
        if (ack) $("#queue-rolls").value = "";
      });
    } else if (action === "undo") {
      run("undo", {}, btn).then((ack) => ack && toast("ok", "Undone", `now v${ack.v}`));
    }
  });
  $("#end-turn").addEventListener("click", (ev) => {
    const combat = client?.state?.combat;
    if (!combat) return;
    run("end_turn", { char: combat.order[combat.turn], round: combat.round }, ev.currentTarget);
  });
  $("#combat-end").addEventListener("click", (ev) => run("combat_end", {}, ev.currentTarget));
  $("#combat-start").addEventListener("click", (ev) => {
    const order = (setupOrder || []).filter((x) => x.on).map((x) => x.id);
    if (!order.length) {
      toast("error", "invalid_args", "Tick at least one combatant.");
      return;
    }
    run("combat_start", { order }, ev.currentTarget);
  });
}

// --- start -------------------------------------------------------------------

function start() {
  const params = new URLSearchParams(location.hash.slice(1));
  const room = params.get("room");
  const token = params.get("token");
  if (!room || !token) {
    const form = $("#login");
    form.hidden = false;
    if (room) form.room.value = room;
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      const next = new URLSearchParams({ room: form.room.value.trim(), token: form.token.value.trim() });
      location.hash = next.toString();
      location.reload();
    });
    return;
  }
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  const url = params.get("ws") || `${scheme}//${location.host}/`;
  client = new VttSyncClient({ url, token, room });
  window.vttClient = client; // for debugging and tests (the token is not enumerable)
  client.on("status", setStatus);
  client.on("state", render);
  client.on("patch", addPatch);
  let backfilled = false;
  client.on("welcome", () => {
    if (backfilled) return;
    backfilled = true; // the recent log, once, on arrival (older entries go below)
    client.history(30).then((patches) => {
      const feed = $("#feed");
      const shown = new Set($$("li.event", feed).map((li) => li.dataset.v));
      const block = document.createDocumentFragment();
      for (const patch of [...patches].reverse()) {
        if (shown.has(String(patch.v))) continue;
        for (const ev of patch.events || []) block.append(eventItem(ev, patch));
      }
      feed.append(block);
      if (feed.children.length) $("#no-events").hidden = true;
    });
  });
  client.on("error", (frame) => toast("error", frame.code || "error", frame.message || ""));
  wireControls();
  window.addEventListener("online", () => client.retryNow());
  $("#app").hidden = false;
  client.connect().catch(() => {
    /* shown by the status banner */
  });
  // keep "time left" labels honest when the tab wakes up
  document.addEventListener("visibilitychange", () => {
    if (!document.hidden) client.retryNow();
  });
}

window.addEventListener("hashchange", () => location.reload());
start();
