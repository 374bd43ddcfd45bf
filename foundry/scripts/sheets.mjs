// Actors and the server's characters: linking, the server's values and
// conditions shown on the sheets (written by the automation client), sheet
// edits (a GM's become commands, a player's are removed), the owners, and
// the players' actions from their sheets with their own token. How each
// system keeps the values is systems.mjs's.

import { availableActions } from "./actions.mjs";
import { hash } from "./combat.mjs";
import { MODULE_ID, TAG } from "./names.mjs";
import { editCommands, sheetCorrections } from "./edits.mjs";
import { adapterFor, conditionChanges } from "./systems.mjs";

/** @typedef {import("./module.mjs").VttSyncModule} VttSyncModule */

export class Sheets {
  /** @param {VttSyncModule} mod */
  constructor(mod) {
    this.mod = mod;
    /** The open sheets of this client -> {actor, values}: the server-owned
     * values each sheet showed when it was last drawn. */
    this.shown = new Map();
  }

  get game() {
    return this.mod.env.game;
  }

  get client() {
    return this.mod.client;
  }

  /** @param {typeof Hooks} H */
  register(H) {
    H.on("preUpdateActor", (actor, changed, options) => this.onPreUpdateActor(actor, changed, options));
    H.on("updateActor", (actor, changed, options) => this.onUpdateActor(actor, changed, options));
    // AppV1 sheets (sfrpg, pf1; "renderActorSheet" fires for every actor
    // sheet class) and v13's AppV2 ones.
    for (const name of ["ActorSheet", "ActorSheetV2"]) {
      H.on(`render${name}`, (app) => this.onSheetDrawn(app));
      H.on(`close${name}`, (app) => this.shown.delete(app));
    }
  }

  /** A sheet was drawn: remember the server-owned values it shows. */
  onSheetDrawn(app) {
    const actor = app?.actor ?? app?.document;
    if (actor && this.charOf(actor)) this.shown.set(app, { actor, values: this.values(actor) });
  }

  /** The server-owned values an actor holds now ({pv, pe, pp}), read the
   * way a sheet's update is (systems.mjs `edits`), from a copy. */
  values(actor) {
    const data = structuredClone({ system: actor.system ?? {}, flags: actor.flags ?? {} });
    return this.adapter().edits(actor, data, this.mod.settings.getter());
  }

  adapter() {
    return adapterFor(this.game.system?.id);
  }

  // ------------------------------------------------------------ links

  /** The GM's per-actor "don't sync" switch: the actor stays linked (its
   * turns still count in a room combat) but its sheet is left alone: no
   * values or conditions written, no sheet edits sent or removed. */
  isPaused(actor) {
    return Boolean(actor?.flags?.[MODULE_ID]?.noSync);
  }

  async setPaused(actor, paused) {
    const mod = this.mod;
    await actor.update({ [`flags.${MODULE_ID}.noSync`]: Boolean(paused) }, { [TAG]: true });
    if (!paused && mod.isAutomation()) {
      await mod.enqueue(() => this.push(actor));
      mod.scheduleSync();
    }
    mod.ui?.refresh();
  }

  /** The server character an actor is linked to, in this room, or null. */
  charOf(actor) {
    const f = actor?.flags?.[MODULE_ID];
    return f && f.room === this.mod.room && f.char ? f.char : null;
  }

  /** The character id an actor gets when linked: its own if linked before,
   * else derived from the actor (a token's for an unlinked token). */
  charIdFor(actor) {
    return this.charOf(actor) || `fvtt-${actor.isToken && actor.token ? actor.token.id : actor.id}`;
  }

  linkedActors() {
    const out = [];
    const seen = new Set();
    const add = (a) => {
      if (!a || !this.charOf(a)) return;
      const key = a.isToken ? `t:${a.token?.id}` : `a:${a.id}`;
      if (seen.has(key)) return;
      seen.add(key);
      out.push(a);
    };
    for (const a of this.game.actors ?? []) add(a);
    for (const combat of this.game.combats ?? []) {
      for (const c of /** @type {any} */ (combat).combatants ?? []) if (c.actor?.isToken) add(c.actor);
    }
    return out;
  }

