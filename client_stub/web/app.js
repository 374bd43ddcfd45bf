// The vtt-sync tracker page: a live view of one room, with controls by role,
// and for the GM the table's setup (room, people and their links, characters).
// Room and token come from the URL fragment (#room=demo&token=...), which the
// browser never sends to the server; the WebSocket URL is derived from location.

import { EventText, Names, formatClock, formatDuration, loadTexts } from "./event-text.js";
import { confirmDialog, toast } from "./notices.js";
import { VttSyncClient } from "./vtt-sync-client.js";

const $ = (sel, root = document) => root.querySelector(sel);
const $$ = (sel, root = document) => [...root.querySelectorAll(sel)];
const FEED_MAX = 200;
const KEEP_PATCHES = 500; // versions whose events the page remembers (undo texts)
const BACKFILL_PATCHES = 30; // versions whose events the log shows on arrival
const ABILITIES = ["str", "dex", "con", "int", "wis", "cha"];

let client = null;
const cards = new Map(); // char id -> card element
let setupOrder = null; // GM's combat setup: [{id, on}]
const initiativeBonus = {}; // GM's initiative bonus per character (T4), kept for re-rolls
const ASK_ADVANCE_SECONDS = 3600; // an advance this long during a combat asks first
const names = new Names(); // names by id, kept after people leave
const patchEvents = new Map(); // version -> its events (history and live)
const undone = new Set(); // versions undone since
let eventText = null;
let idCounter = 0;
const idPrefix = `page-${crypto.getRandomValues(new Uint32Array(1))[0].toString(16)}`;

// Error codes in plain words (the toast's title; its text is the server's message).
const ERROR_TITLES = {
  invalid_args: "Check the values",
  not_found: "Not found",
  forbidden: "Not allowed",
  conflict: "Someone was quicker",
  rule: "The rules say no",
  rate_limited: "Too many clicks",
  unknown_op: "Unknown command",
  bad_frame: "Bad message",
  internal: "Server trouble: try again",
  timeout: "No answer from the server",
  expired: "Not sent",
};

// --- views -------------------------------------------------------------------
// Each character has `shown` (full | status | hidden). A viewer who may see
// only the status of a character gets name, owner, shown, level and condition,
// nothing else; a hidden one is absent from their state, and `combat.turn` is
// null while it acts (docs/views.md).

const OWN_SHOWN_NOTES = { status: "others see its status only", hidden: "hidden from others" };

/** Does this viewer see the character at the status level only (no numbers)?
 * Read from what the state holds: the GM and the owner see a `status` one in full. */
function numbersHidden(c) {
  return !("pv_max" in c);
}

/** The id whose turn it is; null without combat or while someone unseen acts. */
function currentOf(combat) {
  if (!combat) return null;
  const t = combat.turn;
  return Number.isInteger(t) && t >= 0 && t < combat.order.length ? combat.order[t] : null;
}

/** The table's order: by seq, which a status character lacks; then by the
 * number of its id (c<n>, handed out in that order), then by name and id. */
function seqOf(id, c) {
  if (Number.isInteger(c.seq)) return c.seq;
  const m = /(\d+)$/.exec(id);
  return m ? Number(m[1]) : Number.POSITIVE_INFINITY;
}

function byTableOrder([ida, a], [idb, b]) {
  const sa = seqOf(ida, a);
  const sb = seqOf(idb, b);
  if (sa !== sb) return sa < sb ? -1 : 1;
  return String(a.name).localeCompare(String(b.name)) || (ida < idb ? -1 : ida > idb ? 1 : 0);
}

// --- formatting --------------------------------------------------------------


function charName(id) {
  return names.char(id);
}

function userName(id) {
  return id ? names.user(id) : "—";
}

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = text;
  return node;
}

/** One event as a sentence (DOM nodes, never innerHTML): each field a span. */
function describeEvent(ev) {
  const line = el("div", "line");
  for (const [text, field] of eventText.segments(ev)) {
    if (!field) {
      line.append(document.createTextNode(text));
      continue;
    }
    const span = el("span", `v v-${field}`, text);
    const raw = ev[field];
    if (typeof raw === "string" || typeof raw === "number") span.dataset.value = String(raw);
    line.append(span);
  }
  return line;
}

function sentence(ev) {
  return eventText.sentence(ev);
}

function remember(patch) {
  patchEvents.set(patch.v, patch.events || []);
  for (const ev of patch.events || []) if (ev.kind === "undo" && Number.isInteger(ev.undone)) undone.add(ev.undone);
  if (patchEvents.size > KEEP_PATCHES) {
    const oldest = Math.min(...patchEvents.keys());
    patchEvents.delete(oldest);
  }
}

// --- notices -----------------------------------------------------------------

function errorToast(code, message) {
  toast("error", ERROR_TITLES[code] ?? "Refused", message, code);
}

// A click while the server is unreachable waits (the top bar counts them)
// this long at most; then, if it never left the page, it is dropped and
// says so. One sent before the connection dropped waits for its answer:
// the server may have applied it, and the retry's ack tells.
// (a test shortens it through window.vttWaitExpiresMs)
const WAIT_EXPIRES_MS = () => /** @type {any} */ (window).vttWaitExpiresMs ?? 30000;

function showWaiting() {
  const n = client ? client.pendingCommands.length : 0;
  const pill = $("#waiting");
  pill.hidden = n === 0 || client.connected;
  pill.textContent = `${n} action${n === 1 ? "" : "s"} waiting`;
  pill.title = "Sent when the server answers again; dropped if it does not come back soon";
}

