// The vtt-sync Foundry module: settings, the connection, and the automation
// that keeps Foundry and the server's room in step.
//
// Written against injected globals (`env`: Hooks, game, ui, CONFIG...) so
// that node --test runs it with a stand-in of Foundry against a real server
// (foundry/test/). In Foundry, main.mjs passes `globalThis`.
//
// Who does what:
// - Every client connects with its own user's token (a player's actions go
//   with the player's token).
// - Only the active GM (`game.users.activeGM?.isSelf`) sends automation:
//   turns, time, tracker edits, and the writes that show the server's values
//   on the sheets. Its commands carry ids derived from the Foundry event, so
//   a second tab of the same GM, or a hook fired twice, applies once.
// - The client that makes an edit (a sheet's HP, a tracker step back) checks
//   it before Foundry applies it (pre-hooks run there only).

import {
  MAX_WALK,
  clockId,
  comparePositions,
  expectedTurn,
  hash,
  linkedOrder,
  linkedTurns,
  orderId,
  planUndo,
  serverBehind,
  turnId,
  walk,
} from "./combat.mjs";
import { availableActions } from "./actions.mjs";
import { MODULE_ID, adapterFor, conditionChanges, editCommands, sheetCorrections } from "./systems.mjs";

export { MODULE_ID };

/** The option key that marks the module's own writes, so that its hooks
 * ignore their echo (update options travel with the update to every client). */
export const TAG = "vttSync";

/** Patches kept to check that a step back in the tracker is an undo of the
 * module's own end_turns; a step back further than this is refused. */
export const HISTORY = 200;

/** Patches asked for on arrival, so a step back works right after a reload. */
export const HISTORY_ON_CONNECT = 50;

/** Tracker edits come in bursts (several combatants added at once, a
 * deletion followed by its turn fix): wait this long for the burst to end
 * before sending one set_order. */
export const ORDER_DEBOUNCE_MS = 50;

/** Errors kept for inspection (api.errors in a console); older ones are dropped. */
export const MAX_ERRORS = 50;

