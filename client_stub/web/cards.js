// The characters' cards: a card per character the viewer sees (name, level,
// owner, condition, bars, what goes on with it), with the actions this
// viewer may take on it, as the server offers them (its affordances).

import { run, errorToast } from "./commands.js";
import { $, $$, el } from "./dom.js";
import { formatDuration } from "./event-text.js";
import { fillPicker, offerButton, offerChoices, offering } from "./offers.js";
import { affordancesOf, byTableOrder, currentOf, isGM, numbersHidden, page, userName } from "./page.js";

const OWN_SHOWN_NOTES = { status: "others see its status only", hidden: "hidden from others" };

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
  for (const unit of $$(".act", card)) unit.append(el("span", "why")); // said when folded
  card.addEventListener("click", (ev) => {
    const btn = ev.target.closest("button[data-action]");
    if (btn) onCardAction(id, btn.dataset.action, card, btn);
  });
  const pick = $(".shown-pick", card);
  pick.addEventListener("change", () => {
    const c = page.client.state?.characters?.[id];
    if (c && pick.value !== (c.shown ?? "full")) {
      run("update_character", { char: id, set: { shown: pick.value } }, pick, { result: $(".card-result", card) });
    }
  });
  return card;
}

function onCardAction(id, action, card, btn) {
  const amount = Number.parseInt($(".amount", card).value, 10);
  const result = $(".card-result", card);
  const fieldOf = (path) => (path === "amount" ? $(".amount", card) : null);
  const act = (op, args) => run(op, args, btn, { result, fieldOf });
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
  return page.eventText.note("dying", { next: inCombat ? null : c.dying_next - state.clock, fresh: c.dying_fresh });
}

/** A stable character's time stable and, as the server gives it (its view's
 * `next_check`), when its next Constitution check comes (L1). */
function stabilityNote(c, state) {
  if (c.condition !== "stable" || c.stable_since === null || c.stable_since === undefined) return "";
  const since = `stable for ${formatDuration(state.clock - c.stable_since)}`;
  const next = c.next_check;
  if (!next) return since; // no check left, or a server that does not say
  return `${since} · Constitution check ${next.n} of ${next.of} in ${formatDuration(Math.max(0, next.at - state.clock))}`;
}

/** Set a tag's text, hidden when empty. */
function tag(node, text) {
  node.textContent = text;
  node.hidden = !text;
}

function updateHead(card, id, c) {
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
  noNumbers.textContent = partial ? page.eventText.note("no_numbers", {}) : "";
  if (partial) for (const k of ["pv", "pe", "pp"]) clearBar($(`.${k}`, card));
  else {
    setBar($(".pv", card), c.pv, c.pv_max);
    setBar($(".pe", card), c.pe, c.pe_max);
    setBar($(".pp", card), c.pp, c.pp_max);
  }
  // who sees it: the GM sets it; an owner is told when others see less
  const pick = $(".shown-pick", card);
  if (document.activeElement !== pick) pick.value = c.shown ?? "full";
  const client = page.client;
  const ownNote = !isGM() && c.owner && c.owner === client.user ? OWN_SHOWN_NOTES[c.shown] : undefined;
  tag($(".shown-note", card), ownNote ?? "");
}

function updateTags(card, c, state) {
  tag($(".dying-next", card), dyingNote(c, state));
  const activity = $(".activity", card);
  if (c.activity) {
    const left = c.activity.ends - state.clock;
    activity.textContent = page.eventText.note("resting", { kind: c.activity.kind, left });
    activity.dataset.kind = c.activity.kind;
    activity.hidden = false;
  } else {
    activity.hidden = true;
    activity.textContent = "";
    delete activity.dataset.kind;
  }
  $(".nonlethal", card).hidden = !c.nonlethal;
  // `tended` without `healer`: someone the viewer cannot see tends it (views)
  tag($(".healer", card), c.healer || c.tended ? page.eventText.note("tended", { healer: c.healer }) : "");
  tag($(".stability", card), stabilityNote(c, state));
  const dmg = Object.entries(c.ability_damage || {}).filter(([, v]) => v > 0);
  tag($(".ability-damage", card), dmg.map(([k, v]) => `${k.toUpperCase()} −${v}`).join(" · "));
}

// The buttons shown for the character's own offers (first aid and tending
// are offered under the medic or healer: see updateControls).
const OFFERED_OPS = ["damage", "heal", "ability_damage", "ability_restore", "untend", "stabilize", "stay_in_fight", "rest", "stop_rest"];

/** Put `units` in `box` in their order, before `tail` (moves only when it changed). */
function place(box, units, tail) {
  const there = [...box.children].filter((n) => units.includes(n));
  if (there.length === units.length && there.every((n, i) => n === units[i])) return;
  for (const unit of units) box.insertBefore(unit, tail);
}

// Actions: what this viewer may do now, as the server says it (the
// affordances in their state). Each action (.act, data-ops: its ops) shows
// when one of its ops is offered: on the card when it can be done now, else
// folded behind the card's one "More", disabled, with the server's reason.
// An occasional action (data-fold: ability damage) folds there too, enabled:
// a card at phone width then holds its bars and one row of actions.
function updateControls(card, id, state) {
  const mine = affordancesOf(id);
  for (const op of OFFERED_OPS) offerButton($(`[data-action="${op}"]`, card), mine[op]);
  offerChoices($(".rest-kind", card), mine.rest, "kind");
  $(".shown-pick", card).hidden = !mine.update_character;
  // first aid (S1) and tending (L4) are offered under the medic or healer:
  // this card lists those whose offer names this character as the patient.
  const medics = offering("first_aid", id, state);
  fillPicker($(".medic", card), medics);
  const healers = offering("tend", id, state);
  fillPicker($(".healer-pick", card), healers);
  const asPatient = { first_aid: medics.length ? {} : null, tend: healers.length ? {} : null };
  const now = [];
  const later = [];
  for (const unit of $$(".act", card)) {
    const entries = unit.dataset.ops
      .split(" ")
      .map((op) => (op in asPatient ? asPatient[op] : mine[op]))
      .filter(Boolean);
    unit.hidden = entries.length === 0;
    if (unit.hidden) continue;
    const possible = entries.some((entry) => !entry.why);
    (possible && !("fold" in unit.dataset) ? now : later).push(unit);
    $(".why", unit).textContent = possible ? "" : entries.map((entry) => page.eventText.reason(entry.why)).join("; ");
  }
  const more = $(".more", card);
  place($(".actions", card), now, more);
  place($(".later", card), later, null);
  more.hidden = later.length === 0;
  $(".actions", card).hidden = now.length + later.length === 0;
}

function updateCard(card, id, c, state) {
  updateHead(card, id, c);
  const current = currentOf(state.combat);
  card.classList.toggle("current-turn", current === id);
  card.classList.toggle("mine", !!c.owner && c.owner === page.client.user);
  updateTags(card, c, state);
  updateControls(card, id, state);
}

/** Character order: for a player their own first (what concerns them), then the table's. */
function orderedCharacters(state) {
  const client = page.client;
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

export function renderCharacters(state) {
  const box = $("#characters");
  const cards = page.cards;
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