async function run(op, args, button, resultBox = null) {
  if (!client) return null;
  if (button) button.disabled = true;
  const id = `${idPrefix}-${++idCounter}`;
  const waited = !client.connected;
  const expiry = setTimeout(() => client.withdraw(id), WAIT_EXPIRES_MS());
  try {
    const promise = client.command(op, args, { id });
    showWaiting();
    const ack = await promise;
    if (resultBox) showResult(resultBox, ack);
    if (waited) toast("ok", "Done", `${opWords(op)}: applied once the server answered`);
    return ack;
  } catch (err) {
    if (err.code === "expired") {
      errorToast("expired", `${opWords(op)}: the server did not answer in time; nothing changed`);
    } else errorToast(err.code || "error", err.serverMessage || err.message);
    return null;
  } finally {
    clearTimeout(expiry);
    showWaiting();
    if (button) {
      button.disabled = false;
      if (client.state) render(); // what may be done now (the button's own state too)
    }
  }
}

function opWords(op) {
  return String(op).replaceAll("_", " ").replace(/^./, (c) => c.toUpperCase());
}

/** What a command did, right where it was asked (a card): its events' sentences. */
function showResult(box, ack) {
  const events = patchEvents.get(ack.v) || [];
  box.replaceChildren(...events.map((ev) => describeEvent(ev)));
  box.hidden = events.length === 0;
}

// --- rendering ---------------------------------------------------------------

function isGM() {
  return client?.role === "gm";
}

/** Can this viewer end `id`'s turn now (the server's affordance)? */
function mayEndTurn(id) {
  const entry = id ? affordancesOf(id).end_turn : null;
  return !!entry && !entry.why;
}

/** Is this character the user's to play (their own; the GM's own NPCs for the GM)? */
function isMine(c) {
  return (!!c.owner && c.owner === client.user) || (isGM() && !c.owner);
}

function setBar(stat, cur, max) {
  const pct = max > 0 ? Math.max(0, Math.min(100, (cur / max) * 100)) : 0;
  $(".fill", stat).style.width = `${pct}%`;
  $(".value", stat).textContent = `${cur} / ${max}`;
  stat.dataset.value = String(cur);
  stat.dataset.max = String(max);
  stat.classList.toggle("low", max > 0 && cur / max <= 0.25);
}

/** A bar that shows nothing: a status character's (no number left behind). */
function clearBar(stat) {
  $(".fill", stat).style.width = "0%";
  $(".value", stat).textContent = "";
  delete stat.dataset.value;
  delete stat.dataset.max;
  stat.classList.remove("low");
}

function makeCard(id) {
  const card = $("#char-template").content.firstElementChild.cloneNode(true);
  card.dataset.char = id;
  card.addEventListener("click", (ev) => {
    const btn = ev.target.closest("button[data-action]");
    if (btn) onCardAction(id, btn.dataset.action, card, btn);
  });
  const pick = $(".shown-pick", card);
  pick.addEventListener("change", () => {
    const c = client.state?.characters?.[id];
    if (c && pick.value !== (c.shown ?? "full")) {
      run("update_character", { char: id, set: { shown: pick.value } }, pick, $(".card-result", card));
    }
  });
  return card;
}

function onCardAction(id, action, card, btn) {
  const amount = Number.parseInt($(".amount", card).value, 10);
  const result = $(".card-result", card);
  const act = (op, args) => run(op, args, btn, result);
  switch (action) {
    case "damage":
    case "heal":
    case "ability_damage":
    case "ability_restore": {
      if (!Number.isFinite(amount) || amount < 0) {
        errorToast("invalid_args", "Enter an amount of 0 or more.");
        return;
      }
      const args = { char: id, amount };
      if (action === "damage" && $(".opt-nonlethal", card).checked) args.nonlethal = true;
      if (action.startsWith("ability_")) args.ability = $(".ability", card).value;
      act(action, args);
      break;
    }
    case "stabilize":
    case "stay_in_fight":
    case "stop_rest":
      act(action, { char: id });
      break;
    case "rest":
      act("rest", { char: id, kind: $(".rest-kind", card).value });
      break;
    case "first_aid": {
      const medic = $(".medic", card).value;
      if (medic) act("first_aid", { char: medic, patient: id });
      break;
    }
    case "tend": {
      const healer = $(".healer-pick", card).value;
      if (healer) act("tend", { char: healer, patient: id });
      break;
    }
    case "untend":
      act("untend", { patient: id });
      break;
    default:
      break;
  }
}

/** When a dying character next loses a PP (D5), in words (the shared table's `notes`). */
function dyingNote(c, state) {
  if (c.condition !== "dying" || numbersHidden(c)) return "";
  const inCombat = c.dying_next === null || c.dying_next === undefined; // at the end of its own turns
  return eventText.note("dying", { next: inCombat ? null : c.dying_next - state.clock, fresh: c.dying_fresh });
}

