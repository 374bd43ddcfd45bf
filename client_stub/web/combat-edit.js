// The GM edits a running combat in place, as a VTT's tracker does: add and
// remove combatants, reorder them (buttons, or drag and drop), delay the
// current one (it acts later this round), set one combatant's initiative
// (T4). Each is an op the server has: `set_order` (reorder, add, remove,
// delay: the order and whose turn it is) and `roll_initiative` (one
// combatant's check, with the GM's own die or the server's), offered only
// when the server offers them: set_order's choices are who may be in the
// order, roll_initiative's who may roll. Going back a turn is the undo
// (combat.js).

import { bonusesFor } from "./combat-setup.js";
import { errorToast, run } from "./commands.js";
import { $, $$, el } from "./dom.js";
import { fillPicker } from "./offers.js";
import { charName, page, roomAction } from "./page.js";

/** Is the panel in edit mode (the GM turned it on and set_order is offered)? */
export function editing() {
  return page.combatEdit.on && !!roomAction("set_order");
}

/** The edit toggle and the add line, under the order. */
export function renderEditing(state, edit) {
  const toggle = $("#combat-edit");
  toggle.hidden = !state.combat || !roomAction("set_order");
  toggle.setAttribute("aria-pressed", String(edit));
  toggle.textContent = edit ? "Done" : "Edit";
  const add = $("#combat-add");
  const order = state.combat?.order ?? [];
  // who may join: set_order's choices (who may be in the order) not in it yet
  const joinable = (roomAction("set_order")?.choices?.order ?? [])
    .filter((id) => !order.includes(id) && state.characters[id])
    .map((id) => [id, state.characters[id]]);
  add.hidden = !edit || joinable.length === 0;
  fillPicker($("#combat-add-pick", add), joinable);
}

/** A row's tools: earlier, later, delay (the current one), its initiative, remove. */
export function addTools(li, id, i, combat) {
  const who = charName(id);
  const order = combat.order;
  const tools = el("div", "combatant-tools");
  const tool = (action, text, label, refused = "") => {
    const b = el("button", `icon tool-${action}`, text);
    b.type = "button";
    b.dataset.edit = action;
    b.setAttribute("aria-label", label);
    b.title = refused || label;
    b.disabled = !!refused;
    tools.append(b);
    return b;
  };
  tool("up", "▲", `Move ${who} earlier`, i === 0 ? `${who} acts first already` : "");
  tool("down", "▼", `Move ${who} later`, i === order.length - 1 ? `${who} acts last already` : "");
  if (i === combat.turn) {
    const next = order[i + 1];
    const label = next ? `Delay: ${who} acts later this round, after ${charName(next)} (whose turn it becomes)` : "";
    tool("delay", "Delay", label || `Delay ${who}'s turn`, next ? "" : `Nobody acts after ${who} this round`);
  }
  if ((roomAction("roll_initiative")?.choices?.chars ?? []).includes(id)) {
    const d20 = el("input", "init-d20");
    d20.type = "number";
    d20.min = "1";
    d20.max = "20";
    d20.placeholder = "d20";
    d20.value = page.combatEdit.d20[id] ?? "";
    d20.setAttribute("aria-label", `${who}'s natural d20 for initiative (blank: the server rolls)`);
    d20.addEventListener("input", () => (page.combatEdit.d20[id] = d20.value));
    tools.append(d20);
    tool("initiative", "Initiative", `Set ${who}'s initiative: d20 + Dex + its bonus; the order is sorted again`);
  }
  const last = order.length === 1 ? "The last combatant: end the combat instead" : "";
  tool("remove", "✕", `Remove ${who} from the combat`, last);
  li.append(tools);
  li.draggable = true;
}

/** `order` with `id` moved to place `to` (in the order without it). */
function moved(order, id, to) {
  const out = order.filter((x) => x !== id);
  out.splice(to, 0, id);
  return out;
}

