// Combats as a client holds them: core's Combat (turns, rounds, the
// tracker's edits, the history of its turn and the order of its hooks, per
// Foundry generation) and sfrpg's CombatSFRPG. Each behaviour names the
// source it follows.

import { Collection, clone } from "./base.mjs";
import { ClientCombatant, sortTurns } from "./documents.mjs";

export class ClientCombat {
  static documentName = "Combat";
  get documentName() {
    return "Combat";
  }
  constructor(client, id) {
    this.client = client;
    this._id = id;
    this._source = clone(client.world.combats.get(id));
    // Combat#current and #previous (Combat.HistoryData {round, turn,
    // tokenId, combatantId}); previous is set at the first prepare
    // (setupTurns), before any update (foundry-vtt-types v13.345.1 client/
    // documents/combat.d.mts, `previous`).
    this.current = this.state();
    this.previous = { ...this.current };
  }
  get id() {
    return this._id;
  }
  get name() {
    return this._source.name;
  }
  get round() {
    return this._source.round;
  }
  get turn() {
    return this._source.turn;
  }
  get flags() {
    return this._source.flags;
  }
  get started() {
    return this._source.round > 0;
  }
  get combatants() {
    return new Collection(this._source.combatants.map((c) => [c._id, new ClientCombatant(this, c)]));
  }
  get turns() {
    const all = this.combatants;
    return sortTurns(this._source.combatants).map((c) => all.get(c._id));
  }
  get combatant() {
    return this.turn === null ? null : (this.turns[this.turn] ?? null);
  }
  get generation() {
    return this.client.world.generation;
  }
  /** Deleting the current combatant moves the tracker to the next round (v13). */
  get passesToNextRound() {
    return this.generation >= 13;
  }
  /** Combat#_getCurrentState. */
  state() {
    const c = this.combatant;
    return { round: this.round, turn: this.turn, combatantId: c?.id ?? null, tokenId: null };
  }
  getFlag(ns, key) {
    return this._source.flags?.[ns]?.[key];
  }
  setFlag(ns, key, value) {
    return this.update({ [`flags.${ns}.${key}`]: value });
  }
  update(data, options = {}) {
    return this.client.updateCombat(this._id, data, options);
  }

  /**
   * Combat#_onUpdate on this client, then the hooks, in Foundry's order:
   * - the prior state is recorded: v13 keeps ONE `previous` object and
   *   updates it in place (`#recordPreviousState`, Object.assign); v12
   *   records a fresh object;
   * - v12: `_manageTurnEvents()` starts inside `_onUpdate` (not awaited):
   *   on the active GM it returns before the hook when nothing advanced,
   *   else awaits the turn events and then fires `combatTurnChange`
   *   (after `updateCombat`); on other clients it fires at once (before
   *   `updateCombat`). The hook reads `this.previous` when it fires.
   * - v13: `combatTurnChange(combat, previous, current)` fires on the
   *   active GM after `updateCombat`, once `#triggerTurnEvents()` has been
   *   awaited; turn events do database work (e.g. clearing a token's
   *   movement history: Combat#clearMovementHistories), so two quick Next
   *   Turns can overwrite `previous` before the first hook runs.
   * (Foundry v12 client/data/documents/combat.js `_manageTurnEvents`; v13
   * client/documents/combat.mjs `#recordPreviousState`, `#triggerTurnEvents`;
   * their declarations in foundry-vtt-types v12.331.5 client/data/documents/
   * combat.d.mts and v13.345.1 client/documents/combat.d.mts: `previous`,
   * `_manageTurnEvents`, `clearMovementHistories`.)
   */
  _onUpdate(changed, options, userId) {
    const prior = { ...this.current };
    this.current = this.state();
    if (this.generation >= 13) Object.assign(this.previous, prior);
    else this.previous = prior;
    const moved =
      prior.round !== this.current.round ||
      prior.turn !== this.current.turn ||
      prior.combatantId !== this.current.combatantId;
    const Hooks = this.client.Hooks;
    const activeGM = this.client.env.game.users.activeGM?.isSelf;
    if (moved && this.generation < 13) this._manageTurnEvents(activeGM);
    Hooks.callAll("updateCombat", this, clone(changed), clone(options), userId);
    if (moved && this.generation >= 13 && activeGM) this._triggerTurnEvents();
  }