function updateCard(card, id, c, state) {
  $(".name", card).textContent = c.name;
  $(".level", card).textContent = `Level ${c.level}`;
  $(".owner", card).textContent = c.owner ? userName(c.owner) : "GM";
  $(".char-id", card).textContent = id;
  const cond = $(".condition", card);
  cond.textContent = c.condition;
  cond.className = `condition badge cond-${c.condition}`;
  card.dataset.condition = c.condition;
  card.dataset.shown = c.shown ?? "full";
  const partial = numbersHidden(c);
  card.classList.toggle("status-only", partial);
  $(".bars", card).hidden = partial;
  const noNumbers = $(".no-numbers", card);
  noNumbers.hidden = !partial;
  noNumbers.textContent = partial ? eventText.note("no_numbers", {}) : "";
  if (partial) for (const k of ["pv", "pe", "pp"]) clearBar($(`.${k}`, card));
  else {
    setBar($(".pv", card), c.pv, c.pv_max);
    setBar($(".pe", card), c.pe, c.pe_max);
    setBar($(".pp", card), c.pp, c.pp_max);
  }
  // who sees it: the GM sets it; an owner is told when others see less
  const pick = $(".shown-pick", card);
  if (document.activeElement !== pick) pick.value = c.shown ?? "full";
  const ownNote = !isGM() && c.owner && c.owner === client.user ? OWN_SHOWN_NOTES[c.shown] : undefined;
  const shownNote = $(".shown-note", card);
  shownNote.hidden = !ownNote;
  shownNote.textContent = ownNote ?? "";
  const combat = state.combat;
  const current = currentOf(combat);
  card.classList.toggle("current-turn", current === id);
  card.classList.toggle("mine", !!c.owner && c.owner === client.user);

  const dying = $(".dying-next", card);
  dying.textContent = dyingNote(c, state);
  dying.hidden = !dying.textContent;
  const activity = $(".activity", card);
  if (c.activity) {
    const left = c.activity.ends - state.clock;
    activity.textContent = eventText.note("resting", { kind: c.activity.kind, left });
    activity.dataset.kind = c.activity.kind;
    activity.hidden = false;
  } else {
    activity.hidden = true;
    activity.textContent = "";
    delete activity.dataset.kind;
  }
  $(".nonlethal", card).hidden = !c.nonlethal;
  const healer = $(".healer", card);
  // `tended` without `healer`: someone the viewer cannot see tends it (views)
  healer.hidden = !c.healer && !c.tended;
  healer.textContent = c.healer || c.tended ? eventText.note("tended", { healer: c.healer }) : "";
  const stab = $(".stability", card);
  if (c.condition === "stable" && c.stable_since !== null && c.stable_since !== undefined) {
    stab.hidden = false;
    // L1: a Constitution check every hour of being stable, 8 at most
    const done = c.stability_checks ?? 0;
    const next = c.stable_since + 3600 * (done + 1) - state.clock;
    stab.textContent =
      `stable for ${formatDuration(state.clock - c.stable_since)} · ` +
      `Constitution check ${done + 1} of 8 in ${formatDuration(Math.max(0, next))}`;
  } else stab.hidden = true;
  const dmg = Object.entries(c.ability_damage || {}).filter(([, v]) => v > 0);
  const abil = $(".ability-damage", card);
  abil.hidden = dmg.length === 0;
  abil.textContent = dmg.map(([k, v]) => `${k.toUpperCase()} −${v}`).join(" · ");

  // Controls: what this viewer may do now, as the server says it (the
  // affordances in their state). A button is shown for each action offered,
  // disabled with its reason for one that cannot be done now.
  const mine = affordancesOf(id);
  const gmTools = ["damage", "heal", "ability_damage", "ability_restore"];
  for (const op of gmTools) offerButton($(`[data-action="${op}"]`, card), mine[op]);
  $(".gm-only", card).hidden = !gmTools.some((op) => mine[op]);
  const own = ["stabilize", "stay_in_fight", "rest", "stop_rest"];
  for (const op of own) offerButton($(`[data-action="${op}"]`, card), mine[op]);
  offerChoices($(".rest-kind", card), mine.rest, "kind");
  $(".rest-row", card).hidden = !mine.rest && !mine.stop_rest;
  $(".owner-only", card).hidden = !own.some((op) => mine[op]);
  pick.hidden = !mine.update_character;

  // first aid (S1) and tending (L4) are offered under the medic or healer:
  // this card lists those whose offer names this character as the patient.
  const medics = offering("first_aid", id, state);
  $(".aid", card).hidden = medics.length === 0;
  fillPicker($(".medic", card), medics);
  const healers = offering("tend", id, state);
  offerButton($('[data-action="untend"]', card), mine.untend);
  $(".tend", card).hidden = healers.length === 0 && !mine.untend;
  $('[data-action="tend"]', card).hidden = healers.length === 0;
  $(".healer-pick", card).hidden = healers.length === 0;
  fillPicker($(".healer-pick", card), healers);
}

/** This viewer's affordances: {chars, room, undo}, empty from a server that predates them. */
function affordances() {
  return client?.state?.affordances ?? { chars: {}, room: {}, undo: null };
}

/** The actions offered for one character: {op: entry}. */
function affordancesOf(id) {
  return affordances().chars?.[id] ?? {};
}

/** Show a button for an offered action (disabled, with its reason, when not now). */
function offerButton(btn, entry) {
  if (!btn) return;
  if (btn.dataset.title === undefined) btn.dataset.title = btn.title || "";
  btn.hidden = !entry;
  btn.disabled = !!entry?.why;
  if (entry?.why) {
    btn.dataset.why = entry.why.key;
    btn.title = eventText.reason(entry.why);
  } else {
    delete btn.dataset.why;
    btn.title = btn.dataset.title;
  }
}

/** A <select> of an action's fixed choices (a rest's kind): refused ones disabled, with why. */
function offerChoices(select, entry, arg) {
  const refused = entry?.refused?.[arg] ?? {};
  select.hidden = !entry || !!entry.why;
  for (const option of select.options) {
    const why = refused[option.value];
    option.disabled = !!why;
    option.title = why ? eventText.reason(why) : "";
  }
  if (select.selectedOptions[0]?.disabled) {
    const first = [...select.options].find((o) => !o.disabled);
    if (first) select.value = first.value;
  }
}