/** The set_order (or roll_initiative) arguments for a row tool, or null. */
function editArgs(action, id, combat) {
  const order = combat.order;
  const i = order.indexOf(id);
  switch (action) {
    case "up":
      return ["set_order", { order: moved(order, id, i - 1) }];
    case "down":
      return ["set_order", { order: moved(order, id, i + 1) }];
    case "remove":
      return ["set_order", { order: order.filter((x) => x !== id) }];
    case "delay": // after the next one, whose turn it becomes (its place: the turn's)
      return ["set_order", { order: moved(order, id, i + 1), turn: i }];
    case "initiative": {
      const raw = (page.combatEdit.d20[id] ?? "").trim();
      const args = { chars: [id], bonus: bonusesFor([id]) };
      if (raw === "") return ["roll_initiative", args]; // the server rolls
      const d20 = Number(raw);
      if (!Number.isInteger(d20)) {
        errorToast("invalid_args", "Enter the natural d20 (1 to 20), or leave it blank for the server to roll.");
        return null;
      }
      return ["roll_initiative", { ...args, rolls: { [id]: d20 } }];
    }
    default:
      return null;
  }
}

/** After an edit the row was drawn again: the focus goes back to its tool
 * (or the row's first one, or the list's), for the keyboard. */
function refocus(id, action) {
  const row = $(`#combat-order li[data-char="${CSS.escape(id)}"]`);
  const tools = row ? $$("button[data-edit]:not(:disabled)", row) : $$("#combat-order button[data-edit]:not(:disabled)");
  (tools.find((b) => b.dataset.edit === action) ?? tools[0] ?? $("#combat-edit")).focus();
}

async function onTool(ev) {
  const btn = ev.target.closest("button[data-edit]");
  const combat = page.client?.state?.combat;
  if (!btn || !combat) return;
  const id = btn.closest("li[data-char]").dataset.char;
  const edit = editArgs(btn.dataset.edit, id, combat);
  if (!edit) return;
  const action = btn.dataset.edit;
  const row = btn.closest("li");
  const fieldOf = (path) => (path.startsWith("rolls") ? row.querySelector(".init-d20") : null);
  const ack = await run(edit[0], edit[1], btn, { fieldOf });
  if (ack && action === "initiative") {
    delete page.combatEdit.d20[id]; // rolled: its box empties
    page.render();
  }
  refocus(id, action);
}

// Drag and drop: a row dropped on the upper half of another goes before it,
// on the lower half after it.
function dropPlace(ev) {
  const li = ev.target.closest?.("#combat-order li[data-char]");
  if (!li) return null;
  const box = li.getBoundingClientRect();
  return { li, after: ev.clientY > box.top + box.height / 2 };
}

function clearMarks() {
  for (const li of $$("#combat-order li[data-drop]")) delete li.dataset.drop;
}

function wireDrag(list) {
  list.addEventListener("dragstart", (ev) => {
    const li = ev.target.closest?.("li[data-char]");
    if (!li || !editing()) return;
    page.combatEdit.dragging = li.dataset.char;
    ev.dataTransfer.setData("text/plain", li.dataset.char);
    ev.dataTransfer.effectAllowed = "move";
    li.classList.add("dragging");
  });
  list.addEventListener("dragover", (ev) => {
    const place = page.combatEdit.dragging ? dropPlace(ev) : null;
    if (!place) return;
    ev.preventDefault();
    ev.dataTransfer.dropEffect = "move";
    clearMarks();
    place.li.dataset.drop = place.after ? "after" : "before";
  });
  list.addEventListener("drop", (ev) => {
    const place = dropPlace(ev);
    const id = page.combatEdit.dragging;
    const combat = page.client?.state?.combat;
    clearMarks();
    if (!place || !id || !combat) return;
    ev.preventDefault();
    const rest = combat.order.filter((x) => x !== id);
    const target = place.li.dataset.char;
    const to = target === id ? combat.order.indexOf(id) : rest.indexOf(target) + (place.after ? 1 : 0);
    const order = moved(combat.order, id, to);
    if (order.join() !== combat.order.join()) run("set_order", { order }, null);
  });
  list.addEventListener("dragend", () => {
    page.combatEdit.dragging = null;
    clearMarks();
    for (const li of $$("#combat-order li.dragging")) li.classList.remove("dragging");
  });
}

export function wireCombatEdit() {
  const list = $("#combat-order");
  list.addEventListener("click", onTool);
  wireDrag(list);
  $("#combat-edit").addEventListener("click", () => {
    page.combatEdit.on = !page.combatEdit.on;
    page.render();
  });
  $("#combat-add-btn").addEventListener("click", (ev) => {
    const combat = page.client?.state?.combat;
    const id = $("#combat-add-pick").value;
    if (combat && id) run("set_order", { order: [...combat.order, id] }, ev.currentTarget);
  });
}