  /** The GM's "link" button: the actor becomes (or finds again) a server
   * character with id `fvtt-<actor id>`, made from its sheet, owned by its
   * owning player; the actor records {room, char} in its flags. */
  async link(actor) {
    const mod = this.mod;
    if (!this.client?.connected || this.client.role !== "gm") {
      mod.notify("warn", "LinkNeedsGm");
      return null;
    }
    const id = this.charIdFor(actor);
    const state = this.client.state;
    const get = mod.settings.getter();
    if (!state.characters?.[id]) {
      // pf1 (and other systems) have no PE/PP: without maxima a character
      // could never stabilise nor continue the fight. The GM confirms (or
      // edits) the proposed ones; they go to the actor's flags first.
      const missing = this.adapter().missingMaxima?.(actor, get) ?? {};
      if (Object.keys(missing).length) {
        const chosen = await this.askMaxima(actor, missing);
        if (!chosen) return null; // the GM cancelled
        const flags = {};
        for (const [k, v] of Object.entries(chosen)) flags[`flags.${MODULE_ID}.${k}`] = v;
        await actor.update(flags, { [TAG]: true });
      }
      const sheet = this.adapter().read(actor, get);
      const args = { ...sheet, id, pv: Math.max(1, sheet.pv) }; // a new character starts conscious
      const owner = this.mod.users.ownerOf(actor);
      if (owner) args.owner = owner;
      try {
        await mod.command("add_character", args, { id: `link:${id}@${this.client.version}` });
      } catch (err) {
        if (err.code !== "conflict") {
          mod.report(err);
          return null;
        }
      }
    }
    await actor.update({ [`flags.${MODULE_ID}`]: { room: mod.room, char: id } }, { [TAG]: true });
    mod.notify("info", "Linked", { name: actor.name, char: id });
    if (mod.isAutomation()) {
      await mod.enqueue(() => this.push(actor));
      mod.scheduleSync();
      for (const combat of this.game.combats ?? []) {
        if (mod.turns.isLinked(combat) && combat.started) mod.turns.scheduleOrder(combat);
      }
    }
    return id;
  }

  /** Ask the GM for the maxima the system lacks (the dialog is ui.mjs's;
   * without a UI, as in the tests, the proposal is taken). Resolves with
   * {pe_max?, pp_max?} or null when cancelled. */
  async askMaxima(actor, proposal) {
    const ui = this.mod.ui;
    if (ui?.askMaxima) return ui.askMaxima(actor, proposal, this.mod.labels(actor));
    return proposal;
  }

  /** The actor stops following the room (its character stays in the
   * room; a running combat's order drops it). */
  async unlink(actor) {
    const mod = this.mod;
    await actor.update({ [`flags.${MODULE_ID}`]: { room: null, char: null } }, { [TAG]: true });
    for (const combat of this.game.combats ?? []) {
      if (mod.turns.isLinked(combat) && combat.started) mod.turns.scheduleOrder(combat);
    }
  }

  // ------------------------------------------------------------ the server's values on the sheets

  /** Show the server's values and conditions on every linked actor: one
   * batched update of the world actors, tagged so nothing reacts to it. */
  async sync() {
    const mod = this.mod;
    const state = this.client?.state;
    if (!state) return;
    const adapter = this.adapter();
    const get = mod.settings.getter();
    const batch = [];
    const single = [];
    const conditions = [];
    for (const actor of this.linkedActors()) {
      if (this.isPaused(actor)) continue;
      const char = state.characters?.[this.charOf(actor)];
      if (!char) {
        mod.warnOnce(`gone:${actor.id}`, "CharacterGone", { name: actor.name });
        continue;
      }
      const update = adapter.write(actor, char, get);
      if (Object.keys(update).length) {
        if (actor.isToken) single.push([actor, update]);
        else batch.push({ _id: actor.id, ...update });
      }
      const changes = conditionChanges(adapter, actor, char.condition, Boolean(char.nonlethal));
      if (Object.keys(changes).length) conditions.push([actor, changes]);
    }
    const Actor = mod.env.CONFIG?.Actor?.documentClass ?? mod.env.Actor;
    // @ts-expect-error the module's own option key: Foundry passes an operation's options to every client's hooks; the types list only core's keys
    if (batch.length) await Actor.updateDocuments(batch, { [TAG]: true });
    for (const [actor, update] of single) await actor.update(update, { [TAG]: true });
    for (const [actor, changes] of conditions) {
      await adapter.applyConditions(actor, changes, { [TAG]: true });
    }
  }