/** The characters whose `op` (first aid, tend) offers `patient` now, in table order. */
function offering(op, patient, state) {
  return Object.entries(affordances().chars ?? {})
    .filter(([, ops]) => ops[op]?.choices?.patient?.includes(patient))
    .map(([cid]) => [cid, state.characters[cid]])
    .filter(([, c]) => c)
    .sort(byTableOrder);
}

/** The room's action `op` when it can be sent now, else null. */
function roomAction(op) {
  const entry = affordances().room?.[op];
  return entry && !entry.why ? entry : null;
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

/** Character order: for a player their own first (what concerns them), then the table's. */
function orderedCharacters(state) {
  const mineFirst = client.role === "player";
  return Object.entries(state.characters || {}).sort((a, b) => {
    if (mineFirst) {
      const ma = a[1].owner === client.user ? 0 : 1;
      const mb = b[1].owner === client.user ? 0 : 1;
      if (ma !== mb) return ma - mb;
    }
    return byTableOrder(a, b);
  });
}

function renderCharacters(state) {
  const box = $("#characters");
  const entries = orderedCharacters(state);
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
  $("#no-characters").textContent = isGM()
    ? "No characters yet: open Table setup, then New character."
    : "No characters in this room yet.";
  $("#char-count").textContent = entries.length ? `(${entries.length})` : "";
}

/** Whose turn it is, on top of the page: "Your turn" when it is the user's to play. */
function renderTurn(state) {
  const combat = state.combat;
  const banner = $("#turn-banner");
  const current = currentOf(combat);
  const c = current ? state.characters[current] : null;
  if (!combat) {
    banner.hidden = true;
    delete banner.dataset.mine;
    delete banner.dataset.char;
    delete banner.dataset.unseen;
    return;
  }
  banner.hidden = false;
  if (!c) {
    // a character this viewer cannot see is acting (its turn is null in their view)
    banner.dataset.mine = "false";
    banner.dataset.unseen = "true";
    delete banner.dataset.char;
    $("#turn-text").textContent = `Turn: someone you cannot see (round ${combat.round})`;
    $("#turn-end").hidden = true;
    return;
  }
  const mine = isMine(c);
  delete banner.dataset.unseen;
  banner.dataset.mine = String(mine);
  banner.dataset.char = current;
  $("#turn-text").textContent = mine
    ? `Your turn: ${c.name} (round ${combat.round})`
    : `${c.name}'s turn (round ${combat.round})`;
  const end = $("#turn-end");
  end.hidden = !mayEndTurn(current);
  end.textContent = `End ${c.name}'s turn`;
}

function renderCombat(state) {
  const combat = state.combat;
  const section = $("#combat");
  section.dataset.active = combat ? "true" : "false";
  $("#no-combat").hidden = !!combat || isGM();
  $("#combat-round").textContent = combat ? `Round ${combat.round}` : "";
  const list = $("#combat-order");
  list.replaceChildren();
  const current = currentOf(combat);
  if (combat) {
    combat.order.forEach((id, i) => {
      const c = state.characters[id];
      const now = id === current;
      const li = el("li", now ? "combatant current" : "combatant");
      li.dataset.char = id;
      if (now) li.setAttribute("aria-current", "true");
      li.append(el("span", "turn-marker", now ? "▶" : String(i + 1)));
      li.append(el("span", "cname", c ? c.name : charName(id)));
      if (c) {
        li.append(el("span", `badge small cond-${c.condition}`, c.condition));
        if (!numbersHidden(c)) li.append(el("span", "mini muted", `PV ${c.pv}/${c.pv_max}`));
      }
      const init = state.initiative?.[id]; // the GM's only (T4)
      if (init != null) li.querySelector(".cname").append(" ", el("span", "mini muted init", `init ${init}`));
      list.append(li);
    });
  }
  $("#combat-unseen").hidden = !combat || current !== null;
  const currentChar = current ? state.characters[current] : null;
  const endTurn = $("#end-turn");
  endTurn.hidden = !combat || !currentChar || !mayEndTurn(current);
  endTurn.textContent = currentChar ? `End ${currentChar.name}'s turn` : "End turn";
  $("#combat-end").hidden = !roomAction("combat_end");
  $("#combat-reroll").hidden = !combat || !roomAction("roll_initiative");

  const setup = $("#combat-setup");
  setup.hidden = !!combat || !affordances().room?.combat_start;
  if (!setup.hidden) renderSetup(state);
}

function renderSetup(state) {
  const ids = Object.entries(state.characters || {})
    .sort(byTableOrder)
    .map(([id]) => id);
  // who may join a combat: the server's offer of combat_start (its order's choices)
  const start = affordances().room?.combat_start;
  const joinable = new Set(start?.choices?.order ?? []);
  if (!setupOrder) setupOrder = ids.map((id) => ({ id, on: joinable.has(id) }));
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
      const bonus = document.createElement("input");
      bonus.type = "number";
      bonus.className = "init-bonus";
      bonus.placeholder = "+0";
      bonus.title = "Initiative bonus (optional)";
      bonus.setAttribute("aria-label", `Initiative bonus of ${charName(x.id)}`);
      bonus.value = initiativeBonus[x.id] ?? "";
      bonus.addEventListener("input", () => (initiativeBonus[x.id] = bonus.value));
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
      li.append(label, bonus, up, down);
      return li;
    }),
  );
  const canJoin = !!start && !start.why;
  for (const btn of [$("#combat-start"), $("#combat-initiative")]) {
    btn.disabled = !canJoin;
    btn.title = canJoin || !start?.why ? "" : eventText.reason(start.why);
  }
}

/** The bonus map roll_initiative takes, for `ids` (blank or 0 bonuses left out). */
function bonusesFor(ids) {
  const out = {};
  for (const id of ids) {
    const n = Number.parseInt(initiativeBonus[id] ?? "", 10);
    if (Number.isInteger(n) && n !== 0) out[id] = n;
  }
  return out;
}

