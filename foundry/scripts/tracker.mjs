// A room combat as a whole: the combat Foundry's GM starts becomes the
// server's (`combat_start`), its combatants added, removed and re-sorted
// become `set_order`, its end `combat_end`; the GM's "link combatants" and
// "sync turns" buttons. The turns inside it are turns.mjs's.

import { MAX_WALK, comparePositions, expectedTurn, linkedOrder, orderId } from "./combat.mjs";
import { MODULE_ID } from "./names.mjs";

/** @typedef {import("./module.mjs").VttSyncModule} VttSyncModule */
/** @typedef {import("./combat.mjs").Position} Position */

/** Tracker edits come in bursts (several combatants added at once, a
 * deletion followed by its turn fix): wait this long for the burst to end
 * before sending one set_order. */
export const ORDER_DEBOUNCE_MS = 50;

/** @param {string[]} a @param {string[]} b */
function same(a, b) {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** A combat's key in the module's maps. @param {Combat.Implementation} combat */
export function combatKey(combat) {
  return combat.id ?? "";
}

export class Tracker {
  /** @param {VttSyncModule} mod */
  constructor(mod) {
    this.mod = mod;
    /** @type {Map<string, number>} combat id -> Foundry round minus server round */
    this.offsets = new Map();
    /** @type {Map<string, ReturnType<typeof setTimeout>>} */
    this.orderTimers = new Map();
    /** @type {Map<string, Position>} combat id -> the position of a current
     * combatant that was removed: the turns before it have been played,
     * whatever Foundry's tracker shows next (see trackerTurn). */
    this.floors = new Map();
  }

  get game() {
    return this.mod.env.game;
  }

  /** The combats of the world (none before Foundry's setup).
   * @returns {Combat.Implementation[]} */
  combats() {
    const combats = this.game.combats;
    return combats ? Array.from(combats) : [];
  }

  /** @param {typeof Hooks} H */
  register(H) {
    H.on("combatStart", (combat, data) => this.onCombatStart(combat, data));
    /** @type {Hooks.DeleteDocument<typeof Combat>} */
    const onDelete = (combat) => this.onDeleteCombat(combat);
    H.on("deleteCombat", onDelete);
    /** @param {Combatant.Implementation} combatant */
    const onEdit = (combatant) => this.scheduleOrder(combatant.parent);
    for (const hook of ["createCombatant", "deleteCombatant", "updateCombatant"]) H.on(hook, onEdit);
  }

  /** Is the combat the room's? @param {Combat.Implementation | null | undefined} combat */
  isLinked(combat) {
    const room = this.mod.room;
    return Boolean(room && combat) && combat?.getFlag(MODULE_ID, "room") === room;
  }

  /** Is this update about to make (or keep) the combat the room's?
   * @param {Combat.Implementation} combat @param {object | null} changed */
  willBeLinked(combat, changed) {
    if (this.isLinked(combat)) return true;
    const room = this.mod.room;
    if (!room || !changed) return false;
    const flags = "flags" in changed ? changed.flags : undefined;
    const mine = typeof flags === "object" && flags !== null && MODULE_ID in flags ? flags[MODULE_ID] : undefined;
    const nested = typeof mine === "object" && mine !== null && "room" in mine ? mine.room : undefined;
    const dotted = `flags.${MODULE_ID}.room` in changed ? Reflect.get(changed, `flags.${MODULE_ID}.room`) : undefined;
    return (nested ?? dotted) === room;
  }

  /**
   * Does the server count this combat's rounds (so Foundry's own time
   * advance of the update is set to 0)? Only for the room's combat with a
   * linked combatant (a combat of monsters nobody linked is Foundry's
   * alone: its time is Foundry's, sent as any world-time advance), while
   * some client sends automation: with none, nothing reaches the server
   * now and Foundry's time moves as Foundry moves it (the turns, and the
   * rounds' time with them, are sent when a GM is back: users.mjs).
   * @param {Combat.Implementation} combat @param {object | null} [changed]
   */
  serverHolds(combat, changed = null) {
    if (!this.willBeLinked(combat, changed)) return false;
    if (!this.charsOf(combat).some(Boolean)) return false;
    return this.mod.users.present();
  }

  /** Foundry's round minus the server's for this combat. @param {Combat.Implementation} combat */
  roundOffset(combat) {
    return this.offsets.get(combatKey(combat)) ?? combat.getFlag(MODULE_ID, "roundOffset") ?? 0;
  }

  /** The server character of each of Foundry's turns (null: not linked).
   * @param {Combat.Implementation} combat @returns {Array<string | null>} */
  charsOf(combat) {
    return combat.turns.map((c) => this.mod.sheets.charOf(c.actor));
  }

  /** A GM starting a combat in a world tied to a room makes it the room's
   * combat: the flag goes in with the start itself, before any turn.
   * @param {Combat.Implementation} combat @param {Record<string, unknown>} data the start's update (mutable) */
  onCombatStart(combat, data) {
    const room = this.mod.room;
    if (!room || !this.game.user?.isGM || !data) return;
    // Added beside the update's other keys, never replacing them: a system's
    // start (sfrpg's CombatSFRPG#startCombat) passes dotted `flags.sfrpg.*`
    // keys, which a new `flags` object would override when Foundry expands
    // the update.
    const flags = data.flags;
    if (flags && typeof flags === "object") {
      const mine = Reflect.get(flags, MODULE_ID);
      Reflect.set(flags, MODULE_ID, { ...(typeof mine === "object" ? mine : {}), room });
    } else {
      data[`flags.${MODULE_ID}.room`] = room;
    }
  }

  /** The tracker reached round 1: the server's combat starts.
   * @param {Combat.Implementation} combat @param {Position} at */
  async startCombat(combat, at) {
    const mod = this.mod;
    const state = mod.client?.state;
    if (!state) return;
    const s = state.combat;
    if (s) {
      if (same(linkedOrder(this.charsOf(combat), state), s.order)) {
        await mod.turns.reconcile(combat, 0, at); // another tab started it
        return;
      }
      const other = this.combats().some((c) => c.id !== combat.id && this.isLinked(c) && c.started);
      if (other) {
        mod.notify("warn", "OneCombat", { name: combat.name || combat.id });
        await combat.setFlag(MODULE_ID, "room", null);
        return;
      }
      // No running Foundry combat has the server's: a leftover (ended while
      // nobody was connected, or started elsewhere). This combat replaces it.
      await mod.command("combat_end", {}, { id: `combat:${combat.id}:replace@${mod.client?.version}` });
    }
    if (!(await this.beginServerCombat(combat, at))) mod.warnOnce(`nolinked:${combat.id}`, "NoLinked");
  }

  /**
   * Start the server's combat on Foundry's current position: combat_start
   * with the linked combatants still to act this round, then set_order with
   * all of them (those already past act from the next round). No turn is
   * ended for combatants Foundry passed over; when the server's combat starts
   * later than Foundry's, the round offset is recorded on the combat.
   * @param {Combat.Implementation} combat @param {Position} [at]
   */
  async beginServerCombat(combat, at = { round: combat.round, index: combat.turn ?? 0 }) {
    const mod = this.mod;
    const state = mod.client?.state;
    const chars = this.charsOf(combat);
    const order = linkedOrder(chars, state);
    if (!order.length) return false;
    const rest = linkedOrder(chars.slice(at.index), state);
    const v = mod.client?.version ?? null;
    await mod.command("combat_start", { order: rest.length ? rest : order }, { id: `combat:${combat.id}:start@${v}` });
    if (rest.length && rest.length < order.length) {
      await mod.command("set_order", { order }, { id: orderId(combatKey(combat), order, v) });
    }
    const offset = rest.length ? at.round - 1 : at.round;
    this.offsets.set(combatKey(combat), offset);
    if (offset !== (combat.getFlag(MODULE_ID, "roundOffset") ?? 0)) {
      await combat.setFlag(MODULE_ID, "roundOffset", offset);
    }
    return true;
  }

  /** @param {Combat.Implementation} combat */
  onDeleteCombat(combat) {
    const mod = this.mod;
    mod.turns.positions.delete(combatKey(combat));
    if (!this.isLinked(combat) || !mod.isAutomation()) return;
    mod.enqueue(async () => {
      if (!mod.client?.state?.combat) return;
      await mod.command("combat_end", {}, { id: `combat:${combat.id}:end@${mod.client.version}` });
    });
  }

  /** Combatants added, removed or reordered: one set_order after the burst.
   * @param {Combat.Implementation | null | undefined} combat */
  scheduleOrder(combat) {
    if (!combat || !this.isLinked(combat) || !this.mod.isAutomation()) return;
    const key = combatKey(combat);
    clearTimeout(this.orderTimers.get(key));
    this.orderTimers.set(
      key,
      setTimeout(() => {
        this.orderTimers.delete(key);
        this.mod.enqueue(() => this.syncOrder(combat, { reconcile: true }));
      }, ORDER_DEBOUNCE_MS),
    );
  }

  /** The server's order (and turn) brought to the tracker's.
   * @param {Combat.Implementation} combat @param {{reconcile?: boolean}} [opts] */
  async syncOrder(combat, { reconcile = false } = {}) {
    const mod = this.mod;
    const state = mod.client?.state;
    if (!mod.isAutomation() || !combat.started || !state) return;
    const order = linkedOrder(this.charsOf(combat), state);
    const s = state.combat;
    if (!s) {
      if (order.length) await this.beginServerCombat(combat);
      return;
    }
    if (!order.length) {
      await mod.command("combat_end", {}, { id: `combat:${combat.id}:end@${mod.client?.version}` });
      return;
    }
    if (!same(order, s.order)) {
      /** @type {{order: string[], turn?: number}} */
      const args = { order };
      const turn = this.trackerTurn(combat, order, s);
      if (turn !== null) args.turn = turn;
      await mod.command("set_order", args, { id: orderId(combatKey(combat), order, mod.client?.version ?? null) });
    }
    if (reconcile) await mod.turns.reconcile(combat, 0);
  }

  /**
   * After a tracker edit, where the server's turn goes in `order`: to the
   * first linked combatant at or after Foundry's current turn (everyone
   * before it has acted this round, in Foundry's eyes), or past the end of
   * the order (the round ends) when none is left in this round. Null when
   * the server is already past that point (its round ended while Foundry's
   * unlinked combatants act): the server keeps its turn.
   * @param {Combat.Implementation} combat @param {string[]} order @param {VttSync.Combat} s @returns {number | null}
   */
  trackerTurn(combat, order, s) {
    /** @type {Position} */
    let at = { round: combat.round, index: combat.turn ?? 0 };
    const floor = this.floors.get(combatKey(combat));
    this.floors.delete(combatKey(combat));
    // The current combatant was removed and Foundry went back to an earlier
    // one (v12, sfrpg: the previous survivor): that one has played its turn,
    // so the server's turn goes to the one after the removed combatant.
    if (floor && comparePositions(floor, at) > 0) at = floor;
    const expected = expectedTurn(this.charsOf(combat), order, at, this.roundOffset(combat));
    if (!expected) return null;
    if (expected.round === s.round) return order.indexOf(expected.char);
    if (expected.round === s.round + 1 && expected.char === order[0]) return order.length;
    return null;
  }

  /** The tracker's "link combatants" button: links every combatant's actor
   * and makes the combat the room's (for a combat started before the module
   * was set up: the server's combat starts at the tracker's current turn).
   * @param {Combat.Implementation} combat */
  async linkCombat(combat) {
    const mod = this.mod;
    if (!mod.client?.connected || mod.client.role !== "gm") {
      mod.notify("warn", "LinkNeedsGm");
      return;
    }
    for (const c of Array.from(combat.combatants)) {
      if (c.actor && !mod.sheets.charOf(c.actor)) await mod.sheets.link(c.actor);
    }
    if (!this.isLinked(combat)) await combat.setFlag(MODULE_ID, "room", mod.room);
    if (combat.started) this.scheduleOrder(combat);
  }

  /** The GM "sync turns" button: catch the server up with the tracker.
   * @param {Combat.Implementation} combat */
  resync(combat) {
    const mod = this.mod;
    return mod
      .enqueue(() => this.syncOrder(combat, { reconcile: false }))
      .then(() => mod.enqueue(() => mod.turns.reconcile(combat, Math.min(MAX_WALK, 2 * combat.turns.length))));
  }
}
