// A client: one browser tab of one user in one world, with its own Hooks,
// game, ui and CONFIG as a module sees them (`env`), and the document
// update paths of the client that makes a change.

import { ApplicationV2, Dialog, DialogV2, FormApplication } from "./apps.mjs";
import { Collection, HooksImpl, clone, diff, expand, getPath, merge, renderedText } from "./base.mjs";
import { ClientCombat, SfrpgCombat } from "./combat.mjs";
import { makeActorClass, userDoc } from "./documents.mjs";
import { ClientKeybindings, ClientSettings } from "./settings.mjs";
import { readFileSync } from "node:fs";

const LANG = JSON.parse(readFileSync(new URL("../../lang/en.json", import.meta.url), "utf8"));

export class FoundryClient {
  constructor(world, userId, storage) {
    this.world = world;
    this.userId = userId;
    this.gone = false;
    this.notifications = [];
    this.chat = []; // ChatMessage.create data, as the world would get it
    this.storage = storage; // this browser's localStorage for the world's origin
    this.socketHandlers = new Map();
    this.Hooks = new HooksImpl();
    this.settings = new ClientSettings(this);
    this.keybindings = new ClientKeybindings();
    this.actorDocs = new Map();
    this.combatDocs = new Map();
    this.time = world.time;
    this.Actor = makeActorClass(this);
    for (const id of world.actors.keys()) this.actorDocs.set(id, this.makeActor(id));
    for (const id of world.combats.keys()) this.receiveCombat(id, { created: true, silent: true });
    this.env = this.makeEnv();
  }

  /** The registered settings and menus (for the tests). */
  get registered() {
    return this.settings.settings;
  }
  get menus() {
    return this.settings.menus;
  }

  makeEnv() {
    const client = this;
    const world = this.world;
    const users = () => {
      const all = new Collection();
      for (const id of world.users.keys()) all.set(id, userDoc(client, id));
      // Users#activeGM: the active GM of highest role, then lowest id.
      all.activeGM =
        all
          .filter((u) => u.active && u.isGM)
          .sort((a, b) => b.role - a.role || (a.id < b.id ? -1 : 1))[0] ?? null;
      return all;
    };
    const settings = this.settings;
    // v13's WorldSettings: a collection of the world's Setting documents (a
    // `user` setting is one with a `user` field, its value a JSON string).
    const worldSettings = {
      *[Symbol.iterator]() {
        for (const [k, value] of world.userSettings) {
          const [user, key] = [k.slice(0, k.indexOf(":")), k.slice(k.indexOf(":") + 1)];
          yield { key, user, value: JSON.stringify(value), delete: async () => world.userSettings.delete(k) };
        }
      },
    };
    settings.storage = new Map([
      ["world", worldSettings],
      ["client", this.storage],
    ]);
    const game = {
      release: { generation: world.generation },
      system: { id: world.system },
      world: { id: world.worldId },
      get user() {
        return userDoc(client, client.userId);
      },
      get users() {
        return users();
      },
      get actors() {
        return new Collection([...client.actorDocs].filter(([id]) => world.actors.has(id)));
      },
      get combats() {
        return new Collection(client.combatDocs);
      },
      get combat() {
        return [...client.combatDocs.values()].find((c) => c.started) ?? null;
      },
      time: {
        get worldTime() {
          return client.time;
        },
        // GameTime#advance: a write of the world setting core.time (GMs only).
        advance: (dt, options = {}) => settings.set("core", "time", client.time + dt, options),
        ...(world.generation >= 13 ? { set: (value, options = {}) => settings.set("core", "time", value, options) } : {}),
      },
      settings,
      keybindings: this.keybindings,
      i18n: {
        localize: (key) => {
          const v = getPath(LANG, key);
          return typeof v === "string" ? v : key;
        },
        format: (key, data = {}) => {
          const v = getPath(LANG, key);
          if (typeof v !== "string") return key;
          return v.replace(/\{(\w+)\}/g, (m, k) => (k in data ? String(data[k]) : m));
        },
      },
      socket: {
        on: (event, fn) => {
          if (!client.socketHandlers.has(event)) client.socketHandlers.set(event, []);
          client.socketHandlers.get(event).push(fn);
        },
        emit: (event, data) => world.emitSocket(event, clone(data), client),
      },
    };
    const notify = (level) => (html, options) =>
      client.notifications.push({ level, html: String(html), text: renderedText(html), options });
    return {
      Hooks: this.Hooks,
      game,
      ui: { notifications: { info: notify("info"), warn: notify("warn"), error: notify("error") } },
      CONFIG: { time: { roundTime: 6, turnTime: 0 }, Actor: { documentClass: this.Actor } },
      Actor: this.Actor,
      ChatMessage: {
        create: async (data) => {
          client.chat.push(clone(data));
          return data;
        },
      },
      foundry: { applications: { api: { ApplicationV2, DialogV2 } } },
      FormApplication,
      Dialog,
      fromUuidSync: (uuid) => client.actorDocs.get(String(uuid).replace(/^Actor\./, "")) ?? null,
      location: { protocol: world.protocol, origin: world.origin },
      localStorage: this.storage,
    };
  }

  /** Foundry's start-up: init (settings and keybindings are registered),
   * setup, the keybindings initialized, ready. */
  boot() {
    this.Hooks.callAll("init");
    this.Hooks.callAll("setup");
    this.keybindings.initialize();
    this.Hooks.callAll("ready");
    return this;
  }