/** A clock advance of an hour or more during a combat asks first (rests,
 * stability checks and deaths may fire mid-fight). */
async function advanceClock(seconds, button) {
  if (client.state.combat && seconds >= ASK_ADVANCE_SECONDS) {
    const lines = [`Advancing ${formatDuration(seconds)} runs every timed rule in it (stability checks, rests) in the middle of the fight.`];
    if (!(await confirmDialog("Combat is running: advance anyway?", lines, "Advance"))) return;
  }
  run("advance_clock", { seconds }, button);
}

function moveSetup(i, delta) {
  const j = i + delta;
  [setupOrder[i], setupOrder[j]] = [setupOrder[j], setupOrder[i]];
  if (client.state) renderSetup(client.state);
}

// --- the GM's table setup ------------------------------------------------------

let setupOpened = false;
let setupFolded = false;
// Events of setting the table up; any other one (a clock advance, combat,
// damage, a roll...) means play has started.
const SETUP_KINDS = new Set(["character", "user", "room", "undo"]);

/** Table setup, opened on arrival at an empty table, folds away once play
 * starts (the first event that is not setting the table up), unless the GM
 * is typing in it. Opened or closed by hand, it stays as the GM put it. */
function foldSetupOnPlay(patch) {
  const box = $("#setup");
  if (setupFolded || box.hidden || !box.open) return;
  if (!(patch.events || []).some((ev) => !SETUP_KINDS.has(ev.kind))) return;
  if (box.contains(document.activeElement) && document.activeElement.matches("input, select, textarea")) return;
  setupFolded = true;
  box.open = false;
}

/** The folded setup's line says what the table holds. */
function setupSummary(state) {
  const people = Object.keys(state?.users || {}).length;
  const chars = Object.keys(state?.characters || {}).length;
  $("#setup-summary").textContent = $("#setup").open
    ? "room, people and their links, characters"
    : `${people} ${people === 1 ? "person" : "people"} · ${chars} character${chars === 1 ? "" : "s"} · open to change`;
}

function renderTableSetup(state) {
  const box = $("#setup");
  box.hidden = !affordances().room?.update_room;
  if (box.hidden) return;
  if (!setupOpened) {
    setupOpened = true; // open it once on arrival when the table is still empty
    box.open = Object.keys(state.characters || {}).length === 0;
  }
  setupSummary(state);
  const form = $("#room-form");
  if (!form.contains(document.activeElement)) {
    form.name.value = state.name ?? "";
    form.round_seconds.value = String(state.round_seconds ?? 6);
    form.skip_dead.checked = state.skip_dead ?? true;
  }
  const people = Object.entries(state.users || {});
  $("#people").replaceChildren(
    ...people.map(([uid, u]) => {
      const li = el("li", "person");
      li.dataset.user = uid;
      li.append(el("span", "person-name", u.name), el("span", "muted small", ` ${u.role} · ${uid}`));
      if (uid === client.user) li.append(el("span", "muted small", " (you)"));
      else {
        const rotate = el("button", "icon", "New link");
        rotate.dataset.action = "rotate_token";
        rotate.title = "A new link for them; the old one stops working";
        const remove = el("button", "icon danger", "Remove");
        remove.dataset.action = "remove_user";
        remove.title = "Revoke their link";
        li.append(rotate, remove);
      }
      return li;
    }),
  );
  const chars = Object.entries(state.characters || {}).sort(byTableOrder);
  $("#setup-chars").replaceChildren(
    ...chars.map(([cid, c]) => {
      const li = el("li", "setup-char");
      li.dataset.char = cid;
      li.append(el("span", "person-name", c.name), el("code", "char-id", cid));
      li.append(el("span", "muted small", ` ${c.owner ? userName(c.owner) : "GM"}`));
      const shown = c.shown ?? "full";
      const badge = el("span", `badge small shown-badge shown-${shown}`, shown);
      badge.title = "Who sees it: full (everyone), status (others: name and condition), hidden (others: nothing)";
      li.append(badge);
      const edit = el("button", "icon", "Edit");
      edit.dataset.action = "edit";
      const remove = el("button", "icon danger", "Remove");
      remove.dataset.action = "remove_character";
      li.append(edit, remove);
      return li;
    }),
  );
}

/**
 * The server's WebSocket URL, from the page's own address, path included:
 * https://host/vtt/ (behind a reverse proxy under a sub-path) -> wss://host/vtt/.
 * @param {Location|URL} where
 */
function socketUrl(where) {
  const url = new URL(".", where.href);
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  url.hash = "";
  url.search = "";
  return url.href;
}

/** The host a `ws=` URL points to when it is not this page's server (the
 * token would go there), else null: a link may name another server, but
 * the page asks before it sends the token to it. */
function foreignHost(url, where) {
  try {
    const target = new URL(url, where.href);
    return target.host === where.host ? null : target.host;
  } catch {
    return String(url);
  }
}

// Where invitation links point: the server's public address (links.json,
// its --public-url) when it has one, else this page's own address.
let publicPage = null;
let publicPageRead = Promise.resolve();
const LOOPBACK_HOSTS = new Set(["127.0.0.1", "localhost", "[::1]", "::1", "0.0.0.0"]);

async function loadPublicPage() {
  try {
    const r = await fetch(new URL("links.json", location.href), { cache: "no-store" });
    const page = r.ok ? (await r.json()).page : null;
    publicPage = typeof page === "string" && /^https?:\/\//.test(page) ? page : null;
  } catch {
    publicPage = null; // an older server, or a page served elsewhere: our own address
  }
}