  /** A sheet was edited (not by the module): its maxima, level, name and
   * owner go to the server; the current values stay the server's. */
  onUpdateActor(actor, changed, options) {
    if (options?.[TAG]) return;
    if (!this.charOf(actor)) return;
    this.mod.ui?.refresh();
    if (this.mod.isAutomation()) this.mod.enqueue(() => this.push(actor));
  }

  /** The sheet's own fields (maxima, level, name, owner) to the server. */
  async push(actor) {
    if (this.isPaused(actor)) return;
    const id = this.charOf(actor);
    const char = this.client?.state?.characters?.[id];
    if (!char) return;
    const sheet = this.adapter().read(actor, this.mod.settings.getter());
    const set = sheetCorrections(sheet, char, this.mod.users.ownerOf(actor));
    if (!Object.keys(set).length) return;
    const key = hash(JSON.stringify(set));
    await this.mod.command("update_character", { char: id, set }, { id: `sheet:${id}:${key}@${this.client.version}` });
  }

  /**
   * PV, PE and PP in an update made on this client (not by the module) are
   * removed from it: the server owns them. Foundry runs this hook on the
   * submitted change, before its diff, and an AppV1 sheet (sfrpg's) submits
   * every input of its form: a value is an edit only if it differs from the
   * actor's and from what the actor's open sheets showed (a sheet drawn
   * before the server's last change submits its older values: not an edit).
   * A GM's edit becomes the server commands it stands for (damage, heal, a
   * correction), the sheet then shows the server's result; a player is told
   * to use the actions.
   */
  onPreUpdateActor(actor, changed, options) {
    const mod = this.mod;
    if (options?.[TAG]) return;
    const id = this.charOf(actor);
    if (!id || this.isPaused(actor)) return;
    const edits = this.adapter().edits(actor, changed, mod.settings.getter());
    const now = this.values(actor);
    const drawn = [...this.shown.values()].filter((s) => s.actor === actor || s.actor.uuid === actor.uuid);
    for (const [k, v] of Object.entries(edits)) {
      if (v === now[k] || drawn.some((s) => s.values[k] === v)) delete edits[k];
    }
    if (!Object.keys(edits).length) return;
    if (!this.client?.connected) {
      mod.notify("warn", "EditOffline", { name: actor.name, ...mod.labels(actor) });
      return;
    }
    if (this.client.role !== "gm") {
      mod.notify("info", "EditByPlayer", { name: actor.name, ...mod.labels(actor) });
      return;
    }
    const char = this.client.state?.characters?.[id];
    if (!char) return;
    const v = this.client.version;
    const cmds = editCommands(id, char, edits);
    mod.enqueue(async () => {
      for (const [i, [op, args]] of cmds.entries()) {
        await mod.command(op, args, { id: `edit:${id}:${i}.${op}@${v}` });
      }
    });
  }

  // ------------------------------------------------------------ players' actions

  /** A player's (or GM's) action from a sheet, sent with this client's own token. */
  async act(actor, op, args) {
    const mod = this.mod;
    const id = this.charOf(actor);
    if (!id || !this.client?.connected) {
      mod.notify("warn", "ActOffline");
      return null;
    }
    const full = op === "untend" ? { ...args } : { char: id, ...args }; // untend names the patient only
    try {
      return await mod.command(op, full);
    } catch (err) {
      mod.report(err);
      return null;
    }
  }

  /** The actions offered on an actor's sheet (actions.mjs). */
  actionsFor(actor) {
    const id = this.charOf(actor);
    return id && this.client?.state ? availableActions(this.client.state, id) : [];
  }
}