/** A server URL as a WebSocket URL: http(s) -> ws(s), no scheme -> ws. */
export function toWsUrl(text) {
  const url = String(text || "").trim();
  if (!url) return "";
  if (/^wss?:\/\//i.test(url)) return url;
  if (/^https?:\/\//i.test(url)) return url.replace(/^http/i, "ws");
  return `ws://${url}`;
}

function same(a, b) {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

export class VttSyncModule {
  /**
   * @param {object} env  Foundry's globals: Hooks, game, ui, CONFIG, Actor, WebSocket
   * @param {Function} Client the VttSyncClient class (client_stub/web/vtt-sync-client.js)
   * @param {object} [opts]
   * @param {Function} [opts.createUi] builds the DOM side (ui.mjs); none in tests
   */
  constructor(env, Client, { createUi = null } = {}) {
    this.env = env;
    this.Client = Client;
    this.ui = createUi ? createUi(this) : null;
    this.client = null;
    this.status = "off";
    this.history = [];
    this.lastClock = null;
    this.queue = Promise.resolve();
    this.syncScheduled = false;
    this.seen = new Map(); // combat id -> the round this client last saw (start detection)
    this.offsets = new Map(); // combat id -> Foundry round minus server round
    this.orderTimers = new Map();
    this.warned = new Map(); // key -> message shown, so a state is reported once
    this.wasAutomation = false;
    this.errors = [];
  }

  get game() {
    return this.env.game;
  }

  get room() {
    return this.setting("room") || "";
  }

  // ------------------------------------------------------------ registration

  register() {
    const H = this.env.Hooks;
    H.once("init", () => this.registerSettings());
    H.once("ready", () => this.onReady());
    H.on("combatStart", (combat, data) => this.onCombatStart(combat, data));
    H.on("combatTurn", (combat, data, options) => this.zeroCombatTime(combat, options));
    H.on("combatRound", (combat, data, options) => this.zeroCombatTime(combat, options));
    H.on("preUpdateCombat", (combat, changed, options) => this.onPreUpdateCombat(combat, changed, options));
    H.on("updateCombat", (combat, changed) => this.onUpdateCombat(combat, changed));
    H.on("combatTurnChange", (combat, prior, current) => this.onTurnChange(combat, prior, current));
    H.on("createCombat", (combat) => this.seen.set(combat.id, combat.round ?? 0));
    H.on("deleteCombat", (combat) => this.onDeleteCombat(combat));
    for (const hook of ["createCombatant", "deleteCombatant", "updateCombatant"]) {
      H.on(hook, (combatant) => this.scheduleOrder(combatant.parent ?? combatant.combat));
    }
    H.on("updateWorldTime", (worldTime, dt, options) => this.onWorldTime(worldTime, options));
    H.on("preUpdateActor", (actor, changed, options) => this.onPreUpdateActor(actor, changed, options));
    H.on("updateActor", (actor, changed, options) => this.onUpdateActor(actor, changed, options));
    H.on("userConnected", () => this.onUsersChanged());
    this.ui?.register(H);
    return this;
  }

  registerSettings() {
    const s = this.game.settings;
    const reconnect = () => this.connect();
    const generation = this.game.release?.generation ?? 12;
    s.register(MODULE_ID, "serverUrl", {
      name: "VTTSYNC.Settings.ServerUrl.Name",
      hint: "VTTSYNC.Settings.ServerUrl.Hint",
      scope: "world",
      config: true,
      type: String,
      default: "",
      onChange: reconnect,
    });
    s.register(MODULE_ID, "room", {
      name: "VTTSYNC.Settings.Room.Name",
      hint: "VTTSYNC.Settings.Room.Hint",
      scope: "world",
      config: true,
      type: String,
      default: "",
      onChange: reconnect,
    });
    // A token is a user's secret: never in world scope, where every client reads it.
    s.register(MODULE_ID, "token", {
      name: "VTTSYNC.Settings.Token.Name",
      hint: "VTTSYNC.Settings.Token.Hint",
      scope: generation >= 13 ? "user" : "client",
      config: true,
      type: String,
      default: "",
      onChange: reconnect,
    });
    // The world time of the server's second 0, per room (game.time = clock + offset).
    s.register(MODULE_ID, "clock", { scope: "world", config: false, type: Object, default: {} });
    // Foundry user id -> {room, user}: the server user each player's client logged in as.
    s.register(MODULE_ID, "users", {
      scope: "world",
      config: false,
      type: Object,
      default: {},
      onChange: () => this.onUserMap(),
    });
  }

  setting(key) {
    try {
      return this.game.settings.get(MODULE_ID, key);
    } catch {
      return undefined;
    }
  }

  onReady() {
    for (const combat of this.game.combats ?? []) this.seen.set(combat.id, combat.round ?? 0);
    this.game.socket?.on(`module.${MODULE_ID}`, (msg) => this.onSocket(msg));
    this.ui?.ready();
    this.connect();
  }

  // ------------------------------------------------------------ connection

  connect() {
    const old = this.client;
    this.client = null;
    old?.close();
    const url = toWsUrl(this.setting("serverUrl"));
    const room = this.room;
    const token = String(this.setting("token") || "").trim();
    this.history = [];
    this.lastClock = null;
    this.warned.clear();
    if (!url || !room || !token) {
      this.setStatus("off");
      return null;
    }
    const client = new this.Client({
      url,
      token,
      room,
      WebSocketImpl: this.env.WebSocket ?? globalThis.WebSocket,
    });
    this.client = client;
    const mine =
      (fn) =>
      (...args) => {
        if (this.client === client) fn(...args);
      };
    client.on(
      "status",
      mine((status, detail) => this.setStatus(status, detail)),
    );
    client.on(
      "patch",
      mine((patch) => this.onPatch(patch)),
    );
    client.on(
      "welcome",
      mine((frame) => this.onWelcome(frame)),
    );
    client.on(
      "state",
      mine(() => this.onState()),
    );
    client.connect().catch(() => {}); // a final failure arrives as the status "failed"
    return client;
  }

  /** Status changes reach the indicator; the user hears of a lost
   * connection once, not at every retry, and once more when it is back. */
  setStatus(status, detail = "") {
    const before = this.status;
    this.status = status;
    this.ui?.status(status, detail);
    if (status === "connected") {
      if (this.warned.has("connection")) {
        this.warned.delete("connection");
        this.notify("info", "Reconnected");
      }
    } else if (status === "disconnected" && before !== "disconnected") {
      this.warnOnce("connection", "Disconnected", { url: toWsUrl(this.setting("serverUrl")) });
    } else if (status === "failed") {
      this.warned.set("connection", "failed");
      this.notify("error", "Failed", { reason: detail });
    }
  }

  onWelcome(frame) {
    if (frame.role === "gm" && !this.game.user?.isGM) {
      this.warnOnce("gm-token", "GmTokenOnPlayer");
    }
    this.announce();
    if (!this.history.length) {
      this.client.history(HISTORY_ON_CONNECT).then((patches) => this.addHistory(patches));
    }
    if (this.isAutomation()) this.becomeAutomation();
  }

  onPatch(patch) {
    this.addHistory([patch]);
  }

  addHistory(patches) {
    const byV = new Map(this.history.map((p) => [p.v, p]));
    for (const p of patches) byV.set(p.v, { v: p.v, id: p.id, by: p.by, events: p.events || [] });
    this.history = [...byV.values()].sort((a, b) => a.v - b.v).slice(-HISTORY);
  }

  onState() {
    this.ui?.refresh();
    if (this.isAutomation()) this.scheduleSync();
  }

  /** Is this client the one that sends automation? The active GM's, once
   * the server welcomed it as a GM; also while the connection is down, so
   * that what happens meanwhile is sent when it is back (the client keeps
   * the commands and resends them under their ids). */
  isAutomation() {
    const g = this.game;
    const c = this.client;
    return Boolean(
      c &&
      c.role === "gm" &&
      c.status !== "failed" &&
      c.status !== "closed" &&
      g.user?.isGM &&
      g.users?.activeGM?.isSelf,
    );
  }

  /** A user connected or left: the active GM may have changed. */
  onUsersChanged() {
    const now = this.isAutomation();
    if (now && !this.wasAutomation) this.becomeAutomation();
    this.wasAutomation = now;
  }

  /** A player's server user became known: the owners of the actors follow. */
  onUserMap() {
    if (!this.isAutomation()) return;
    this.enqueue(async () => {
      for (const actor of this.linkedActors()) await this.pushSheet(actor);
    });
  }

  /** This client now sends automation: bring everything in step. */
  becomeAutomation() {
    this.wasAutomation = true;
    this.game.socket?.emit(`module.${MODULE_ID}`, { type: "who" });
    this.scheduleSync();
    this.enqueue(async () => {
      for (const actor of this.linkedActors()) await this.pushSheet(actor);
      for (const combat of this.game.combats ?? []) {
        if (this.isLinked(combat) && combat.started) await this.syncOrder(combat, { reconcile: true });
      }
    });
  }

  // ------------------------------------------------------------ work queue

  /** Automation runs one task at a time, in order: a turn's end_turn, the
   * clock mirrored after it, the sheets written after that. */
  enqueue(fn) {
    const run = this.queue.then(fn).catch((err) => this.report(err));
    this.queue = run;
    return run;
  }

  /** Resolves once the work queued so far is done (tests, and callers that
   * must see the effect of an automation step). */
  idle() {
    return this.queue;
  }

  report(err) {
    this.errors.push(err);
    if (this.errors.length > MAX_ERRORS) this.errors.shift();
    if (err?.name === "CommandError") {
      this.notify("warn", "Refused", { op: err.op || "", message: err.serverMessage || err.message });
    } else if (err?.name === "ConnectionFailed") {
      // the status already told the user
    } else {
      console.error("vtt-sync:", err);
      this.notify("error", "Internal", { message: String(err?.message || err) });
    }
  }

  command(op, args = {}, opts = {}) {
    if (!this.client) return Promise.reject(new Error("vtt-sync is not connected"));
    return this.client.command(op, args, opts).catch((err) => {
      err.op = op;
      throw err;
    });
  }

  // ------------------------------------------------------------ notifications

  t(key, data) {
    const i18n = this.game.i18n;
    const k = `VTTSYNC.${key}`;
    return data ? i18n.format(k, data) : i18n.localize(k);
  }

  notify(level, key, data) {
    const text = this.t(key, data);
    this.env.ui?.notifications?.[level]?.(text);
    return text;
  }

  /** Report a state once; the same key again is silent until it is cleared. */
  warnOnce(key, messageKey, data) {
    const text = this.t(messageKey, data);
    if (this.warned.get(key) === text) return;
    this.warned.set(key, text);
    this.env.ui?.notifications?.warn?.(text);
  }

  // ------------------------------------------------------------ users

  /** A player's client tells the GM which server user it logged in as, so
   * that linking an actor owned by that player makes them its owner. */
  announce() {
    if (!this.client?.user) return;
    const msg = { type: "user", room: this.room, user: this.client.user, foundryUser: this.game.user.id };
    if (this.isAutomation()) this.enqueue(() => this.recordUser(msg));
    else this.game.socket?.emit(`module.${MODULE_ID}`, msg);
  }

  onSocket(msg) {
    if (!msg || typeof msg !== "object") return;
    if (msg.type === "who" && !this.game.user?.isGM) this.announce();
    if (msg.type === "user" && this.isAutomation()) this.enqueue(() => this.recordUser(msg));
  }

  async recordUser(msg) {
    if (msg.room !== this.room) return;
    const u = this.client?.state?.users?.[msg.user];
    const fu = this.game.users.get(msg.foundryUser);
    // A claim must name a server user of the same kind (a player cannot claim the GM).
    if (!u || !fu || (u.role === "gm") !== Boolean(fu.isGM)) return;
    const map = { ...(this.setting("users") || {}) };
    if (map[msg.foundryUser]?.room === msg.room && map[msg.foundryUser]?.user === msg.user) return;
    map[msg.foundryUser] = { room: msg.room, user: msg.user };
    await this.game.settings.set(MODULE_ID, "users", map);
  }

  /** The server user owning an actor: the mapped server user of a player
   * owning it; null when no player owns it; undefined when a player owns
   * it but has not connected yet (the server's owner is then left alone). */
  ownerOf(actor) {
    const players = this.game.users.filter((u) => !u.isGM && actor.testUserPermission?.(u, "OWNER"));
    if (!players.length) return null;
    const map = this.setting("users") || {};
    for (const u of players) {
      const m = map[u.id];
      if (m && m.room === this.room) return m.user;
    }
    return undefined;
  }

  // ------------------------------------------------------------ actors

  adapter() {
    return adapterFor(this.game.system?.id);
  }

  settingsGetter() {
    return (ns, key) => {
      try {
        return this.game.settings.get(ns, key);
      } catch {
        return undefined;
      }
    };
  }

  /** The server character an actor is linked to, in this room, or null. */
  charOf(actor) {
    const f = actor?.flags?.[MODULE_ID];
    return f && f.room === this.room && f.char ? f.char : null;
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
      for (const c of combat.combatants ?? []) if (c.actor?.isToken) add(c.actor);
    }
    return out;
  }

  scheduleSync() {
    if (this.syncScheduled) return;
    this.syncScheduled = true;
    this.enqueue(async () => {
      this.syncScheduled = false;
      if (!this.isAutomation()) return;
      await this.syncClock();
      await this.syncActors();
    });
  }

  /** Show the server's values and conditions on every linked actor: one
   * batched update of the world actors, tagged so nothing reacts to it. */
  async syncActors() {
    const state = this.client?.state;
    if (!state) return;
    const adapter = this.adapter();
    const get = this.settingsGetter();
    const batch = [];
    const single = [];
    const conditions = [];
    for (const actor of this.linkedActors()) {
      const char = state.characters?.[this.charOf(actor)];
      if (!char) {
        this.warnOnce(`gone:${actor.id}`, "CharacterGone", { name: actor.name });
        continue;
      }
      const update = adapter.write(actor, char, get);
      if (Object.keys(update).length) {
        if (actor.isToken) single.push([actor, update]);
        else batch.push({ _id: actor.id, ...update });
      }
      const changes = conditionChanges(adapter, actor, char.condition);
      if (Object.keys(changes).length) conditions.push([actor, changes]);
    }
    const Actor = this.env.CONFIG?.Actor?.documentClass ?? this.env.Actor;
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
    this.ui?.refresh();
    if (this.isAutomation()) this.enqueue(() => this.pushSheet(actor));
  }

  async pushSheet(actor) {
    const id = this.charOf(actor);
    const char = this.client?.state?.characters?.[id];
    if (!char) return;
    const sheet = this.adapter().read(actor, this.settingsGetter());
    const set = sheetCorrections(sheet, char, this.ownerOf(actor));
    if (!Object.keys(set).length) return;
    const key = hash(JSON.stringify(set));
    await this.command(
      "update_character",
      { char: id, set },
      { id: `sheet:${id}:${key}@${this.client.version}` },
    );
  }

  /** An edit of PV, PE or PP on a sheet (on the client making it): removed
   * from the update; from a GM it becomes the server commands it stands for
   * (damage, heal, a correction), the sheet then shows the server's result. */
  onPreUpdateActor(actor, changed, options) {
    if (options?.[TAG]) return;
    const id = this.charOf(actor);
    if (!id) return;
    const edits = this.adapter().edits(actor, changed, this.settingsGetter());
    if (!Object.keys(edits).length) return;
    if (!this.client?.connected) {
      this.notify("warn", "EditOffline", { name: actor.name });
      return;
    }
    if (this.client.role !== "gm") {
      this.notify("info", "EditByPlayer", { name: actor.name });
      return;
    }
    const char = this.client.state?.characters?.[id];
    if (!char) return;
    const v = this.client.version;
    const cmds = editCommands(id, char, edits);
    this.enqueue(async () => {
      for (const [i, [op, args]] of cmds.entries()) {
        await this.command(op, args, { id: `edit:${id}:${i}.${op}@${v}` });
      }
    });
  }

  /** The GM's "link" button: the actor becomes (or finds again) a server
   * character with id `fvtt-<actor id>`, made from its sheet, owned by its
   * owning player; the actor records {room, char} in its flags. */
  async link(actor) {
    if (!this.client?.connected || this.client.role !== "gm") {
      this.notify("warn", "LinkNeedsGm");
      return null;
    }
    const id = this.charIdFor(actor);
    const state = this.client.state;
    if (!state.characters?.[id]) {
      const sheet = this.adapter().read(actor, this.settingsGetter());
      const args = { ...sheet, id, pv: Math.max(1, sheet.pv) }; // a new character starts conscious
      const owner = this.ownerOf(actor);
      if (owner) args.owner = owner;
      try {
        await this.command("add_character", args, { id: `link:${id}@${this.client.version}` });
      } catch (err) {
        if (err.code !== "conflict") {
          this.report(err);
          return null;
        }
      }
    }
    await actor.update({ [`flags.${MODULE_ID}`]: { room: this.room, char: id } }, { [TAG]: true });
    this.notify("info", "Linked", { name: actor.name, char: id });
    if (this.isAutomation()) {
      await this.enqueue(() => this.pushSheet(actor));
      this.scheduleSync();
      for (const combat of this.game.combats ?? []) {
        if (this.isLinked(combat) && combat.started) this.scheduleOrder(combat);
      }
    }
    return id;
  }

  /** The actor stops following the room (its character stays in the
   * room; a running combat's order drops it). */
  async unlink(actor) {
    await actor.update({ [`flags.${MODULE_ID}`]: { room: null, char: null } }, { [TAG]: true });
    for (const combat of this.game.combats ?? []) {
      if (this.isLinked(combat) && combat.started) this.scheduleOrder(combat);
    }
  }

  /** The tracker's "link combatants" button: links every combatant's actor
   * and makes the combat the room's (for a combat started before the module
   * was set up: the server's combat starts at the tracker's current turn). */
  async linkCombat(combat) {
    if (!this.client?.connected || this.client.role !== "gm") {
      this.notify("warn", "LinkNeedsGm");
      return;
    }
    for (const c of combat.combatants ?? []) {
      if (c.actor && !this.charOf(c.actor)) await this.link(c.actor);
    }
    if (!this.isLinked(combat)) await combat.setFlag(MODULE_ID, "room", this.room);
    if (combat.started) this.scheduleOrder(combat);
  }

  /** A player's (or GM's) action from a sheet, sent with this client's own token. */
  async act(actor, op, args) {
    const id = this.charOf(actor);
    if (!id || !this.client?.connected) {
      this.notify("warn", "ActOffline");
      return null;
    }
    const full = op === "untend" ? { ...args } : { char: id, ...args }; // untend names the patient only
    try {
      return await this.command(op, full);
    } catch (err) {
      this.report(err);
      return null;
    }
  }

  /** The actions offered on an actor's sheet (actions.mjs). */
  actionsFor(actor) {
    const id = this.charOf(actor);
    return id && this.client?.state ? availableActions(this.client.state, id) : [];
  }

  // ------------------------------------------------------------ world time

  /** The world time of the server's second 0; set once per room, on the
   * first sync, so Foundry's calendar keeps its date. */
  async clockOffset() {
    const saved = this.setting("clock") || {};
    if (saved.room === this.room && Number.isFinite(saved.offset)) return saved.offset;
    const offset = Math.floor(this.game.time.worldTime) - this.client.state.clock;
    await this.game.settings.set(MODULE_ID, "clock", { room: this.room, offset });
    return offset;
  }

  /** Absolute, so two GM tabs writing the same value write it once. */
  async setWorldTime(value) {
    const time = this.game.time;
    if (typeof time.set === "function") return time.set(value, { [TAG]: true }); // v13
    return this.game.settings.set("core", "time", value, { [TAG]: true }); // v12: what GameTime#advance does
  }

  /** The server's clock moved (an end_turn ending a round, an advance, an
   * undo): Foundry's world time follows it. */
  async syncClock() {
    const state = this.client?.state;
    if (!state) return;
    const offset = await this.clockOffset();
    if (state.clock === this.lastClock) return;
    this.lastClock = state.clock;
    const target = state.clock + offset;
    if (this.game.time.worldTime !== target) await this.setWorldTime(target);
  }

  /** Someone changed Foundry's world time: forward it becomes advance_clock
   * (from the server clock seen now, so a second tab's copy is refused);
   * backward is refused and undone (the server's time only moves on). */
  onWorldTime(worldTime, options) {
    if (options?.[TAG]) return;
    if (!this.isAutomation()) return;
    const base = this.client.state.clock;
    this.enqueue(() => this.worldTimeChanged(worldTime, base));
  }

  async worldTimeChanged(worldTime, base) {
    const offset = await this.clockOffset();
    const state = this.client.state;
    const wanted = Math.floor(worldTime - offset);
    if (wanted === base) return; // our own echo, or less than a second
    if (wanted < base) {
      this.notify("warn", "Rewind", { seconds: base - wanted });
      this.lastClock = null;
      await this.syncClock();
      return;
    }
    const v = this.client.version;
    try {
      await this.command(
        "advance_clock",
        { seconds: wanted - base, from: base },
        { id: clockId(base, wanted, v) },
      );
    } catch (err) {
      if (err.code === "conflict" && this.client.state.clock === wanted) return; // another tab did it
      if (err.code === "conflict" && state.clock !== base) this.notify("warn", "ClockCollision");
      else this.report(err);
      this.lastClock = null;
      await this.syncClock();
    }
  }

  // ------------------------------------------------------------ combat

  isLinked(combat) {
    return Boolean(this.room) && combat?.getFlag?.(MODULE_ID, "room") === this.room;
  }

  roundOffset(combat) {
    return this.offsets.get(combat.id) ?? combat.getFlag?.(MODULE_ID, "roundOffset") ?? 0;
  }

  /** The server character of each of Foundry's turns (null: not linked). */
  charsOf(combat) {
    return (combat.turns ?? []).map((c) => this.charOf(c.actor));
  }

  /** A GM starting a combat in a world tied to a room makes it the room's
   * combat: the flag goes in with the start itself, before any turn. */
  onCombatStart(combat, data) {
    if (!this.room || !this.game.user?.isGM || !data) return;
    data.flags = {
      ...(data.flags || {}),
      [MODULE_ID]: { ...(data.flags?.[MODULE_ID] || {}), room: this.room },
    };
  }

  /** Time is counted once: the server's end_turn advances the clock by a
   * round and the module mirrors it, so Foundry's own advance is set to 0
   * (v12 `advanceTime`, v13 `worldTime.delta`). */
  zeroCombatTime(combat, options) {
    if (!options || !this.isLinked(combat)) return;
    if (options.worldTime && typeof options.worldTime === "object") options.worldTime.delta = 0;
    if ("advanceTime" in options || !options.worldTime) options.advanceTime = 0;
  }

  onUpdateCombat(combat, changed) {
    const before = this.seen.get(combat.id) ?? 0;
    this.seen.set(combat.id, combat.round ?? 0);
    if (!this.isLinked(combat) || !this.isAutomation()) return;
    if (changed && "round" in changed && before === 0 && combat.round >= 1) {
      const at = { round: combat.round, index: combat.turn ?? 0 }; // later turns are queued after this
      this.enqueue(() => this.startCombat(combat, at));
    }
  }

  async startCombat(combat, at) {
    const s = this.client.state.combat;
    if (s) {
      if (same(linkedOrder(this.charsOf(combat), this.client.state), s.order)) {
        await this.reconcile(combat, 0, at); // another tab started it
        return;
      }
      const other = [...(this.game.combats ?? [])].some(
        (c) => c.id !== combat.id && this.isLinked(c) && c.started,
      );
      if (other) {
        this.notify("warn", "OneCombat", { name: combat.name || combat.id });
        await combat.setFlag(MODULE_ID, "room", null);
        return;
      }
      // No running Foundry combat has the server's: a leftover (ended while
      // nobody was connected, or started elsewhere). This combat replaces it.
      await this.command("combat_end", {}, { id: `combat:${combat.id}:replace@${this.client.version}` });
    }
    if (!(await this.beginServerCombat(combat, at))) this.warnOnce(`nolinked:${combat.id}`, "NoLinked");
  }

  /**
   * Start the server's combat on Foundry's current position: combat_start
   * with the linked combatants still to act this round, then set_order with
   * all of them (those already past act from the next round). No turn is
   * ended for combatants Foundry passed over; when the server's combat starts
   * later than Foundry's, the round offset is recorded on the combat.
   */
  async beginServerCombat(combat, at = { round: combat.round, index: combat.turn ?? 0 }) {
    const state = this.client.state;
    const chars = this.charsOf(combat);
    const order = linkedOrder(chars, state);
    if (!order.length) return false;
    const rest = linkedOrder(chars.slice(at.index), state);
    const v = this.client.version;
    await this.command(
      "combat_start",
      { order: rest.length ? rest : order },
      { id: `combat:${combat.id}:start@${v}` },
    );
    if (rest.length && rest.length < order.length) {
      await this.command("set_order", { order }, { id: orderId(combat.id, order, v) });
    }
    const offset = rest.length ? at.round - 1 : at.round;
    this.offsets.set(combat.id, offset);
    if (offset !== (combat.getFlag(MODULE_ID, "roundOffset") ?? 0)) {
      await combat.setFlag(MODULE_ID, "roundOffset", offset);
    }
    return true;
  }

  onDeleteCombat(combat) {
    this.seen.delete(combat.id);
    if (!this.isLinked(combat) || !this.isAutomation()) return;
    this.enqueue(async () => {
      if (!this.client.state.combat) return;
      await this.command("combat_end", {}, { id: `combat:${combat.id}:end@${this.client.version}` });
    });
  }

  /** Combatants added, removed or reordered: one set_order after the burst. */
  scheduleOrder(combat) {
    if (!combat || !this.isLinked(combat) || !this.isAutomation()) return;
    clearTimeout(this.orderTimers.get(combat.id));
    this.orderTimers.set(
      combat.id,
      setTimeout(() => {
        this.orderTimers.delete(combat.id);
        this.enqueue(() => this.syncOrder(combat, { reconcile: true }));
      }, ORDER_DEBOUNCE_MS),
    );
  }

  async syncOrder(combat, { reconcile = false } = {}) {
    if (!this.isAutomation() || !combat.started) return;
    const state = this.client.state;
    const order = linkedOrder(this.charsOf(combat), state);
    const s = state.combat;
    if (!s) {
      if (order.length) await this.beginServerCombat(combat);
      return;
    }
    if (!order.length) {
      await this.command("combat_end", {}, { id: `combat:${combat.id}:end@${this.client.version}` });
      return;
    }
    if (!same(order, s.order)) {
      const args = { order };
      const turn = this.trackerTurn(combat, order, s);
      if (turn !== null) args.turn = turn;
      await this.command("set_order", args, { id: orderId(combat.id, order, this.client.version) });
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
    const at = { round: combat.round, index: combat.turn ?? 0 };
    const expected = expectedTurn(this.charsOf(combat), order, at, this.roundOffset(combat));
    if (!expected) return null;
    if (expected.round === s.round) return order.indexOf(expected.char);
    if (expected.round === s.round + 1 && expected.char === order[0]) return order.length;
    return null;
  }

  /** Foundry's tracker moved (on every client, after the update). */
  onTurnChange(combat, prior, current) {
    if (!this.isLinked(combat) || !this.isAutomation()) return;
    if (!prior?.round) return; // the start: onUpdateCombat
    const turns = combat.turns ?? [];
    const byId = (id) => turns.findIndex((t) => t.id === id);
    if (prior.combatantId && byId(prior.combatantId) < 0) {
      this.scheduleOrder(combat); // the current combatant was removed: a tracker edit
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
      this.enqueue(async () => {
        if (positions === null) {
          this.warnOnce(`jump:${combat.id}`, "Jump", { max: MAX_WALK });
          return;
        }
        const s = this.client.state.combat;
        const chars = this.charsOf(combat);
        const steps = s ? linkedTurns(chars, s.order, positions, this.roundOffset(combat)).length : 0;
        await this.reconcile(combat, steps, to);
      });
    } else if (dir < 0) {
      this.enqueue(() => this.goBack(combat, from, to));
    }
  }

  /**
   * Bring the server's turn to the one Foundry's tracker shows at `at` (the
   * position a turn change reached: later changes are queued after this
   * one), ending at most `maxSteps` turns (the linked turns Foundry walked
   * over). Each
   * end_turn names the turn it ends (char, round), so a copy from another
   * tab is a conflict, never a second end; anything else is reported as out
   * of step, not forced.
   */
  async reconcile(combat, maxSteps, at = null) {
    const v0 = this.client.version;
    const where = () => at ?? { round: combat.round, index: combat.turn ?? 0 };
    for (let i = 0; i <= MAX_WALK; i++) {
      const state = this.client.state;
      const s = state.combat;
      if (!s) return;
      const chars = this.charsOf(combat);
      const offset = this.roundOffset(combat);
      const expected = expectedTurn(chars, s.order, where(), offset);
      if (!expected) return;
      const server = { char: s.order[s.turn], round: s.round };
      if (server.char === expected.char && server.round === expected.round) {
        this.warned.delete(`step:${combat.id}`);
        return;
      }
      const behind = serverBehind(chars, server, expected);
      if (behind === false) return; // the server is ahead: Foundry's tracker walks into it
      if (behind === null || i >= maxSteps) {
        const name = (id) => state.characters?.[id]?.name ?? id;
        this.warnOnce(`step:${combat.id}`, "OutOfStep", {
          server: `${name(server.char)} (${server.round + offset})`,
          foundry: `${name(expected.char)} (${expected.round + offset})`,
        });
        return;
      }
      const index = chars.indexOf(server.char);
      try {
        await this.command(
          "end_turn",
          { char: server.char, round: server.round },
          { id: turnId(combat.id, server.round, index, server.char, v0) },
        );
      } catch (err) {
        if (err.code !== "conflict") throw err; // conflict: another tab ended it; look again
      }
    }
  }

  /** The GM "sync turns" button: catch the server up with the tracker. */
  resync(combat) {
    return this.enqueue(() => this.syncOrder(combat, { reconcile: false })).then(() =>
      this.enqueue(() => this.reconcile(combat, 2 * (combat.turns?.length ?? 0))),
    );
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
    if (options?.[TAG] || !changed) return;
    if (!("round" in changed) && !("turn" in changed)) return;
    if (!this.isLinked(combat) || !this.client?.connected || this.client.role !== "gm") return;
    if (!combat.started) return;
    const from = { round: combat.round, index: combat.turn ?? 0 };
    const to = { round: changed.round ?? combat.round, index: changed.turn ?? combat.turn ?? 0 };
    if (comparePositions(to, from) >= 0) return;
    if (to.round < 1) {
      this.notify("warn", "BackBeforeStart");
      return false;
    }
    const turns = this.backTurns(combat, from, to);
    if (turns === null) {
      this.notify("warn", "Jump", { max: MAX_WALK });
      return false;
    }
    const plan = planUndo(this.history, turns, combat.id);
    if (!plan.ok) {
      this.notify("warn", plan.reason === "history" ? "BackNoHistory" : "BackNotLast");
      return false;
    }
  }

  async goBack(combat, from, to) {
    const s = this.client.state.combat;
    if (!s) return;
    const chars = this.charsOf(combat);
    const offset = this.roundOffset(combat);
    const expected = expectedTurn(chars, s.order, to, offset);
    if (expected && s.order[s.turn] === expected.char && s.round === expected.round) return; // done
    const turns = to.round >= 1 ? this.backTurns(combat, from, to) : null;
    const plan = turns ? planUndo(this.history, turns, combat.id) : { ok: false, reason: "not_last" };
    if (!plan.ok) {
      this.notify("warn", plan.reason === "history" ? "BackNoHistory" : "BackNotLast");
      await this.restoreTurn(combat, from);
      return;
    }
    for (const p of plan.undo) {
      const v = this.client.version;
      try {
        await this.command("undo", {}, { expect: v, id: `undo:${p.v}@${v}` });
      } catch (err) {
        this.report(err);
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