function linkFor(token) {
  const params = new URLSearchParams(location.hash.slice(1));
  const next = new URLSearchParams({ room: client.room, token });
  if (params.get("ws")) next.set("ws", params.get("ws"));
  if (publicPage && !params.get("ws")) return `${publicPage}#${next}`;
  return `${location.origin}${location.pathname}#${next}`;
}

async function showLink(who, token) {
  await publicPageRead; // links.json answered (or failed) before the first link is made
  $("#link-who").textContent = who;
  $("#link-url").value = linkFor(token);
  // A link on 127.0.0.1 opens nothing on a friend's machine: say so.
  $("#link-local").hidden = Boolean(publicPage) || !LOOPBACK_HOSTS.has(location.hostname);
  $("#link-box").hidden = false;
  $("#link-url").select();
}

async function copyLink() {
  const input = $("#link-url");
  try {
    await navigator.clipboard.writeText(input.value);
  } catch {
    input.select();
    document.execCommand("copy"); // http pages other than localhost have no clipboard API
  }
  toast("ok", "Link copied", "");
}

function wireTableSetup() {
  $("#room-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const form = ev.currentTarget;
    const state = client.state;
    const args = {};
    const name = form.name.value.trim();
    const round = Number.parseInt(form.round_seconds.value, 10);
    if (name && name !== state.name) args.name = name;
    if (Number.isFinite(round) && round !== state.round_seconds) args.round_seconds = round;
    if (form.skip_dead.checked !== (state.skip_dead ?? true)) args.skip_dead = form.skip_dead.checked;
    if (!Object.keys(args).length) return toast("ok", "Nothing changed", "");
    run("update_room", args, ev.submitter);
  });
  $("#invite-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const form = ev.currentTarget;
    const name = form.name.value.trim();
    const ack = await run("add_user", { name, role: form.role.value }, ev.submitter);
    if (ack?.result?.token) {
      form.reset();
      showLink(name, ack.result.token);
    }
  });
  $("#link-copy").addEventListener("click", copyLink);
  $("#setup").addEventListener("toggle", () => setupSummary(client?.state));
  $("#setup summary").addEventListener("click", () => {
    setupFolded = true; // the GM's own choice from now on
  });
  $("#people").addEventListener("click", async (ev) => {
    const btn = ev.target.closest("button[data-action]");
    if (!btn) return;
    const uid = btn.closest("[data-user]").dataset.user;
    const who = userName(uid);
    if (btn.dataset.action === "rotate_token") {
      const ok = await confirmDialog(`A new link for ${who}?`, [`Their current link stops working at once.`], "New link");
      if (!ok) return;
      const ack = await run("rotate_token", { user: uid }, btn);
      if (ack?.result?.token) showLink(who, ack.result.token);
    } else {
      const lines = [`Their link stops working; their characters go back to the GM.`];
      if (await confirmDialog(`Remove ${who}?`, lines, "Remove")) run("remove_user", { user: uid }, btn);
    }
  });
  $("#setup-chars").addEventListener("click", async (ev) => {
    const btn = ev.target.closest("button[data-action]");
    if (!btn) return;
    const cid = btn.closest("[data-char]").dataset.char;
    if (btn.dataset.action === "edit") openCharForm(cid);
    else {
      const lines = ["Its sheet and its place in the combat go. Undo brings it back."];
      if (await confirmDialog(`Remove ${charName(cid)}?`, lines, "Remove")) run("remove_character", { char: cid }, btn);
    }
  });
  $("#new-char").addEventListener("click", () => openCharForm(null));
  $("#char-form").addEventListener("submit", onCharSubmit);
}

let editing = null; // the character id the form edits, null for a new one

function openCharForm(cid) {
  editing = cid;
  const form = $("#char-form");
  const state = client.state;
  const owner = form.owner;
  // players first; the others too, so that editing never drops an owner
  const users = Object.entries(state.users || {}).sort((a, b) => (a[1].role === "player" ? 0 : 1) - (b[1].role === "player" ? 0 : 1));
  owner.replaceChildren(
    new Option("GM (nobody)", ""),
    ...users.map(([uid, u]) => new Option(u.role === "player" ? u.name : `${u.name} (${u.role})`, uid)),
  );
  form.reset();
  $$(".edit-only", form).forEach((n) => (n.hidden = cid === null));
  $$(".create-only", form).forEach((n) => (n.hidden = cid !== null));
  $("#char-form-title").textContent = cid === null ? "New character" : `Edit ${charName(cid)} (${cid})`;
  $("#char-save").textContent = cid === null ? "Create" : "Save";
  if (cid !== null) {
    const c = state.characters[cid];
    const values = { ...c, ...c.abilities, pe_max: c.pe_max_base ?? c.pe_max, owner: c.owner ?? "", shown: c.shown ?? "full" };
    for (const input of form.elements) if (input.name && input.name in values) input.value = String(values[input.name]);
  }
  $("#char-dialog").showModal();
  form.name.focus();
}

function readCharForm(form) {
  const num = (name) => Number.parseInt(form[name].value, 10);
  const sheet = {
    name: form.name.value.trim(),
    level: num("level"),
    pv_max: num("pv_max"),
    pe_max: num("pe_max"),
    pp_max: num("pp_max"),
    medicine: num("medicine"),
    abilities: Object.fromEntries(ABILITIES.map((a) => [a, num(a)])),
    owner: form.owner.value || null,
  };
  if (form.shown.value) sheet.shown = form.shown.value; // "": the default (creation only)
  if (editing !== null) for (const k of ["pv", "pe", "pp"]) sheet[k] = num(k);
  return sheet;
}

