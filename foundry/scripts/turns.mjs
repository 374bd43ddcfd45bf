// The turns of a room combat: Foundry's tracker moving forward ends the
// linked turns it walked over (`end_turn`), moving back undoes them
// (`undo`, when the server says undo reverts an end of turn), both sent by
// the automation client with ids derived from the Foundry event (combat.mjs
// holds the pure planning functions; tracker.mjs the combat as a whole).

import {
  MAX_WALK,
  comparePositions,
  expectedTurn,
  linkedTurns,
  serverBehind,
  turnId,
  undoStep,
  walk,
} from "./combat.mjs";
import { asClientError } from "./errors.mjs";
import { TAG } from "./names.mjs";
import { combatKey } from "./tracker.mjs";

/** @typedef {import("./module.mjs").VttSyncModule} VttSyncModule */
/** @typedef {import("./combat.mjs").Position} Position */
/** Where a tracker is: its round, its turn, whose turn it is.
 * @typedef {{round: number, turn: number | null, combatantId: string | null}} TrackerPosition */

export class Turns {
  /** @param {VttSyncModule} mod */
  constructor(mod) {
    this.mod = mod;
    /** @type {Map<string, TrackerPosition>} combat id -> the tracker's
     * position when this client last saw the combat: where a turn change
     * starts from. */
    this.positions = new Map();
  }

  get tracker() {
    return this.mod.tracker;
  }

  /** @param {typeof Hooks} H */
  register(H) {
    /** @type {Hooks.PreUpdateDocument<typeof Combat>} */
    const preUpdate = (combat, changed, options) => this.onPreUpdateCombat(combat, changed, options);
    H.on("preUpdateCombat", preUpdate);
    /** @type {Hooks.UpdateDocument<typeof Combat>} */
    const update = (combat, changed, options) => this.onUpdateCombat(combat, changed, options);
    H.on("updateCombat", update);
    /** @type {Hooks.CreateDocument<typeof Combat>} */
    const create = (combat) => void this.positions.set(combatKey(combat), this.position(combat));
    H.on("createCombat", create);
  }

  ready() {
    for (const combat of this.tracker.combats()) this.positions.set(combatKey(combat), this.position(combat));
  }