  /** Set a setting of the module before boot (what was saved in an earlier
   * session): world settings in the world, client ones in this browser. */
  preset(key, value, scope) {
    const full = `vtt-sync.${key}`;
    if (scope === "world") this.world.settings.set(full, value);
    else if (scope === "user") this.world.userSettings.set(`${this.userId}:${full}`, value);
    else this.storage.setItem(full, JSON.stringify(value));
  }

  receiveUserUpdate(id, changed, userId) {
    this.Hooks.callAll("updateUser", userDoc(this, id), clone(changed), {}, userId);
  }

  /** A world setting changed: its onChange runs on every client. */
  receiveSetting(key, value, options) {
    this.settings.settings.get(key)?.onChange?.(clone(value), clone(options ?? {}));
  }

  receiveTime(value, dt, options, userId) {
    this.time = value;
    this.Hooks.callAll("updateWorldTime", value, dt, clone(options), userId);
  }

  receiveUser(userId, connected) {
    this.Hooks.callAll("userConnected", userDoc(this, userId), connected);
  }

  receiveSocket(event, data) {
    for (const fn of this.socketHandlers.get(event) || []) fn(clone(data));
  }

  // -- actors

  makeActor(id) {
    return new this.Actor(id);
  }

  actor(id) {
    return this.actorDocs.get(id);
  }

  receiveEmbedded(actorId, type, key, created, gone, options, userId) {
    const actor = this.actorDocs.get(actorId);
    if (!actor) return;
    actor._source[key] = clone(this.world.actors.get(actorId)[key]);
    actor.prepare();
    for (const d of created) this.Hooks.callAll(`create${type}`, { ...clone(d), parent: actor }, clone(options), userId);
    for (const d of gone) this.Hooks.callAll(`delete${type}`, { ...clone(d), parent: actor }, clone(options), userId);
  }

  /** An actor's update reaches this client: the document, then its open
   * sheets re-render (asynchronously: ClientDocumentMixin#_onUpdate), then
   * `updateActor`. */
  receiveActor(id, changed, options, userId) {
    if (!this.actorDocs.has(id)) this.actorDocs.set(id, this.makeActor(id));
    const actor = this.actorDocs.get(id);
    merge(actor._source, changed);
    actor.prepare();
    for (const app of actor.apps) app.render();
    this.Hooks.callAll("updateActor", actor, clone(changed), clone(options), userId);
  }

  /** Foundry's update path on the client making it (v13 client/data/
   * client-backend.mjs, #preUpdateDocumentArray; foundry-vtt-types v12.331.5
   * client/hooks.d.mts PreUpdateDocument: "only fires for the client who is
   * initiating the update request"): the submitted change, expanded, goes
   * to the document's _preUpdate and the preUpdate hook (which may edit or
   * cancel it) BEFORE it is diffed against the document; only the
   * differences are written and reach the update hooks. */
  async updateActors(updates, options = {}) {
    const accepted = [];
    for (const update of updates) {
      const { _id, ...data } = update;
      const actor = this.actorDocs.get(_id);
      const changed = expand(data);
      actor._preUpdate?.(changed, options);
      if (this.Hooks.call("preUpdateActor", actor, changed, options, this.userId) === false) continue;
      const real = diff(actor._source, changed);
      if (Object.keys(real).length) accepted.push({ _id, changed: real });
    }
    if (accepted.length) await this.world.commitActor(accepted, options, this.userId);
    return accepted.map((u) => this.actorDocs.get(u._id));
  }

  // -- combats

  combat(id) {
    return this.combatDocs.get(id);
  }

  receiveCombat(id, { created = false, silent = false, changed = null, options = {}, userId = null } = {}) {
    const data = clone(this.world.combats.get(id));
    if (!this.combatDocs.has(id)) {
      const Cls = this.world.combatClass === "sfrpg" ? SfrpgCombat : ClientCombat;
      this.combatDocs.set(id, new Cls(this, id));
    }
    const combat = this.combatDocs.get(id);
    combat._source = data;
    if (created) {
      combat.current = combat.state();
      if (!silent) this.Hooks.callAll("createCombat", combat, {}, userId);
      return;
    }
    combat._onUpdate(changed ?? {}, options, userId);
  }

  receiveCombatDeleted(id, data, userId) {
    const combat = this.combatDocs.get(id);
    this.combatDocs.delete(id);
    if (combat) this.Hooks.callAll("deleteCombat", combat, {}, userId);
  }

  receiveCombatants(id, { created, deleted, updated, userId }) {
    const combat = this.combatDocs.get(id);
    const old = new Map(combat.combatants.map((c) => [c.id, c]));
    combat._source = clone(this.world.combats.get(id));
    for (const cid of created) this.Hooks.callAll("createCombatant", combat.combatants.get(cid), {}, userId);
    for (const cid of deleted) this.Hooks.callAll("deleteCombatant", old.get(cid), {}, userId);
    for (const cid of updated) this.Hooks.callAll("updateCombatant", combat.combatants.get(cid), {}, {}, userId);
  }

  /** The combat update path on this client: Combat#_preUpdate makes a
   * lone `advanceTime` the operation's `worldTime`; the preUpdateCombat hook
   * sees the submitted change (and may edit or cancel it), then the diff
   * is written. */
  async updateCombat(id, data, options = {}) {
    const combat = this.combatDocs.get(id);
    const changed = expand(data);
    if ("advanceTime" in options && !options.worldTime) options.worldTime = { delta: options.advanceTime };
    if (this.Hooks.call("preUpdateCombat", combat, changed, options, this.userId) === false) return null;
    const real = diff(combat._source, changed);
    if (!Object.keys(real).length) return combat;
    await this.world.commitCombat(id, real, options, this.userId);
    return combat;
  }
}
