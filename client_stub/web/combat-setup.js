// The GM's setup of a combat, before one runs: who fights (ticked), in which
// order, with which initiative bonus (T4, kept for the rolls made later).

import { errorToast } from "./commands.js";
import { $, el } from "./dom.js";
import { affordances, byTableOrder, charName, page } from "./page.js";

export function renderSetup(state) {
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
export function bonusesFor(ids) {
  const out = {};
  for (const id of ids) {
    const n = Number.parseInt(page.combatSetup.bonus[id] ?? "", 10);
    if (Number.isInteger(n) && n !== 0) out[id] = n;
  }
  return out;
}

/** The ticked combatants of the setup, or null (said) when none is. */
export function ticked() {
  const chars = (page.combatSetup.order || []).filter((x) => x.on).map((x) => x.id);
  if (chars.length) return chars;
  errorToast("invalid_args", "Tick at least one combatant.");
  return null;
}