  async _manageTurnEvents(activeGM) {
    if (!this.started) return;
    if (activeGM) {
      const p = this.previous;
      const c = this.current;
      const advanced = c.round > p.round || (c.round === p.round && c.turn > p.turn) || c.combatantId !== p.combatantId;
      if (!advanced) return;
      for (let i = 0; i < 4; i++) await Promise.resolve(); // _onEndTurn, _onEndRound, _onStartRound, _onStartTurn
    }
    this.client.Hooks.callAll("combatTurnChange", this, this.previous, this.current);
  }

  async _triggerTurnEvents() {
    const world = this.client.world;
    world.pending += 1;
    try {
      await world.roundTrip(); // the ending turn's token: movement history cleared
      await world.roundTrip(); // the starting turn's token: likewise
    } finally {
      world.pending -= 1;
    }
    this.client.Hooks.callAll("combatTurnChange", this, this.previous, this.current);
  }

  /** Core's options for a turn or round change: v13 `{direction,
   * worldTime: {delta}}`; v12 passes `worldTime.delta` too, besides the
   * `advanceTime` its hook documentation names (foundry-vtt-types v12.331:
   * Combat.Database.Update has `worldTime`; hooks.d.mts combatTurn
   * `advanceTime`). */
  timeOptions(delta, direction) {
    return this.generation >= 13 ? { direction, worldTime: { delta } } : { advanceTime: delta, direction, worldTime: { delta } };
  }
  get cfg() {
    return this.client.env.CONFIG.time;
  }
  async startCombat() {
    const data = { round: 1, turn: 0 };
    this.client.Hooks.callAll("combatStart", this, data);
    return this.update(data);
  }
  async nextTurn() {
    const next = (this.turn ?? -1) + 1;
    if (next >= this.turns.length) return this.nextRound();
    const data = { round: this.round, turn: next };
    const options = this.timeOptions(this.cfg.turnTime, 1);
    this.client.Hooks.callAll("combatTurn", this, data, options);
    return this.update(data, options);
  }
  async nextRound() {
    const delta = Math.max(this.turns.length - (this.turn ?? 0), 0) * this.cfg.turnTime + this.cfg.roundTime;
    const data = { round: this.round + 1, turn: 0 };
    const options = this.timeOptions(delta, 1);
    this.client.Hooks.callAll("combatRound", this, data, options);
    return this.update(data, options);
  }
  async previousTurn() {
    if (this.turn === 0 && this.round === 0) return this;
    if (this.turn <= 0) return this.previousRound();
    const data = { round: this.round, turn: this.turn - 1 };
    const options = this.timeOptions(-this.cfg.turnTime, -1);
    this.client.Hooks.callAll("combatTurn", this, data, options);
    return this.update(data, options);
  }
  async previousRound() {
    const turn = this.round === 0 ? 0 : Math.max(this.turns.length - 1, 0);
    const round = Math.max(this.round - 1, 0);
    let delta = -1 * turn * this.cfg.turnTime;
    if (round > 0) delta -= this.cfg.roundTime;
    const data = { round, turn };
    const options = this.timeOptions(delta, -1);
    this.client.Hooks.callAll("combatRound", this, data, options);
    return this.update(data, options);
  }
  endCombat() {
    return this.delete();
  }
  delete() {
    return this.client.world.deleteCombat(this._id, this.client.userId);
  }

  /**
   * Combatants added, removed or re-sorted, then the tracker keeps its
   * current combatant: Combat#_onCreate/_onUpdate/_onDeleteDescendantDocuments
   * set the turn on the client that made the change with a real update
   * (`if (game.user.id === userId) this.update({turn})`). A deleted current
   * combatant passes the turn to the previous survivor on v12 and in sfrpg,
   * and on v13 the tracker goes to turn 0 of the next round (Foundry v12
   * client/data/documents/combat.js and v13 client/documents/combat.mjs,
   * `_onDeleteDescendantDocuments`; sfrpg's CombatSFRPG keeps core v12's).
   */
  async editCombatants(edit) {
    const world = this.client.world;
    const before = this.turns.map((c) => c.id);
    const current = this.combatant?.id ?? null;
    const { deleted = [] } = await world.editCombatants(this._id, edit, this.client.userId);
    if (!this.started || current === null) return;
    const after = this.turns.map((c) => c.id);
    let data;
    if (!deleted.includes(current)) {
      data = { turn: after.indexOf(current) };
    } else if (this.passesToNextRound) {
      data = { round: this.round + 1, turn: 0 };
    } else {
      const was = before.indexOf(current);
      const survivor =
        before.slice(0, was).reverse().find((id) => after.includes(id)) ?? before.slice(was + 1).find((id) => after.includes(id));
      data = { turn: survivor ? after.indexOf(survivor) : 0 };
    }
    await this.update(data);
  }
  createEmbeddedDocuments(type, list) {
    const world = this.client.world;
    return this.editCombatants((c) => {
      const created = list.map((d) => ({ _id: world.id("B"), initiative: null, ...clone(d) }));
      c.combatants.push(...created);
      return { created: created.map((x) => x._id) };
    });
  }
  deleteEmbeddedDocuments(type, ids) {
    return this.editCombatants((c) => {
      c.combatants = c.combatants.filter((x) => !ids.includes(x._id));
      return { deleted: [...ids] };
    });
  }
}