  /** Where the tracker is: its round, turn, and the combatant whose turn it is.
   * @param {Combat.Implementation} combat @returns {TrackerPosition} */
  position(combat) {
    return { round: combat.round ?? 0, turn: combat.turn ?? null, combatantId: combat.combatant?.id ?? null };
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
   * @param {Combat.Implementation} combat @param {object} changed @param {{vttSync?: boolean}} options
   */
  onUpdateCombat(combat, changed, options) {
    const prior = this.positions.get(combatKey(combat)) ?? null;
    const now = this.position(combat);
    this.positions.set(combatKey(combat), now);
    if (!this.tracker.isLinked(combat) || !this.mod.isAutomation()) return;
    if (!("round" in changed || "turn" in changed) || options?.[TAG]) return;
    if ((prior?.round ?? 0) === 0 && now.round >= 1) {
      const at = { round: now.round, index: now.turn ?? 0 }; // later turns are queued after this
      this.mod.enqueue(() => this.tracker.startCombat(combat, at));
    } else if (prior) {
      this.moved(combat, prior, now);
    }
  }

  /** Foundry's tracker moved from `prior` to `current`.
   * @param {Combat.Implementation} combat @param {TrackerPosition} prior @param {TrackerPosition} current */
  moved(combat, prior, current) {
    const mod = this.mod;
    if (!prior.round) return;
    const turns = combat.turns;
    /** @param {string} id */
    const byId = (id) => turns.findIndex((t) => t.id === id);
    if (prior.combatantId && byId(prior.combatantId) < 0) {
      // The current combatant was removed: a tracker edit. In the new
      // order, the combatant after it stands at its old index.
      this.tracker.floors.set(combatKey(combat), { round: prior.round, index: prior.turn ?? 0 });
      this.tracker.scheduleOrder(combat);
      return;
    }
    if (prior.combatantId && prior.combatantId === current.combatantId && prior.round === current.round) {
      this.tracker.scheduleOrder(combat); // same combatant at another index: a reorder
      return;
    }
    const from = { round: prior.round, index: prior.combatantId ? byId(prior.combatantId) : (prior.turn ?? 0) };
    const to = { round: current.round, index: current.turn ?? 0 };
    const dir = comparePositions(to, from);
    if (dir > 0) {
      const positions = walk(turns.length, from, to);
      mod.enqueue(async () => {
        if (positions === null) {
          mod.warnOnce(`jump:${combat.id}`, "Jump", { max: MAX_WALK });
          return;
        }
        const s = mod.client?.state?.combat;
        const chars = this.tracker.charsOf(combat);
        const steps = s ? linkedTurns(chars, s.order, positions, this.tracker.roundOffset(combat)).length : 0;
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
   * reported as out of step, not forced. Returns how many turns it ended.
   * @param {Combat.Implementation} combat @param {number} maxSteps @param {Position | null} [at]
   */
  async reconcile(combat, maxSteps, at = null) {
    const mod = this.mod;
    const v0 = mod.client?.version ?? null;
    const where = () => at ?? { round: combat.round, index: combat.turn ?? 0 };
    let ended = 0;
    for (let i = 0; i <= MAX_WALK; i++) {
      const state = mod.client?.state;
      const s = state?.combat;
      if (!state || !s) return ended;
      const chars = this.tracker.charsOf(combat);
      const offset = this.tracker.roundOffset(combat);
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
        /** @param {string} id */
        const name = (id) => state.characters[id]?.name ?? id;
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
          { id: turnId(combatKey(combat), server.round, index, server.char, v0) },
        );
        ended += 1;
      } catch (err) {
        if (asClientError(err).code !== "conflict") throw err; // conflict: another tab ended it; look again
      }
    }
    return ended;
  }

  /** This client starts sending automation: the server's order follows the
   * tracker, and the turns the tracker passed meanwhile (while no client
   * sent automation: players' End Turn) are ended now, at most MAX_WALK.
   * Returns how many were. @param {Combat.Implementation} combat */
  async catchUp(combat) {
    await this.tracker.syncOrder(combat);
    return this.reconcile(combat, MAX_WALK);
  }

  /** The linked turns a step back from `from` to `to` un-ends, in order.
   * @param {Combat.Implementation} combat @param {Position} from @param {Position} to */
  backTurns(combat, from, to) {
    const s = this.mod.client?.state?.combat;
    if (!s) return [];
    const positions = walk(combat.turns.length, to, from);
    if (positions === null) return null;
    return linkedTurns(this.tracker.charsOf(combat), s.order, positions, this.tracker.roundOffset(combat));
  }

  /**
   * Before an update of a combat, on the client making it: Foundry's own
   * time advance is set to 0 where the server counts the rounds; a turn
   * moved while no client sends automation is told; a GM's step back is
   * allowed when it undoes the module's own last end_turns, else refused at
   * once (the update is cancelled), with the reason.
   * @param {Combat.Implementation} combat @param {object} changed
   * @param {import("./clock.mjs").CombatTimeOptions & {vttSync?: boolean}} options
   * @returns {false | void}
   */
  onPreUpdateCombat(combat, changed, options) {
    const mod = this.mod;
    if (options?.[TAG]) return;
    if (this.tracker.serverHolds(combat, changed)) mod.clock.zeroUpdateTime(options);
    if (!("round" in changed) && !("turn" in changed)) return;
    if (!this.tracker.isLinked(combat) || !combat.started) return;
    const from = { round: combat.round, index: combat.turn ?? 0 };
    const round = Reflect.get(changed, "round");
    const turn = Reflect.get(changed, "turn");
    const to = {
      round: typeof round === "number" ? round : combat.round,
      index: typeof turn === "number" ? turn : (combat.turn ?? 0),
    };
    const dir = comparePositions(to, from);
    if (dir !== 0 && !mod.users.present() && this.tracker.charsOf(combat).some(Boolean)) mod.users.noAutomation();
    const client = mod.client;
    if (!client?.connected || client.role !== "gm") return;
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
    const step = undoStep(client.state?.affordances);
    if (!step.ok) {
      mod.notify("warn", "BackNotLast");
      return false;
    }
  }

  /** The tracker went back from `from` to `to`: one undo per linked turn.
   * @param {Combat.Implementation} combat @param {Position} from @param {Position} to */
  async goBack(combat, from, to) {
    const mod = this.mod;
    const s = mod.client?.state?.combat;
    if (!s) return;
    const chars = this.tracker.charsOf(combat);
    const offset = this.tracker.roundOffset(combat);
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
      const step = undoStep(mod.client?.state?.affordances);
      if (!step.ok) {
        mod.notify("warn", "BackNotLast");
        await this.restoreTurn(combat, from);
        return;
      }
      const v = mod.client?.version ?? null;
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

  /** Put Foundry's tracker back where it was (a refused step back).
   * @param {Combat.Implementation} combat @param {Position} at */
  async restoreTurn(combat, at) {
    await combat.update({ round: at.round, turn: at.index }, { [TAG]: true });
  }
}
