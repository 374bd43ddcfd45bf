// Actors and the server's characters: linking, the server's values and
// conditions shown on the sheets (written by the automation client), sheet
// edits (a GM's become commands, a player's are removed), the owners, and
// the players' actions from their sheets with their own token. How each
// system keeps the values is systems.mjs's.

import { availableActions } from "./actions.mjs";
import { hash } from "./combat.mjs";
import { isRecord } from "./data.mjs";
import { asClientError } from "./errors.mjs";
import { MODULE_ID, TAG } from "./names.mjs";
import { editCommands, sheetCorrections } from "./edits.mjs";
import { adapterFor, conditionChanges } from "./systems.mjs";

/** @typedef {import("./module.mjs").VttSyncModule} VttSyncModule */
/** @typedef {import("./data.mjs").Data} Data */
/** An actor sheet, AppV1 or AppV2, as the render and close hooks pass it.
 * @typedef {{actor?: Actor.Implementation | null}} SheetApp */

export class Sheets {
  /** @param {VttSyncModule} mod */
  constructor(mod) {
    this.mod = mod;
    /** @type {Map<SheetApp, {actor: Actor.Implementation, values: Record<string, number>}>}
     * The open sheets of this client: the server-owned values each showed
     * when it was last drawn. */
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
    /** @type {Hooks.PreUpdateDocument<typeof Actor>} */
    const preUpdate = (actor, changed, options) => {
      if (isRecord(changed)) this.onPreUpdateActor(actor, changed, options);
    };
    H.on("preUpdateActor", preUpdate);
    /** @type {Hooks.UpdateDocument<typeof Actor>} */
    const update = (actor, changed, options) => this.onUpdateActor(actor, options);
    H.on("updateActor", update);
    // AppV1 sheets (sfrpg, pf1; "renderActorSheet" fires for every actor
    // sheet class) and v13's AppV2 ones.
    /** @param {SheetApp} app */
    const drawn = (app) => this.onSheetDrawn(app);
    /** @param {SheetApp} app */
    const closed = (app) => void this.shown.delete(app);
    for (const name of ["ActorSheet", "ActorSheetV2"]) {
      H.on(`render${name}`, drawn);
      H.on(`close${name}`, closed);
    }
  }

  /** A sheet was drawn: remember the server-owned values it shows.
   * @param {SheetApp} app */
  onSheetDrawn(app) {
    const actor = app.actor; // AppV1 ActorSheet#actor, AppV2 ActorSheetV2#actor
    if (actor && this.charOf(actor)) this.shown.set(app, { actor, values: this.values(actor) });
  }

  /** The world's Actor class (CONFIG.Actor.documentClass). */
  actorClass() {
    return this.mod.env.CONFIG?.Actor?.documentClass ?? this.mod.env.Actor;
  }

  /** The server-owned values an actor holds now ({pv, pe, pp}), read the
   * way a sheet's update is (systems.mjs `edits`), from a copy.
   * @param {Actor.Implementation} actor */
  values(actor) {
    /** @type {Data} */
    const data = structuredClone({ system: actor.system ?? {}, flags: actor.flags ?? {} });
    return this.adapter().edits(actor, data, this.mod.settings.getter());
  }

  adapter() {
    return adapterFor(this.game.system?.id);
  }

  // ------------------------------------------------------------ links

  /** The GM's per-actor "don't sync" switch: the actor stays linked (its
   * turns still count in a room combat) but its sheet is left alone: no
   * values or conditions written, no sheet edits sent or removed.
   * @param {Actor.Implementation | null | undefined} actor */
  isPaused(actor) {
    return Boolean(actor?.flags?.[MODULE_ID]?.noSync);
  }

  /** @param {Actor.Implementation} actor @param {boolean} paused */
  async setPaused(actor, paused) {
    const mod = this.mod;
    /** @type {Data} */
    const update = { [`flags.${MODULE_ID}.noSync`]: Boolean(paused) };
    await actor.update(update, { [TAG]: true });
    if (!paused && mod.isAutomation()) {
      await mod.enqueue(() => this.push(actor));
      mod.scheduleSync();
    }
    mod.ui?.refresh();
  }

  /** The server character an actor is linked to, in this room, or null.
   * @param {Actor.Implementation | null | undefined} actor @returns {string | null} */
  charOf(actor) {
    const f = actor?.flags?.[MODULE_ID];
    return f && f.room === this.mod.room && f.char ? f.char : null;
  }

  /** The character id an actor gets when linked: its own if linked before,
   * else derived from the actor (a token's for an unlinked token).
   * @param {Actor.Implementation} actor */
  charIdFor(actor) {
    return this.charOf(actor) || `fvtt-${actor.isToken && actor.token ? actor.token.id : actor.id}`;
  }

  /** The linked actors: the world's, and unlinked tokens' in combats. */
  linkedActors() {
    /** @type {Actor.Implementation[]} */
    const out = [];
    const seen = new Set();
    /** @param {Actor.Implementation | null} a */
    const add = (a) => {
      if (!a || !this.charOf(a)) return;
      const key = a.isToken ? `t:${a.token?.id}` : `a:${a.id}`;
      if (seen.has(key)) return;
      seen.add(key);
      out.push(a);
    };
    const actors = this.game.actors;
    for (const a of actors ? Array.from(actors) : []) add(a);
    for (const combat of this.mod.tracker.combats()) {
      for (const c of Array.from(combat.combatants)) if (c.actor?.isToken) add(c.actor);
    }
    return out;
  }

