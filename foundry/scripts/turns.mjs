// Foundry's combat tracker as server commands: a room combat's start,
// turns, rounds, tracker edits, steps back and end become `combat_start`,
// `end_turn`, `set_order`, `undo` and `combat_end`, sent by the automation
// client with ids derived from the Foundry event (combat.mjs holds the pure
// planning functions).

import {
  MAX_WALK,
  comparePositions,
  expectedTurn,
  linkedOrder,
  linkedTurns,
  orderId,
  serverBehind,
  turnId,
  undoStep,
  walk,
} from "./combat.mjs";
import { MODULE_ID, TAG } from "./names.mjs";

/** @typedef {import("./module.mjs").VttSyncModule} VttSyncModule */

/** Tracker edits come in bursts (several combatants added at once, a
 * deletion followed by its turn fix): wait this long for the burst to end
 * before sending one set_order. */
export const ORDER_DEBOUNCE_MS = 50;

/** @param {string[]} a @param {string[]} b */
function same(a, b) {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

export class Turns {
  /** @param {VttSyncModule} mod */
  constructor(mod) {
    this.mod = mod;
    /** combat id -> the tracker's position when this client last saw the
     * combat ({round, turn, combatantId}): where a turn change starts from. */
    this.positions = new Map();
    this.offsets = new Map(); // combat id -> Foundry round minus server round
    this.orderTimers = new Map();
    /** combat id -> the position of a current combatant that was removed:
     * the turns before it have been played, whatever Foundry's tracker
     * shows next (see trackerTurn). */
    this.floors = new Map();
  }

  get game() {
    return this.mod.env.game;
  }

  get client() {
    return this.mod.client;
  }

  /** @param {typeof Hooks} H */
  register(H) {
    H.on("combatStart", (combat, data) => this.onCombatStart(combat, data));
    H.on("preUpdateCombat", (combat, changed, options) => this.onPreUpdateCombat(combat, changed, options));
    H.on("updateCombat", (combat, changed, options) => this.onUpdateCombat(combat, changed, options));
    H.on("createCombat", (combat) => this.positions.set(combat.id, this.position(combat)));
    H.on("deleteCombat", (combat) => this.onDeleteCombat(combat));
    for (const hook of ["createCombatant", "deleteCombatant", "updateCombatant"]) {
      H.on(hook, (combatant) => this.scheduleOrder(combatant.parent ?? combatant.combat));
    }
  }

  ready() {
    for (const combat of this.game.combats ?? []) this.positions.set(combat.id, this.position(combat));
  }

  /** Where the tracker is: its round, turn, and the combatant whose turn it is. */
  position(combat) {
    return { round: combat.round ?? 0, turn: combat.turn ?? null, combatantId: combat.combatant?.id ?? null };
  }

  isLinked(combat) {
    const room = this.mod.room;
    return Boolean(room) && combat?.getFlag?.(MODULE_ID, "room") === room;
  }

  roundOffset(combat) {
    return this.offsets.get(combat.id) ?? combat.getFlag?.(MODULE_ID, "roundOffset") ?? 0;
  }

  /** The server character of each of Foundry's turns (null: not linked). */
  charsOf(combat) {
    return (combat.turns ?? []).map((c) => this.mod.sheets.charOf(c.actor));
  }

  /** A GM starting a combat in a world tied to a room makes it the room's
   * combat: the flag goes in with the start itself, before any turn. */
  onCombatStart(combat, data) {
    const room = this.mod.room;
    if (!room || !this.game.user?.isGM || !data) return;
    // Added beside the update's other keys, never replacing them: a system's
    // start (sfrpg's CombatSFRPG#startCombat) passes dotted `flags.sfrpg.*`
    // keys, which a new `flags` object would override when Foundry expands
    // the update.
    if (data.flags && typeof data.flags === "object") {
      data.flags[MODULE_ID] = { ...(data.flags[MODULE_ID] || {}), room };
    } else {
      data[`flags.${MODULE_ID}.room`] = room;
    }
  }

  /**
   * Does the server count this combat's rounds (so Foundry's own time
   * advance of the update is set to 0)? Only for the room's combat with a
   * linked combatant (a combat of monsters nobody linked is Foundry's
   * alone: its time is Foundry's, sent as any world-time advance), while
   * some client sends automation: with none, nothing reaches the server
   * now and Foundry's time moves as Foundry moves it (the turns, and the
   * rounds' time with them, are sent when a GM is back: users.mjs).
   */
  serverHolds(combat, changed = null) {
    if (!this.willBeLinked(combat, changed)) return false;
    if (!this.charsOf(combat).some(Boolean)) return false;
    return this.mod.users.present();
  }

  /** Is this update about to make (or keep) the combat the room's? */
  willBeLinked(combat, changed) {
    if (this.isLinked(combat)) return true;
    const f = changed?.flags?.[MODULE_ID] ?? {};
    const room = this.mod.room;
    return Boolean(room) && (f.room ?? changed?.[`flags.${MODULE_ID}.room`]) === room;
  }

  /**
   * The combat changed (on every client, once per update, in order). A
   * change of round or turn is read here, from the position this client
   * saw before: not from combatTurnChange, whose `prior` is v13's one live
   * `previous` object (two quick Next Turns overwrite it before the first
   * hook runs, which comes after awaited turn events: Foundry v13
   * client/documents/combat.mjs, #recordPreviousState and
   * #triggerTurnEvents), and which v12's active GM does not fire when
   * nothing advanced, a step back included (v12 Combat#_manageTurnEvents).
   */
  onUpdateCombat(combat, changed, options) {
    const prior = this.positions.get(combat.id) ?? null;
    const now = this.position(combat);
    this.positions.set(combat.id, now);
    if (!this.isLinked(combat) || !this.mod.isAutomation()) return;
    if (!changed || !("round" in changed || "turn" in changed) || options?.[TAG]) return;
    if ((prior?.round ?? 0) === 0 && now.round >= 1) {
      const at = { round: now.round, index: now.turn ?? 0 }; // later turns are queued after this
      this.mod.enqueue(() => this.startCombat(combat, at));
    } else if (prior) {
      this.moved(combat, prior, now);
    }
  }

  async startCombat(combat, at) {
    const mod = this.mod;
    const s = this.client.state.combat;
    if (s) {
      if (same(linkedOrder(this.charsOf(combat), this.client.state), s.order)) {
        await this.reconcile(combat, 0, at); // another tab started it
        return;
      }
      const other = [...(this.game.combats ?? [])].some((c) => c.id !== combat.id && this.isLinked(c) && c.started);
      if (other) {
        mod.notify("warn", "OneCombat", { name: combat.name || combat.id });
        await combat.setFlag(MODULE_ID, "room", null);
        return;
      }
      // No running Foundry combat has the server's: a leftover (ended while
      // nobody was connected, or started elsewhere). This combat replaces it.
      await mod.command("combat_end", {}, { id: `combat:${combat.id}:replace@${this.client.version}` });
    }
    if (!(await this.beginServerCombat(combat, at))) mod.warnOnce(`nolinked:${combat.id}`, "NoLinked");
  }

  /**
   * Start the server's combat on Foundry's current position: combat_start
   * with the linked combatants still to act this round, then set_order with
   * all of them (those already past act from the next round). No turn is
   * ended for combatants Foundry passed over; when the server's combat starts
   * later than Foundry's, the round offset is recorded on the combat.
   */
  async beginServerCombat(combat, at = { round: combat.round, index: combat.turn ?? 0 }) {
    const mod = this.mod;
    const state = this.client.state;
    const chars = this.charsOf(combat);
    const order = linkedOrder(chars, state);
    if (!order.length) return false;
    const rest = linkedOrder(chars.slice(at.index), state);
    const v = this.client.version;
    await mod.command("combat_start", { order: rest.length ? rest : order }, { id: `combat:${combat.id}:start@${v}` });
    if (rest.length && rest.length < order.length) {
      await mod.command("set_order", { order }, { id: orderId(combat.id, order, v) });
    }
    const offset = rest.length ? at.round - 1 : at.round;
    this.offsets.set(combat.id, offset);
    if (offset !== (combat.getFlag(MODULE_ID, "roundOffset") ?? 0)) {
      await combat.setFlag(MODULE_ID, "roundOffset", offset);
    }
    return true;
  }

  onDeleteCombat(combat) {
    const mod = this.mod;
    this.positions.delete(combat.id);
    if (!this.isLinked(combat) || !mod.isAutomation()) return;
    mod.enqueue(async () => {
      if (!this.client.state.combat) return;
      await mod.command("combat_end", {}, { id: `combat:${combat.id}:end@${this.client.version}` });
    });
  }

  /** Combatants added, removed or reordered: one set_order after the burst. */
  scheduleOrder(combat) {
    if (!combat || !this.isLinked(combat) || !this.mod.isAutomation()) return;
    clearTimeout(this.orderTimers.get(combat.id));
    this.orderTimers.set(
      combat.id,
      setTimeout(() => {
        this.orderTimers.delete(combat.id);
        this.mod.enqueue(() => this.syncOrder(combat, { reconcile: true }));
      }, ORDER_DEBOUNCE_MS),
    );
  }

  async syncOrder(combat, { reconcile = false } = {}) {
    const mod = this.mod;
    if (!mod.isAutomation() || !combat.started) return;
    const state = this.client.state;
    const order = linkedOrder(this.charsOf(combat), state);
    const s = state.combat;
    if (!s) {
      if (order.length) await this.beginServerCombat(combat);
      return;
    }
    if (!order.length) {
      await mod.command("combat_end", {}, { id: `combat:${combat.id}:end@${this.client.version}` });
      return;
    }
    if (!same(order, s.order)) {
      const args = { order };
      const turn = this.trackerTurn(combat, order, s);
      if (turn !== null) args.turn = turn;
      await mod.command("set_order", args, { id: orderId(combat.id, order, this.client.version) });
    }
    if (reconcile) await this.reconcile(combat, 0);
  }

  /**
   * After a tracker edit, where the server's turn goes in `order`: to the
   * first linked combatant at or after Foundry's current turn (everyone
   * before it has acted this round, in Foundry's eyes), or past the end of
   * the order (the round ends) when none is left in this round. Null when
   * the server is already past that point (its round ended while Foundry's
   * unlinked combatants act): the server keeps its turn.
   */
  trackerTurn(combat, order, s) {
    let at = { round: combat.round, index: combat.turn ?? 0 };
    const floor = this.floors.get(combat.id);
    this.floors.delete(combat.id);
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

  /** Foundry's tracker moved from `prior` to `current` (positions). */
  moved(combat, prior, current) {
    const mod = this.mod;
    if (!prior.round) return;
    const turns = combat.turns ?? [];
    const byId = (id) => turns.findIndex((t) => t.id === id);
    if (prior.combatantId && byId(prior.combatantId) < 0) {
      // The current combatant was removed: a tracker edit. In the new
      // order, the combatant after it stands at its old index.
      this.floors.set(combat.id, { round: prior.round, index: prior.turn ?? 0 });
      this.scheduleOrder(combat);
      return;
    }
    if (prior.combatantId && prior.combatantId === current.combatantId && prior.round === current.round) {
      this.scheduleOrder(combat); // same combatant at another index: a reorder
      return;
    }
    const from = {
      round: prior.round,
      index: prior.combatantId ? byId(prior.combatantId) : (prior.turn ?? 0),
    };
    const to = { round: current.round, index: current.turn ?? 0 };
    const dir = comparePositions(to, from);
    if (dir > 0) {
      const positions = walk(turns.length, from, to);
      mod.enqueue(async () => {
        if (positions === null) {
          mod.warnOnce(`jump:${combat.id}`, "Jump", { max: MAX_WALK });
          return;
        }
        const s = this.client.state.combat;
        const chars = this.charsOf(combat);
        const steps = s ? linkedTurns(chars, s.order, positions, this.roundOffset(combat)).length : 0;
        await this.reconcile(combat, steps, to);
      });
    } else if (dir < 0) {
      mod.enqueue(() => this.goBack(combat, from, to));
    }
  }

  /**
   * Bring the server's turn to the one Foundry's tracker shows at `at` (the
   * position a turn change reached: later changes are queued after this
   * one), ending at most `maxSteps` turns (the linked turns Foundry walked
   * over). Each end_turn names the turn it ends (char, round), so a copy
   * from another tab is a conflict, never a second end; anything else is
   * reported as out of step, not forced.
   */
  async reconcile(combat, maxSteps, at = null) {
    const mod = this.mod;
    const v0 = this.client.version;
    const where = () => at ?? { round: combat.round, index: combat.turn ?? 0 };
    let ended = 0;
    for (let i = 0; i <= MAX_WALK; i++) {
      const state = this.client.state;
      const s = state.combat;
      if (!s) return ended;
      const chars = this.charsOf(combat);
      const offset = this.roundOffset(combat);
      const expected = expectedTurn(chars, s.order, where(), offset);
      if (!expected) return ended;
      const server = { char: s.order[s.turn], round: s.round };
      if (server.char === expected.char && server.round === expected.round) {
        mod.warned.delete(`step:${combat.id}`);
        return ended;
      }
      const behind = serverBehind(chars, server, expected);
      if (behind === false) return ended; // the server is ahead: Foundry's tracker walks into it
      if (behind === null || i >= maxSteps) {
        const name = (id) => state.characters?.[id]?.name ?? id;
        mod.warnOnce(`step:${combat.id}`, "OutOfStep", {
          server: `${name(server.char)} (${server.round + offset})`,
          foundry: `${name(expected.char)} (${expected.round + offset})`,
        });
        return ended;
      }
      const index = chars.indexOf(server.char);
      try {
        await mod.command(
          "end_turn",
          { char: server.char, round: server.round },
          { id: turnId(combat.id, server.round, index, server.char, v0) },
        );
        ended += 1;
      } catch (err) {
        if (err.code !== "conflict") throw err; // conflict: another tab ended it; look again
      }
    }
    return ended;
  }

  /** This client starts sending automation: the server's order follows the
   * tracker, and the turns the tracker passed meanwhile (while no client
   * sent automation: players' End Turn) are ended now, at most MAX_WALK.
   * Returns how many were. */
  async catchUp(combat) {
    await this.syncOrder(combat);
    return this.reconcile(combat, MAX_WALK);
  }

  /** The GM "sync turns" button: catch the server up with the tracker. */
  resync(combat) {
    const mod = this.mod;
    return mod
      .enqueue(() => this.syncOrder(combat, { reconcile: false }))
      .then(() => mod.enqueue(() => this.reconcile(combat, 2 * (combat.turns?.length ?? 0))));
  }

  /** The tracker's "link combatants" button: links every combatant's actor
   * and makes the combat the room's (for a combat started before the module
   * was set up: the server's combat starts at the tracker's current turn). */
  async linkCombat(combat) {
    const mod = this.mod;
    if (!this.client?.connected || this.client.role !== "gm") {
      mod.notify("warn", "LinkNeedsGm");
      return;
    }
    for (const c of combat.combatants ?? []) {
      if (c.actor && !mod.sheets.charOf(c.actor)) await mod.sheets.link(c.actor);
    }
    if (!this.isLinked(combat)) await combat.setFlag(MODULE_ID, "room", mod.room);
    if (combat.started) this.scheduleOrder(combat);
  }

  /** The linked turns a step back from `from` to `to` un-ends, in order. */
  backTurns(combat, from, to) {
    const s = this.client?.state?.combat;
    if (!s) return [];
    const positions = walk(combat.turns?.length ?? 0, to, from);
    if (positions === null) return null;
    return linkedTurns(this.charsOf(combat), s.order, positions, this.roundOffset(combat));
  }

  /** A GM stepping back in the tracker (on that GM's client, before the
   * update): allowed when it is an undo of the module's own last end_turns,
   * else refused at once, with the reason. */
  onPreUpdateCombat(combat, changed, options) {
    const mod = this.mod;
    if (options?.[TAG] || !changed) return;
    if (this.serverHolds(combat, changed)) mod.clock.zeroUpdateTime(options);
    if (!("round" in changed) && !("turn" in changed)) return;
    if (!this.isLinked(combat) || !combat.started) return;
    const from = { round: combat.round, index: combat.turn ?? 0 };
    const to = { round: changed.round ?? combat.round, index: changed.turn ?? combat.turn ?? 0 };
    const dir = comparePositions(to, from);
    if (dir !== 0 && !mod.users.present() && this.charsOf(combat).some(Boolean)) mod.users.noAutomation();
    if (!this.client?.connected || this.client.role !== "gm") return;
    if (dir >= 0) return;
    if (to.round < 1) {
      mod.notify("warn", "BackBeforeStart");
      return false;
    }
    const turns = this.backTurns(combat, from, to);
    if (turns === null) {
      mod.notify("warn", "Jump", { max: MAX_WALK });
      return false;
    }
    if (!turns.length) return;
    const step = undoStep(this.client.state?.affordances);
    if (!step.ok) {
      mod.notify("warn", "BackNotLast");
      return false;
    }
  }

  async goBack(combat, from, to) {
    const mod = this.mod;
    const s = this.client.state.combat;
    if (!s) return;
    const chars = this.charsOf(combat);
    const offset = this.roundOffset(combat);
    const expected = expectedTurn(chars, s.order, to, offset);
    if (expected && s.order[s.turn] === expected.char && s.round === expected.round) return; // done
    const turns = to.round >= 1 ? this.backTurns(combat, from, to) : null;
    if (!turns) {
      mod.notify("warn", "BackNotLast");
      await this.restoreTurn(combat, from);
      return;
    }
    // One undo per turn to un-end, each one checked against what the
    // server says undo reverts now (its affordances, fresh after each patch).
    for (let i = 0; i < turns.length; i++) {
      const step = undoStep(this.client.state?.affordances);
      if (!step.ok) {
        mod.notify("warn", "BackNotLast");
        await this.restoreTurn(combat, from);
        return;
      }
      const v = this.client.version;
      try {
        await mod.command("undo", {}, { expect: v, id: `undo:${step.v}@${v}` });
      } catch (err) {
        mod.report(err);
        await this.restoreTurn(combat, from);
        return;
      }
    }
    await this.reconcile(combat, 0, to);
  }

  /** Put Foundry's tracker back where it was (a refused step back). */
  async restoreTurn(combat, at) {
    await combat.update({ round: at.round, turn: at.index }, { [TAG]: true });
  }
}