/**
 * sfrpg's Combat class (foundryvtt-starfinder src/module/combat/combat.js,
 * CombatSFRPG, 0.30): next/previous turn and round update the combat with
 * `{advanceTime, direction, eventData}` and fire no combatTurn/combatRound;
 * startCombat fires combatStart with dotted `flags.sfrpg.*` keys and updates
 * with `{advanceTime: CONFIG.time.roundTime}`; delete() fires
 * `onBeforeCombatEnd`, starts core's deletion without awaiting it, then
 * calls `game.time.advance(CONFIG.time.roundTime)`. Deleting the current
 * combatant: the previous survivor. Normal combat: one phase.
 */
export class SfrpgCombat extends ClientCombat {
  get phase() {
    return this._source.flags?.sfrpg?.phase ?? 0;
  }
  /** Its own turn rule when the current combatant is deleted. */
  get passesToNextRound() {
    return false;
  }
  async startCombat() {
    const update = {
      "flags.sfrpg.startTime": this.client.time,
      "flags.sfrpg.combatType": "normal",
      "flags.sfrpg.phase": 0,
      round: 1,
      turn: 0,
    };
    this.client.Hooks.callAll("combatStart", this, update);
    return this.update(update, { advanceTime: this.cfg.roundTime });
  }
  _handleUpdate(round, turn, options) {
    return this.update(
      { round, "flags.sfrpg.phase": 0, turn },
      { ...options, eventData: { isNewRound: round !== this.round, oldRound: this.round, newRound: round } },
    );
  }
  async nextTurn() {
    let round = this.round;
    let turn = (this.turn ?? -1) + 1;
    const options = {};
    if (turn >= this.turns.length) {
      round += 1;
      turn = 0;
      options.advanceTime = Math.max(this.turns.length - this.turn, 0) * this.cfg.turnTime + this.cfg.roundTime;
      options.direction = 1;
    }
    return this._handleUpdate(round, turn, options);
  }
  async nextRound() {
    const advanceTime = Math.max(this.turns.length - this.turn, 0) * this.cfg.turnTime + this.cfg.roundTime;
    return this._handleUpdate(this.round + 1, 0, { advanceTime, direction: 1 });
  }
  async previousTurn() {
    let round = this.round;
    let turn = this.turn - 1;
    const options = {};
    if (turn < 0) {
      round -= 1;
      if (round <= 0) return this;
      turn = this.turns.length - 1;
      let advanceTime = -1 * (this.turn || 0) * this.cfg.turnTime;
      if (round > 0) advanceTime -= this.cfg.roundTime;
      options.advanceTime = advanceTime;
      options.direction = -1;
    }
    return this._handleUpdate(round, turn, options);
  }
  async previousRound() {
    const round = Math.max(this.round - 1, 0);
    let advanceTime = -1 * (this.turn || 0) * this.cfg.turnTime;
    if (round > 0) advanceTime -= this.cfg.roundTime;
    return this._handleUpdate(round, 0, { advanceTime, direction: -1 });
  }
  /** CombatSFRPG#delete: the hook, `super.delete(options)` (not awaited),
   * then `game.time.advance(CONFIG.time.roundTime)`, in one synchronous run. */
  delete() {
    this.client.Hooks.callAll("onBeforeCombatEnd", this);
    const deleted = super.delete();
    const advanced = this.client.env.game.time.advance(this.cfg.roundTime);
    return Promise.all([deleted, advanced]);
  }
}