  /** The GM's "link" button: the actor becomes (or finds again) a server
   * character with id `fvtt-<actor id>`, made from its sheet, owned by its
   * owning player; the actor records {room, char} in its flags.
   * @param {Actor.Implementation} actor @returns {Promise<string | null>} */
  async link(actor) {
    const mod = this.mod;
    const client = this.client;
    if (!client?.connected || client.role !== "gm" || !client.state) {
      mod.notify("warn", "LinkNeedsGm");
      return null;
    }
    const id = this.charIdFor(actor);
    const get = mod.settings.getter();
    if (!client.state.characters[id]) {
      // pf1 (and other systems) have no PE/PP: without maxima a character
      // could never stabilise nor continue the fight. The GM confirms (or
      // edits) the proposed ones; they go to the actor's flags first.
      const missing = this.adapter().missingMaxima?.(actor, get) ?? {};
      if (Object.keys(missing).length) {
        const chosen = await this.askMaxima(actor, missing);
        if (!chosen) return null; // the GM cancelled
        /** @type {Data} */
        const flags = {};
        for (const [k, v] of Object.entries(chosen)) flags[`flags.${MODULE_ID}.${k}`] = v;
        await actor.update(flags, { [TAG]: true });
      }
      const sheet = this.adapter().read(actor, get);
      const owner = this.mod.users.ownerOf(actor);
      // A new character starts conscious.
      const args = { ...sheet, id, pv: Math.max(1, sheet.pv), ...(owner ? { owner } : {}) };
      try {
        await mod.command("add_character", args, { id: `link:${id}@${client.version}` });
      } catch (err) {
        if (asClientError(err).code !== "conflict") {
          mod.report(err);
          return null;
        }
      }
    }
    await this.setLink(actor, { room: mod.room, char: id });
    mod.notify("info", "Linked", { name: actor.name, char: id });
    if (mod.isAutomation()) {
      await mod.enqueue(() => this.push(actor));
      mod.scheduleSync();
      this.ordersFollow();
    }
    return id;
  }

  /** The actor's link flags. @param {Actor.Implementation} actor @param {{room: string | null, char: string | null}} link */
  setLink(actor, link) {
    /** @type {Data} */
    const update = { [`flags.${MODULE_ID}`]: link };
    return actor.update(update, { [TAG]: true });
  }

  /** The running room combats' orders follow a change of links. */
  ordersFollow() {
    const tracker = this.mod.tracker;
    for (const combat of tracker.combats()) {
      if (tracker.isLinked(combat) && combat.started) tracker.scheduleOrder(combat);
    }
  }

  /** Ask the GM for the maxima the system lacks (the dialog is ui.mjs's;
   * without a UI, as in the tests, the proposal is taken). Resolves with
   * {pe_max?, pp_max?} or null when cancelled.
   * @param {Actor.Implementation} actor @param {import("./actor-data.mjs").Maxima} proposal
   * @returns {Promise<import("./actor-data.mjs").Maxima | null>} */
  async askMaxima(actor, proposal) {
    const ui = this.mod.ui;
    if (ui?.askMaxima) return ui.askMaxima(actor, proposal, this.mod.labels(actor));
    return proposal;
  }

  /** The actor stops following the room (its character stays in the
   * room; a running combat's order drops it). @param {Actor.Implementation} actor */
  async unlink(actor) {
    await this.setLink(actor, { room: null, char: null });
    this.ordersFollow();
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
    /** @type {Data[]} */
    const batch = [];
    /** @type {Array<[Actor.Implementation, Data]>} */
    const single = [];
    /** @type {Array<[Actor.Implementation, Record<string, boolean>]>} */
    const conditions = [];
    for (const actor of this.linkedActors()) {
      if (this.isPaused(actor)) continue;
      const char = state.characters[this.charOf(actor) ?? ""];
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
    if (batch.length) await this.actorClass().updateDocuments(batch, { [TAG]: true });
    for (const [actor, update] of single) await actor.update(update, { [TAG]: true });
    for (const [actor, changes] of conditions) {
      await adapter.applyConditions(actor, changes, { [TAG]: true });
    }
  }

  /** A sheet was edited (not by the module): its maxima, level, name and
   * owner go to the server; the current values stay the server's.
   * @param {Actor.Implementation} actor @param {{vttSync?: boolean}} options */
  onUpdateActor(actor, options) {
    if (options?.[TAG]) return;
    if (!this.charOf(actor)) return;
    this.mod.ui?.refresh();
    if (this.mod.isAutomation()) this.mod.enqueue(() => this.push(actor));
  }

  /** The sheet's own fields (maxima, level, name, owner) to the server.
   * @param {Actor.Implementation} actor */
  async push(actor) {
    if (this.isPaused(actor)) return;
    const id = this.charOf(actor);
    const char = id ? this.client?.state?.characters[id] : undefined;
    if (!id || !char) return;
    const sheet = this.adapter().read(actor, this.mod.settings.getter());
    const set = sheetCorrections(sheet, char, this.mod.users.ownerOf(actor));
    if (!Object.keys(set).length) return;
    const key = hash(JSON.stringify(set));
    await this.mod.command("update_character", { char: id, set }, { id: `sheet:${id}:${key}@${this.client?.version}` });
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
   * @param {Actor.Implementation} actor @param {Data} changed @param {{vttSync?: boolean}} options
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
    const char = this.client.state?.characters[id];
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

  /** A player's (or GM's) action from a sheet, sent with this client's own token.
   * @param {Actor.Implementation} actor @param {string} op @param {Record<string, unknown>} args */
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

  /** The actions offered on an actor's sheet (actions.mjs). @param {Actor.Implementation} actor */
  actionsFor(actor) {
    const id = this.charOf(actor);
    return id && this.client?.state ? availableActions(this.client.state, id) : [];
  }
}
