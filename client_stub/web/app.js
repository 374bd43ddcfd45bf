// The vtt-sync tracker page: a live view of one room, with controls by role,
// and for the GM the table's setup (room, people and their links, characters).
// Room and token come from the URL fragment (#room=demo&token=...), which the
// browser never sends to the server; the WebSocket URL is derived from location.
//
// This module starts the page and draws it from the room's mirror; the parts
// are modules over one state (page.js): cards.js (the characters), combat.js
// (whose turn, the order; combat-setup.js before a combat, combat-edit.js
// the GM's edits of one), setup.js (the GM's table setup), log.js (the event
// feed), undo.js, commands.js (sending; fields.js marks a refused field),
// offers.js (the server's offers as controls), links.js (addresses).

import { renderCharacters } from "./cards.js";
import { renderCombat, renderTurn, wireCombat } from "./combat.js";
import { errorToast, run, showWaiting } from "./commands.js";
import { $ } from "./dom.js";
import { EventText, formatClock, formatDuration, loadTexts } from "./event-text.js";
import { foreignHost, loadPublicPage, socketUrl } from "./links.js";
import { addPatch, backfill } from "./log.js";
import { confirmDialog, toast } from "./notices.js";
import { affordances, page } from "./page.js";
import { foldSetupOnPlay, renderTableSetup, wireTableSetup } from "./setup.js";
import { onUndo, renderUndo } from "./undo.js";
import { VttSyncClient } from "./vtt-sync-client.js";

const ASK_ADVANCE_SECONDS = 3600; // an advance this long during a combat asks first

function render() {
  const client = page.client;
  const state = client.state;
  if (!state) return;
  page.names.update(state);
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
  $("#more-tools-note").textContent = queued.length ? `${queued.length} d20 queued` : "";
  $('[data-seconds="round"]').title = `One round (${state.round_seconds ?? 6} s)`;
  renderTurn(state);
  renderTableSetup(state);
  renderCharacters(state);
  renderCombat(state);
}

function setStatus(status, detail) {
  showWaiting();
  const pill = $("#status");
  pill.dataset.status = status;
  const labels = {
    connecting: page.client && page.client.connections ? "reconnecting…" : "connecting…",
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

// --- the GM's toolbar ----------------------------------------------------------

/** A clock advance of an hour or more during a combat asks first (rests,
 * stability checks and deaths may fire mid-fight). */
async function advanceClock(seconds, button) {
  if (page.client.state.combat && seconds >= ASK_ADVANCE_SECONDS) {
    const lines = [`Advancing ${formatDuration(seconds)} runs every timed rule in it (stability checks, rests) in the middle of the fight.`];
    if (!(await confirmDialog("Combat is running: advance anyway?", lines, "Advance"))) return;
  }
  const fieldOf = (path) => (path === "seconds" && button.id === "advance-custom" ? $("#advance-seconds") : null);
  run("advance_clock", { seconds }, button, { fieldOf });
}

function queueRolls(btn) {
  const rolls = $("#queue-rolls")
    .value.split(/[\s,;]+/)
    .filter(Boolean)
    .map((x) => Number.parseInt(x, 10));
  if (!rolls.length || rolls.some((r) => !Number.isInteger(r))) {
    errorToast("invalid_args", "Enter natural d20 results, e.g. 12, 4, 18.");
    return;
  }
  const fieldOf = (path) => (path.startsWith("rolls") ? $("#queue-rolls") : null);
  run("queue_rolls", { rolls }, btn, { fieldOf }).then((ack) => {
    if (ack) $("#queue-rolls").value = "";
  });
}

/** The toolbar's second half is open on a wide screen (its summary does
 * not show there), folded on a phone (style.css). */
function unfoldToolsWhenWide() {
  const wide = matchMedia("(min-width: 521px)");
  const unfold = () => {
    if (wide.matches) $("#more-tools").open = true;
  };
  wide.addEventListener("change", unfold);
  unfold();
}

function wireControls() {
  unfoldToolsWhenWide();
  $("#gm-controls").addEventListener("click", (ev) => {
    const btn = ev.target.closest("button[data-action]");
    if (!btn || !page.client?.state) return;
    const action = btn.dataset.action;
    if (action === "advance") {
      const raw = btn.dataset.seconds;
      const seconds = raw === "round" ? page.client.state.round_seconds || 6 : Number(raw);
      advanceClock(seconds, btn);
    } else if (action === "advance-custom") {
      const seconds = Number.parseInt($("#advance-seconds").value, 10);
      if (!Number.isFinite(seconds) || seconds <= 0) {
        errorToast("invalid_args", "Enter a number of seconds above 0.");
        return;
      }
      advanceClock(seconds, btn);
    } else if (action === "queue_rolls") {
      queueRolls(btn);
    } else if (action === "undo") {
      onUndo(btn);
    }
  });
  wireCombat();
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

/** The table of texts; without it, events read as their kind (the table still works). */
async function texts() {
  try {
    return await loadTexts();
  } catch (err) {
    toast("error", "Event texts missing", String(err.message || err));
    return {
      labels: {},
      events: {},
      notes: { no_numbers: "", resting: "{kind|words}", dying: "", tended: "" },
      unknown: "{kind|words}",
      commands: { fallback: "{op|words} (v{undone})" },
    };
  }
}

async function start() {
  const params = new URLSearchParams(location.hash.slice(1));
  const room = params.get("room");
  const token = params.get("token");
  $("#conn-error-back").addEventListener("click", () => {
    page.client?.close?.();
    history.replaceState(null, "", location.pathname);
    $("#conn-error").hidden = true;
    showLogin(room);
  });
  if (!room || !token) {
    showLogin(room);
    return;
  }
  page.eventText = new EventText(await texts(), page.names, (v) => page.patchEvents.get(v) ?? null);
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
  const client = new VttSyncClient({ url, token, room });
  page.client = client;
  page.render = render;
  /** @type {any} */ (window).vttClient = client; // for debugging and tests (the token is not enumerable)
  client.on("status", setStatus);
  client.on("patch", addPatch); // before "state": a card's result finds its events
  client.on("patch", foldSetupOnPlay);
  client.on("state", render);
  let backfilled = false;
  client.on("welcome", () => {
    if (backfilled) return;
    backfilled = true; // the recent log, once, on arrival (older entries go below)
    // Undo was drawn with the state, before these events were known.
    backfill().then(renderUndo);
  });
  client.on("error", (frame) => errorToast(frame.code || "error", frame.message || ""));
  wireControls();
  loadPublicPage(); // for the invitation links; they are made later
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