async function onCharSubmit(ev) {
  ev.preventDefault();
  const form = ev.currentTarget;
  if (ev.submitter?.value === "cancel") return $("#char-dialog").close();
  if (!form.reportValidity()) return;
  const sheet = readCharForm(form);
  let ack;
  if (editing === null) {
    if (sheet.owner === null) delete sheet.owner;
    ack = await run("add_character", sheet, ev.submitter);
    if (ack) toast("ok", `${sheet.name} joins the table`, `id ${ack.result.char}`);
  } else {
    const c = client.state.characters[editing];
    const current = { ...c, pe_max: c.pe_max_base ?? c.pe_max };
    const set = {};
    for (const [k, v] of Object.entries(sheet)) {
      if (k === "abilities") {
        const changed = Object.fromEntries(Object.entries(v).filter(([a, s]) => c.abilities[a] !== s));
        if (Object.keys(changed).length) set.abilities = changed;
      } else if (current[k] !== v) set[k] = v;
    }
    if (!Object.keys(set).length) return $("#char-dialog").close();
    ack = await run("update_character", { char: editing, set }, ev.submitter);
  }
  if (ack) $("#char-dialog").close();
}

// --- undo ---------------------------------------------------------------------

/** The undo button, from what the server says an undo would revert now. */
function renderUndo() {
  const btn = $("#undo");
  if (!btn) return;
  const undo = affordances().undo;
  btn.hidden = !undo;
  btn.disabled = !undo || "why" in undo;
  btn.title = !undo ? "" : undo.why ? eventText.reason(undo.why) : `Reverts v${undo.v}: ${undoPhrase(undo)}`;
  btn.dataset.undo = undo && !undo.why ? String(undo.v) : "";
}

/** What the undo would revert, in words ("Bastien's first aid on Chloe"). */
function undoPhrase(undo) {
  return eventText.command(undo.op, patchEvents.get(undo.v)) ?? `version ${undo.v} by ${userName(undo.by)}`;
}

async function onUndo(btn) {
  const undo = affordances().undo;
  if (!undo || undo.why) return;
  const events = patchEvents.get(undo.v) || [];
  const title = `Undo ${undoPhrase(undo)}?`;
  const lines = events.length
    ? events.map(sentence)
    : ["It is reverted as a new version; undo again to walk further back."];
  if (!(await confirmDialog(title, lines, "Undo"))) return;
  const ack = await run("undo", {}, btn);
  if (!ack) return;
  const ev = (patchEvents.get(ack.v) || []).find((e) => e.kind === "undo");
  toast("ok", ev ? sentence(ev) : `Undid version ${ack.result?.undone}`, "");
}

function markUndone() {
  for (const li of $$("#feed li.event")) {
    const isUndone = undone.has(Number(li.dataset.v));
    if (isUndone && !li.classList.contains("undone")) {
      li.classList.add("undone");
      $(".stamp", li).append(el("span", "undone-tag", " · undone"));
    }
  }
}

// --- the page ------------------------------------------------------------------

function render() {
  const state = client.state;
  if (!state) return;
  names.update(state);
  document.body.dataset.role = client.role || "";
  $("#room-name").textContent = state.name || state.room;
  $("#room-id").textContent = state.room;
  const me = state.users?.[client.user];
  $("#whoami").textContent = `${me?.name ?? client.user} · ${client.role}`;
  $("#clock").textContent = formatClock(state.clock);
  $("#clock").dataset.seconds = String(state.clock);
  $("#version").textContent = `v${client.version}`;
  $("#gm-controls").hidden = !affordances().room?.advance_clock;
  renderUndo();
  const queued = state.queued_rolls || [];
  $("#queued-rolls").textContent = queued.length ? `queued: ${queued.join(", ")}` : "no queued d20";
  $('[data-seconds="round"]').title = `One round (${state.round_seconds ?? 6} s)`;
  renderTurn(state);
  renderTableSetup(state);
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
  names.update(client.state); // the state already holds the patch: names of newcomers
  patch.events = (patch.events || []).map((ev) => eventText.complete(ev, patch.ops));
  remember(patch);
  const events = patch.events || [];
  if (!events.length) return;
  const feed = $("#feed");
  const block = document.createDocumentFragment();
  for (const ev of events) block.append(eventItem(ev, patch));
  feed.prepend(block);
  while (feed.children.length > FEED_MAX) feed.lastElementChild.remove();
  $("#no-events").hidden = true;
  markUndone();
}

function setStatus(status, detail) {
  showWaiting();
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
    $("#conn-error-text").textContent = `This link does not open the table: ${detail}.`;
    banner.hidden = false;
  } else if (status === "connected") {
    banner.hidden = true;
  }
}

// --- global controls ---------------------------------------------------------

function endCurrentTurn(button) {
  const combat = client?.state?.combat;
  if (!combat) return;
  const current = currentOf(combat);
  if (current) run("end_turn", { char: current, round: combat.round }, button);
}

