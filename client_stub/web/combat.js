// The combat: whose turn it is (the banner on top of the page), the order
// and its controls in the combat panel, and, before a combat, the GM's setup
// of one (who fights, in which order, with which initiative bonus).

import { errorToast, run } from "./commands.js";
import { $, el } from "./dom.js";
import { affordances, byTableOrder, charName, currentOf, isGM, isMine, mayEndTurn, numbersHidden, page, roomAction } from "./page.js";

/** Whose turn it is, on top of the page: "Your turn" when it is the user's to play. */
export function renderTurn(state) {
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

export function renderCombat(state) {
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

// --- the GM's setup of a combat ----------------------------------------------

function renderSetup(state) {
  const ids = Object.entries(state.characters || {})
    .sort(byTableOrder)
    .map(([id]) => id);
  // who may join a combat: the server's offer of combat_start (its order's choices)
  const start = affordances().room?.combat_start;
  const joinable = new Set(start?.choices?.order ?? []);
  const setup = page.combatSetup;
  if (!setup.order) setup.order = ids.map((id) => ({ id, on: joinable.has(id) }));
  setup.order = setup.order.filter((x) => ids.includes(x.id));
  for (const id of ids) if (!setup.order.some((x) => x.id === id)) setup.order.push({ id, on: true });
  const list = $("#combat-setup-list");
  list.replaceChildren(
    ...setup.order.map((x, i) => {
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
      bonus.value = setup.bonus[x.id] ?? "";
      bonus.addEventListener("input", () => (setup.bonus[x.id] = bonus.value));
      const up = el("button", "icon", "▲");
      up.type = "button";
      up.title = "Earlier";
      up.disabled = i === 0;
      up.addEventListener("click", () => moveSetup(i, -1));
      const down = el("button", "icon", "▼");
      down.type = "button";
      down.title = "Later";
      down.disabled = i === setup.order.length - 1;
      down.addEventListener("click", () => moveSetup(i, 1));
      li.append(label, bonus, up, down);
      return li;
    }),
  );
  const canJoin = !!start && !start.why;
  for (const btn of [$("#combat-start"), $("#combat-initiative")]) {
    btn.disabled = !canJoin;
    btn.title = canJoin || !start?.why ? "" : page.eventText.reason(start.why);
  }
}

function moveSetup(i, delta) {
  const order = page.combatSetup.order;
  const j = i + delta;
  [order[i], order[j]] = [order[j], order[i]];
  if (page.client.state) renderSetup(page.client.state);
}

/** The bonus map roll_initiative takes, for `ids` (blank or 0 bonuses left out). */
function bonusesFor(ids) {
  const out = {};
  for (const id of ids) {
    const n = Number.parseInt(page.combatSetup.bonus[id] ?? "", 10);
    if (Number.isInteger(n) && n !== 0) out[id] = n;
  }
  return out;
}

function endCurrentTurn(button) {
  const combat = page.client?.state?.combat;
  if (!combat) return;
  const current = currentOf(combat);
  if (current) run("end_turn", { char: current, round: combat.round }, button);
}

/** The ticked combatants of the setup, or null (said) when none is. */
function ticked() {
  const chars = (page.combatSetup.order || []).filter((x) => x.on).map((x) => x.id);
  if (chars.length) return chars;
  errorToast("invalid_args", "Tick at least one combatant.");
  return null;
}

export function wireCombat() {
  $("#end-turn").addEventListener("click", (ev) => endCurrentTurn(ev.currentTarget));
  $("#turn-end").addEventListener("click", (ev) => endCurrentTurn(ev.currentTarget));
  $("#combat-end").addEventListener("click", (ev) => run("combat_end", {}, ev.currentTarget));
  $("#combat-start").addEventListener("click", (ev) => {
    const order = ticked();
    if (order) run("combat_start", { order }, ev.currentTarget);
  });
  $("#combat-initiative").addEventListener("click", (ev) => {
    const chars = ticked();
    if (chars) run("roll_initiative", { chars, bonus: bonusesFor(chars) }, ev.currentTarget);
  });
  $("#combat-reroll").addEventListener("click", (ev) => {
    const chars = roomAction("roll_initiative")?.choices?.chars ?? []; // who rolls now (the server says)
    run("roll_initiative", { chars, bonus: bonusesFor(chars) }, ev.currentTarget);
  });
}
