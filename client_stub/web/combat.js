// The combat: whose turn it is (the banner on top of the page), the order
// and its controls in the combat panel (End turn, Back a turn, End combat,
// Roll initiative), the GM's edits of it (combat-edit.js), and before a
// combat the GM's setup of one (combat-setup.js).

import { addTools, editing, renderEditing, wireCombatEdit } from "./combat-edit.js";
import { bonusesFor, renderSetup, ticked } from "./combat-setup.js";
import { run } from "./commands.js";
import { $, el } from "./dom.js";
import { affordances, charName, currentOf, isGM, isMine, mayEndTurn, numbersHidden, page, roomAction } from "./page.js";
import { onUndo, undoPhrase } from "./undo.js";

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

/** One combatant's line: its place (▶ for the turn), name, condition, PV, initiative. */
function combatantRow(id, i, state, current) {
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
  return li;
}

export function renderCombat(state) {
  const combat = state.combat;
  const section = $("#combat");
  section.dataset.active = combat ? "true" : "false";
  $("#no-combat").hidden = !!combat || isGM();
  $("#combat-round").textContent = combat ? `Round ${combat.round}` : "";
  const current = currentOf(combat);
  const edit = !!combat && editing();
  section.dataset.editing = String(edit);
  $("#combat-order").replaceChildren(
    ...(combat?.order ?? []).map((id, i) => {
      const li = combatantRow(id, i, state, current);
      if (edit) addTools(li, id, i, combat);
      return li;
    }),
  );
  renderEditing(state, edit);
  $("#combat-unseen").hidden = !combat || current !== null;
  const currentChar = current ? state.characters[current] : null;
  const endTurn = $("#end-turn");
  endTurn.hidden = !combat || !currentChar || !mayEndTurn(current);
  endTurn.textContent = currentChar ? `End ${currentChar.name}'s turn` : "End turn";
  renderBackTurn(combat);
  $("#combat-end").hidden = !roomAction("combat_end");
  $("#combat-reroll").hidden = !combat || !roomAction("roll_initiative");

  const setup = $("#combat-setup");
  setup.hidden = !!combat || !affordances().room?.combat_start;
  if (!setup.hidden) renderSetup(state);
}

/** Back a turn, where the turn is: the GM's undo, offered when what it
 * would revert now is an end of turn (the server's `undo` affordance). */
function renderBackTurn(combat) {
  const btn = $("#turn-back");
  const undo = affordances().undo;
  const offered = !!combat && !!undo && !undo.why && undo.op === "end_turn";
  btn.hidden = !offered;
  btn.title = offered ? `Reverts v${undo.v}: ${undoPhrase(undo)}` : "";
}

function endCurrentTurn(button) {
  const combat = page.client?.state?.combat;
  if (!combat) return;
  const current = currentOf(combat);
  if (current) run("end_turn", { char: current, round: combat.round }, button);
}

export function wireCombat() {
  $("#end-turn").addEventListener("click", (ev) => endCurrentTurn(ev.currentTarget));
  $("#turn-end").addEventListener("click", (ev) => endCurrentTurn(ev.currentTarget));
  $("#turn-back").addEventListener("click", (ev) => onUndo(ev.currentTarget));
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
  wireCombatEdit();
}