function wireControls() {
  $("#gm-controls").addEventListener("click", (ev) => {
    const btn = ev.target.closest("button[data-action]");
    if (!btn || !client?.state) return;
    const action = btn.dataset.action;
    if (action === "advance") {
      const raw = btn.dataset.seconds;
      const seconds = raw === "round" ? client.state.round_seconds || 6 : Number(raw);
      advanceClock(seconds, btn);
    } else if (action === "advance-custom") {
      const seconds = Number.parseInt($("#advance-seconds").value, 10);
      if (!Number.isFinite(seconds) || seconds <= 0) {
        errorToast("invalid_args", "Enter a number of seconds above 0.");
        return;
      }
      advanceClock(seconds, btn);
    } else if (action === "queue_rolls") {
      const rolls = $("#queue-rolls")
        .value.split(/[\s,;]+/)
        .filter(Boolean)
        .map((x) => Number.parseInt(x, 10));
      if (!rolls.length || rolls.some((r) => !Number.isInteger(r))) {
        errorToast("invalid_args", "Enter natural d20 results, e.g. 12, 4, 18.");
        return;
      }
      run("queue_rolls", { rolls }, btn).then((ack) => {
        if (ack) $("#queue-rolls").value = "";
      });
    } else if (action === "undo") {
      onUndo(btn);
    }
  });
  $("#end-turn").addEventListener("click", (ev) => endCurrentTurn(ev.currentTarget));
  $("#turn-end").addEventListener("click", (ev) => endCurrentTurn(ev.currentTarget));
  $("#combat-end").addEventListener("click", (ev) => run("combat_end", {}, ev.currentTarget));
  $("#combat-start").addEventListener("click", (ev) => {
    const order = (setupOrder || []).filter((x) => x.on).map((x) => x.id);
    if (!order.length) {
      errorToast("invalid_args", "Tick at least one combatant.");
      return;
    }
    run("combat_start", { order }, ev.currentTarget);
  });
  $("#combat-initiative").addEventListener("click", (ev) => {
    const chars = (setupOrder || []).filter((x) => x.on).map((x) => x.id);
    if (!chars.length) {
      errorToast("invalid_args", "Tick at least one combatant.");
      return;
    }
    run("roll_initiative", { chars, bonus: bonusesFor(chars) }, ev.currentTarget);
  });
  $("#combat-reroll").addEventListener("click", (ev) => {
    const chars = roomAction("roll_initiative")?.choices?.chars ?? []; // who rolls now (the server says)
    run("roll_initiative", { chars, bonus: bonusesFor(chars) }, ev.currentTarget);
  });
  wireTableSetup();
}

// --- start -------------------------------------------------------------------

/** The login form: a pasted link (…#room=x&token=y) or a room and a token. */
function showLogin(room) {
  const form = $("#login");
  form.hidden = false;
  $("#app").hidden = true;
  if (room) form.room.value = room;
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const raw = form.token.value.trim();
    const fromLink = raw.includes("#") ? new URLSearchParams(raw.slice(raw.indexOf("#") + 1)) : null;
    const next = fromLink?.get("token")
      ? fromLink
      : new URLSearchParams({ room: form.room.value.trim(), token: raw });
    if (!next.get("room")) {
      errorToast("invalid_args", "Give the room too, or paste the whole link.");
      return;
    }
    location.hash = next.toString();
    location.reload();
  });
}

async function start() {
  const params = new URLSearchParams(location.hash.slice(1));
  const room = params.get("room");
  const token = params.get("token");
  $("#conn-error-back").addEventListener("click", () => {
    client?.close?.();
    history.replaceState(null, "", location.pathname);
    $("#conn-error").hidden = true;
    showLogin(room);
  });
  if (!room || !token) {
    showLogin(room);
    return;
  }
  let texts;
  try {
    texts = await loadTexts();
  } catch (err) {
    // events then read as their kind; the table still works
    texts = {
      labels: {},
      events: {},
      notes: { no_numbers: "", resting: "{kind|words}", dying: "", tended: "" },
      unknown: "{kind|words}",
      commands: { fallback: "{op|words} (v{undone})" },
    };
    toast("error", "Event texts missing", String(err.message || err));
  }
  eventText = new EventText(texts, names, (v) => patchEvents.get(v) ?? null);
  const url = params.get("ws") || socketUrl(location);
  const foreign = foreignHost(url, location);
  if (
    foreign !== null &&
    !window.confirm(
      `This link sends your token to another server: ${foreign}.\n` +
        "Continue only if you trust that server (it could act as you at this table).",
    )
  ) {
    history.replaceState(null, "", location.pathname);
    showLogin(room);
    return;
  }
  client = new VttSyncClient({ url, token, room });
  /** @type {any} */ (window).vttClient = client; // for debugging and tests (the token is not enumerable)
  client.on("status", setStatus);
  client.on("patch", addPatch); // before "state": a card's result finds its events
  client.on("patch", foldSetupOnPlay);
  client.on("state", render);
  let backfilled = false;
  client.on("welcome", () => {
    if (backfilled) return;
    backfilled = true; // the recent log, once, on arrival (older entries go below)
    // Back to the version Undo would revert too (after undos it can be far
    // back), so that its tooltip says what it reverts.
    const target = affordances().undo?.v;
    const reach = Number.isInteger(target) ? Math.min(KEEP_PATCHES, client.version - target + 1) : 0;
    client.history(Math.max(BACKFILL_PATCHES, reach)).then((patches) => {
      const feed = $("#feed");
      const shown = new Set($$("li.event", feed).map((li) => li.dataset.v));
      const block = document.createDocumentFragment();
      for (const patch of patches) {
        patch.events = (patch.events || []).map((ev) => eventText.complete(ev, patch.ops));
        remember(patch);
      }
      for (const patch of patches.slice(-BACKFILL_PATCHES).reverse()) {
        if (shown.has(String(patch.v))) continue;
        for (const ev of patch.events || []) block.append(eventItem(ev, patch));
      }
      feed.append(block);
      if (feed.children.length) $("#no-events").hidden = true;
      markUndone();
      renderUndo(); // drawn with the state, before these events were known
    });
  });
  client.on("error", (frame) => errorToast(frame.code || "error", frame.message || ""));
  wireControls();
  publicPageRead = loadPublicPage(); // for the invitation links; they are made later
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
