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
  undoStep,
  serverBehind,
  turnId,
  walk,
} from "./combat.mjs";
import { availableActions } from "./actions.mjs";
import { MODULE_ID, adapterFor, conditionChanges, editCommands, sheetCorrections } from "./systems.mjs";
import { escapeHtml } from "./html.mjs";
import { eventHtml } from "./chat.mjs";
import { guardedWebSocket, isMixedContent, parseHosts, testConnection, toWsUrl } from "./connection.mjs";

export { MODULE_ID, toWsUrl };

/** The option key that marks the module's own writes, so that its hooks
 * ignore their echo (update options travel with the update to every client). */
export const TAG = "vttSync";

/** Tracker edits come in bursts (several combatants added at once, a
 * deletion followed by its turn fix): wait this long for the burst to end
 * before sending one set_order. */
export const ORDER_DEBOUNCE_MS = 50;

/** Small world-time advances (a calendar module's real-time clock writes
 * every few seconds) are held and sent as one advance_clock once they add up
 * to this many world seconds... */
export const CLOCK_BATCH_SECONDS = 60;

/** ...or this long after the first one (or before any other command). */
export const CLOCK_WINDOW_MS = 60_000;

/** A system's own advance this close to a room combat's end is its
 * end-of-combat time (sfrpg), dropped. */
export const COMBAT_END_ADVANCE_MS = 3000;

/** Where a GM's browser keeps an advance not sent yet (localStorage). */
export const PENDING_CLOCK_KEY = "vtt-sync.pendingClock";

/** Errors kept for inspection (api.errors in a console); older ones are dropped. */
export const MAX_ERRORS = 50;

function same(a, b) {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

export class VttSyncModule {
  /**
   * @param {VttSyncEnv} env  Foundry's globals: Hooks, game, ui, CONFIG, Actor, WebSocket
   * @param {any} Client the VttSyncClient class (client_stub/web/vtt-sync-client.js; plain JS, untyped)
   * @param {object} [opts]
   * @param {Function} [opts.createUi] builds the DOM side (ui.mjs); none in tests
   * @param {number} [opts.clockWindowMs] how long a small world-time advance is held
   * @param {number} [opts.clockBatchSeconds] the world seconds sent at once
   */
  constructor(
    env,
    Client,
    { createUi = null, clockWindowMs = CLOCK_WINDOW_MS, clockBatchSeconds = CLOCK_BATCH_SECONDS } = {},
  ) {
    this.env = env;
    this.Client = Client;
    this.ui = createUi ? createUi(this) : null;
    this.client = null;
    this.status = "off";
    this.lastClock = null;
    this.queue = Promise.resolve();
    this.syncScheduled = false;
    this.seen = new Map(); // combat id -> the round this client last saw (start detection)
    this.offsets = new Map(); // combat id -> Foundry round minus server round
    this.orderTimers = new Map();
    this.warned = new Map(); // key -> message shown, so a state is reported once
    this.wasAutomation = false;
    this.errors = [];
    this.apiListeners = new Map();
    this.readyFired = false;
    this.final = null; // the key of a failure no retry can fix, once reported
    this.clockPending = null; // {room, base, seconds, parts}: world time held, not sent yet
    this.clockInflight = 0; // seconds sent, not acknowledged yet
    this.clockTimer = null;
    this.clockWindowMs = clockWindowMs;
    this.clockBatchSeconds = clockBatchSeconds;
    this.endedCombats = []; // when room combats ended (Date.now()), for a system's end-of-combat advance
  }

  get game() {
    return this.env.game;
  }

  get room() {
    return this.setting("room") || "";
  }

  // ------------------------------------------------------------ API

  /**
   * The small API other modules use (README, "API"): game.modules.get(
   * "vtt-sync").api, also passed to the `vtt-sync.ready` hook.
   */
  api() {
    if (this._api) return this._api;
    const mod = this;
    this._api = Object.freeze({
      version: 1,
      /** off, connecting, connected, disconnected, failed, closed */
      get status() {
        return mod.status;
      },
      /** The room as this user may see it (the server's view), or null. */
      get state() {
        return mod.client?.state ?? null;
      },
      /** The errors kept for inspection in a console. */
      get errors() {
        return [...mod.errors];
      },
      /** The server character id of an actor (linked in this room), or null. */
      charId: (actor) => mod.charOf(actor),
      /** The server's character of an actor, or null. */
      character: (actor) => {
        const id = mod.charOf(actor);
        return id ? (mod.client?.state?.characters?.[id] ?? null) : null;
      },
      /** A player's action (first_aid, stabilize...), with this user's token. */
      act: (actor, op, args = {}) => mod.act(actor, op, args),
      link: (actor) => mod.link(actor),
      unlink: (actor) => mod.unlink(actor),
      setSynced: (actor, synced) => mod.setPaused(actor, !synced),
      /** The settings' connection test: {code, detail?, role?, user?}. */
      testConnection: (values) => mod.testConnection(values),
      /** Subscribe to "state" (state), "patch" (patch), "status" (status);
       * returns the function that unsubscribes. */
      on: (type, fn) => {
        if (!mod.apiListeners.has(type)) mod.apiListeners.set(type, new Set());
        mod.apiListeners.get(type).add(fn);
        return () => mod.apiListeners.get(type)?.delete(fn);
      },
    });
    return this._api;
  }

  emitApi(type, ...args) {
    for (const fn of [...(this.apiListeners.get(type) ?? [])]) {
      try {
        fn(...args);
      } catch (err) {
        console.error("vtt-sync: an API listener failed", err);
      }
    }
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
    H.on("updateUser", (user, changed) => this.onUpdateUser(user, changed));
    this.ui?.register(H);
    return this;
  }

  registerSettings() {
    const s = this.game.settings;
    const reconnect = () => {
      if (!this.migrating) this.connect(); // ready connects once the token is migrated
    };
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
    // A token is a user's secret: kept in this browser's localStorage
    // (`client` scope, on v12 and v13), never in the world's database. Not
    // `world` (every client reads it), nor v13's `user` (stored in the
    // world's database, on Foundry's server, where a GM or a backup of the
    // world reads it). The same key on v12 and v13, so an upgrade keeps it.
    s.register(MODULE_ID, "token", {
      name: "VTTSYNC.Settings.Token.Name",
      hint: "VTTSYNC.Settings.Token.Hint",
      scope: "client",
      config: true,
      type: String,
      default: "",
      onChange: reconnect,
    });
    // Other hosts a cluster's redirect may send this world's users to.
    s.register(MODULE_ID, "redirectHosts", {
      name: "VTTSYNC.Settings.RedirectHosts.Name",
      hint: "VTTSYNC.Settings.RedirectHosts.Hint",
      scope: "world",
      config: true,
      type: String,
      default: "",
      onChange: reconnect,
    });
    s.register(MODULE_ID, "chatMessages", {
      name: "VTTSYNC.Settings.ChatMessages.Name",
      hint: "VTTSYNC.Settings.ChatMessages.Hint",
      scope: "world",
      config: true,
      type: Boolean,
      default: false,
    });
    if (this.ui?.MenuClass) {
      s.registerMenu(MODULE_ID, "connection", {
        name: "VTTSYNC.Menu.Name",
        label: "VTTSYNC.Menu.Label",
        hint: "VTTSYNC.Menu.Hint",
        icon: "fas fa-plug",
        type: this.ui.MenuClass,
        restricted: false, // each user tests (and enters) their own token
      });
    }
    // The world time of the server's second 0, per room (game.time = clock + offset).
    s.register(MODULE_ID, "clock", { scope: "world", config: false, type: Object, default: {} });
  }

  /** @param {"serverUrl" | "room" | "token" | "redirectHosts" | "chatMessages" | "clock"} key @returns {any} */
  setting(key) {
    try {
      return this.game.settings.get(MODULE_ID, key);
    } catch {
      return undefined;
    }
  }

  onReady() {
    for (const combat of this.game.combats ?? []) this.seen.set(combat.id, combat.round ?? 0);
    this.ui?.ready();
    this.migrating = true;
    this.migrateToken()
      .catch((err) => this.report(err))
      .then(() => {
        this.migrating = false;
        this.connect();
      });
  }

  /**
   * Up to 0.1, on v13, the token was a `user` setting: stored in the world's
   * database. It moves to this browser's storage (the `client` setting of
   * the same key) and the world's copy is deleted; a v12 world's token was
   * already a client setting under that key, so an upgrade keeps it. When
   * no token is found, connect() asks for it (once).
   */
  async migrateToken() {
    const storage = this.game.settings?.storage?.get?.("world");
    const me = this.game.user?.id;
    if (!storage || !me) return;
    const doc = storage.find?.((d) => d.key === `${MODULE_ID}.token` && d.user === me);
    if (!doc) return;
    let value = doc.value;
    if (typeof value === "string") {
      try {
        value = JSON.parse(value);
      } catch {
        /* a plain string */
      }
    }
    if (!String(this.setting("token") || "") && value) {
      await this.game.settings.set(MODULE_ID, "token", String(value));
      this.notify("info", "TokenMoved");
    }
    await doc.delete?.();
  }

  // ------------------------------------------------------------ connection

  /** The page's protocol ("https:" in most hosted worlds), "" outside a browser. */
  pageProtocol() {
    return this.env.location?.protocol ?? "";
  }

  /** This page's origin, which the server must allow (--allow-origin). */
  pageOrigin() {
    return this.env.location?.origin ?? "";
  }

  /** The server URL as the client uses it (wss:// by default from https). */
  serverUrl() {
    return toWsUrl(String(this.setting("serverUrl") ?? ""), this.pageProtocol());
  }

  connect() {
    const old = this.client;
    this.client = null;
    old?.close();
    const url = this.serverUrl();
    const room = this.room;
    const token = String(this.setting("token") || "").trim();
    this.lastClock = null;
    this.warned.clear();
    this.final = null;
    if (!url || !room || !token) {
      this.setStatus("off");
      if (url && room && !token) this.askToken();
      return null;
    }
    if (isMixedContent(url, this.pageProtocol())) {
      // No retry can fix this: the browser refuses ws:// from an https page.
      this.finalFailure(null, "Insecure", { url, wss: url.replace(/^ws:/i, "wss:") });
      return null;
    }
    const Base = this.env.WebSocket ?? globalThis.WebSocket;
    const WebSocketImpl = guardedWebSocket(Base, {
      configured: url,
      extraHosts: parseHosts(this.setting("redirectHosts")),
      onRefused: (target) => this.finalFailure(client, "RedirectRefused", { url: target, configured: url }),
      onInsecure: (target) =>
        this.finalFailure(client, "Insecure", { url: target, wss: target.replace(/^ws:/i, "wss:") }),
    });
    const client = new this.Client({ url, token, room, WebSocketImpl });
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

  /** A failure no retry can fix (mixed content, a redirect to a host the
   * GM did not configure): reported once, in words a GM can act on, and
   * the client stops (no token is sent anywhere meanwhile). */
  finalFailure(client, key, data) {
    if (client && this.client !== client) return;
    if (this.final) return;
    this.final = key;
    const text = this.t(key, data);
    this.status = "failed";
    this.ui?.status("failed", text);
    this.env.ui?.notifications?.error?.(this.escapeForNotice(text), { permanent: true });
    if (client) queueMicrotask(() => client.close());
  }

  /** Every setting is filled but this user's token (a new browser, or a
   * token that was never entered): say where it goes, once. */
  askToken() {
    this.warnOnce("token", "TokenMissing");
  }

  /** Status changes reach the indicator; the user hears of a lost
   * connection once, not at every retry, and once more when it is back. */
  setStatus(status, detail = "") {
    if (this.final) return; // reported already; the client is stopping
    const before = this.status;
    this.status = status;
    this.ui?.status(status, detail);
    if (status !== before) this.emitApi("status", status);
    if (status === "connected") {
      if (this.warned.has("connection")) {
        this.warned.delete("connection");
        this.notify("info", "Reconnected");
      }
    } else if (status === "disconnected" && before !== "disconnected") {
      const url = this.serverUrl();
      if (this.client && !this.client.connections) {
        // Never connected in this session: say what may be wrong. A page
        // cannot tell a server that is down from a certificate it does not
        // trust, so both are named.
        const https = url.replace(/^ws/i, "http");
        this.warnOnce("connection", /^wss:/i.test(url) ? "UnreachableTls" : "Unreachable", { url, https, origin: this.pageOrigin() });
      } else {
        this.warnOnce("connection", "Disconnected", { url });
      }
    } else if (status === "failed") {
      this.warned.set("connection", "failed");
      this.notify("error", "Failed", { reason: detail });
    }
  }

  /** The settings menu's connection test, with the settings as saved (or as typed). */
  testConnection(values = {}) {
    return testConnection(this.Client, this.env.WebSocket ?? globalThis.WebSocket, {
      url: values.serverUrl ?? this.setting("serverUrl"),
      room: values.room ?? this.room,
      token: values.token ?? String(this.setting("token") || "").trim(),
      pageProtocol: this.pageProtocol(),
      extraHosts: parseHosts(values.redirectHosts ?? this.setting("redirectHosts")),
    });
  }

  onWelcome(frame) {
    if (!this.readyFired) {
      this.readyFired = true;
      // For other modules: Hooks.once("vtt-sync.ready", (api) => ...), once
      // per page, at the first welcome from the server (README, "API").
      this.env.Hooks.callAll("vtt-sync.ready", this.api());
    }
    if (frame.role === "gm" && !this.game.user?.isGM) {
      this.warnOnce("gm-token", "GmTokenOnPlayer");
    }
    this.announce();
    if (this.isAutomation()) this.becomeAutomation();
  }

  onPatch(patch) {
    this.emitApi("patch", patch);
    if (this.isAutomation() && this.setting("chatMessages")) this.postEvents(patch);
  }

  /** Rule events as chat messages (opt-in, per world): the story where the
   * table already reads it. Posted by the automation client only. */
  postEvents(patch) {
    const state = this.client?.state;
    const ChatMessage = this.env.ChatMessage;
    if (!state || !ChatMessage?.create) return;
    for (const event of patch.events || []) {
      const content = eventHtml(event, state, (key, data) => this.t(key, data));
      if (!content) continue;
      Promise.resolve(
        ChatMessage.create({
          content,
          speaker: { alias: "vtt-sync" },
          flags: { [MODULE_ID]: { room: this.room, v: patch.v, kind: event.kind } },
        }),
      ).catch((err) => this.report(err));
    }
  }

  onState() {
    this.ui?.refresh();
    this.emitApi("state", this.client?.state);
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
    this.restoreClockPending();
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

  /** A command of the module's automation; world time held so far is sent
   * first, so the server sees time and turns in Foundry's order. */
  async command(op, args = {}, opts = {}) {
    if (!this.client) throw new Error("vtt-sync is not connected");
    const held = this.takeClockPending();
    if (held) await this.sendClock(held);
    return this.client.command(op, args, opts).catch((err) => {
      err.op = op;
      throw err;
    });
  }

  // ------------------------------------------------------------ notifications

  t(key, data) {
    const i18n = this.game.i18n;
    return i18n.format(`VTTSYNC.${key}`, { ...this.labels(), ...(data || {}) });
  }

  /** The names of PV, PE and PP as this system's players know them
   * (lang/*.json, VTTSYNC.Label.<system>): sfrpg's HP/SP/RP, pf1's HP (or
   * Wounds and Vigor) and the module's names for the rest. */
  labels(actor = null) {
    const system = this.adapter().id;
    let key = system;
    if (system === "pf1" && actor && this.adapter().paths(actor, this.settingsGetter()).pe) key = "pf1wv";
    const i18n = this.game.i18n;
    const one = (name) => {
      const k = `VTTSYNC.Label.${key}.${name}`;
      const v = i18n.localize(k);
      return v === k ? i18n.localize(`VTTSYNC.Label.generic.${name}`) : v;
    };
    return { pv: one("PV"), pe: one("PE"), pp: one("PP") };
  }

  /** Notifications are HTML (v12 renders the message as is; v13 cleans it
   * and renders it): the text, which carries server values, is escaped. */
  escapeForNotice(text) {
    return escapeHtml(text);
  }

  notify(level, key, data) {
    const text = this.t(key, data);
    this.env.ui?.notifications?.[level]?.(this.escapeForNotice(text));
    return text;
  }

  /** Report a state once; the same key again is silent until it is cleared. */
  warnOnce(key, messageKey, data) {
    const text = this.t(messageKey, data);
    if (this.warned.get(key) === text) return;
    this.warned.set(key, text);
    this.env.ui?.notifications?.warn?.(this.escapeForNotice(text));
  }

  // ------------------------------------------------------------ users

  /**
   * Each client records which server user it logged in as, in its own
   * Foundry User document's flags (`flags["vtt-sync"].login = {room,
   * user}`): Foundry lets a non-GM user update only their own User
   * (BaseUser's update permission), so no player can speak for another.
   * A socket message could come from anyone claiming anything: none is
   * trusted. Linking an actor owned by a player makes that player's server
   * user its owner.
   */
  announce() {
    const me = this.game.user;
    if (!this.client?.user || !me) return;
    const login = { room: this.room, user: this.client.user };
    const now = me.getFlag?.(MODULE_ID, "login") ?? me.flags?.[MODULE_ID]?.login;
    if (now?.room === login.room && now?.user === login.user) return;
    Promise.resolve(me.setFlag?.(MODULE_ID, "login", login)).catch((err) => this.report(err));
  }

  /** A User document changed: a player's login may be known now. */
  onUpdateUser(user, changed) {
    if (changed?.flags?.[MODULE_ID] === undefined && changed?.[`flags.${MODULE_ID}`] === undefined) return;
    this.onUserMap();
  }

  /** The server user a Foundry user logged in as in this room, from that
   * user's own flags, if the room has such a user of the same kind (a
   * player cannot stand for the GM). */
  loginOf(fu) {
    const login = fu?.getFlag?.(MODULE_ID, "login") ?? fu?.flags?.[MODULE_ID]?.login;
    if (!login || login.room !== this.room) return null;
    const u = this.client?.state?.users?.[login.user];
    if (!u || (u.role === "gm") !== Boolean(fu.isGM)) return null;
    return login.user;
  }

  /** The server user owning an actor: the server user of a player owning
   * it; null when no player owns it; undefined when a player owns it but
   * has not connected yet (the server's owner is then left alone). */
  ownerOf(actor) {
    const players = this.game.users.filter((u) => !u.isGM && actor.testUserPermission?.(u, "OWNER"));
    if (!players.length) return null;
    for (const u of players) {
      const user = this.loginOf(u);
      if (user) return user;
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

  /** The GM's per-actor "don't sync" switch: the actor stays linked (its
   * turns still count in a room combat) but its sheet is left alone: no
   * values or conditions written, no sheet edits sent or removed. */
  isPaused(actor) {
    return Boolean(actor?.flags?.[MODULE_ID]?.noSync);
  }

  async setPaused(actor, paused) {
    await actor.update({ [`flags.${MODULE_ID}.noSync`]: Boolean(paused) }, { [TAG]: true });
    if (!paused && this.isAutomation()) {
      await this.enqueue(() => this.pushSheet(actor));
      this.scheduleSync();
    }
    this.ui?.refresh();
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
      for (const c of /** @type {any} */ (combat).combatants ?? []) if (c.actor?.isToken) add(c.actor);
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
      if (this.isPaused(actor)) continue;
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
    this.ui?.refresh();
    if (this.isAutomation()) this.enqueue(() => this.pushSheet(actor));
  }

  async pushSheet(actor) {
    if (this.isPaused(actor)) return;
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
    if (!id || this.isPaused(actor)) return;
    const edits = this.adapter().edits(actor, changed, this.settingsGetter());
    if (!Object.keys(edits).length) return;
    if (!this.client?.connected) {
      this.notify("warn", "EditOffline", { name: actor.name, ...this.labels(actor) });
      return;
    }
    if (this.client.role !== "gm") {
      this.notify("info", "EditByPlayer", { name: actor.name, ...this.labels(actor) });
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
      // pf1 (and other systems) have no PE/PP: without maxima a character
      // could never stabilise nor continue the fight. The GM confirms (or
      // edits) the proposed ones; they go to the actor's flags first.
      const missing = this.adapter().missingMaxima?.(actor, this.settingsGetter()) ?? {};
      if (Object.keys(missing).length) {
        const chosen = await this.askMaxima(actor, missing);
        if (!chosen) return null; // the GM cancelled
        const flags = {};
        for (const [k, v] of Object.entries(chosen)) flags[`flags.${MODULE_ID}.${k}`] = v;
        await actor.update(flags, { [TAG]: true });
      }
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

  /** Ask the GM for the maxima the system lacks (the dialog is ui.mjs's;
   * without a UI, as in the tests, the proposal is taken). Resolves with
   * {pe_max?, pp_max?} or null when cancelled. */
  async askMaxima(actor, proposal) {
    if (this.ui?.askMaxima) return this.ui.askMaxima(actor, proposal, this.labels(actor));
    return proposal;
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
    // @ts-expect-error the module's own option key (as above), passed to updateWorldTime
    return this.game.settings.set("core", "time", value, { [TAG]: true }); // v12: what GameTime#advance does
  }

  /** The server's clock moved (an end_turn ending a round, an advance, an
   * undo): Foundry's world time follows it. */
  async syncClock() {
    const state = this.client?.state;
    if (!state) return;
    const offset = await this.clockOffset();
    if (this.clockPending || this.clockInflight) return; // Foundry is ahead on purpose: it is being sent
    if (state.clock === this.lastClock) return;
    this.lastClock = state.clock;
    const target = state.clock + offset;
    if (this.game.time.worldTime !== target) await this.setWorldTime(target);
  }

  /**
   * Someone changed Foundry's world time (not the module: its writes are
   * tagged, and an echo is recognised by its value). Forward, it is held
   * and sent as one `advance_clock` (calendar modules write every few
   * seconds: one command per CLOCK_BATCH_SECONDS of world time, or
   * CLOCK_WINDOW_MS after the first held second, or before any other
   * command of the module, so nothing is lost and the order is kept);
   * backward is refused and undone (the server's time only moves on). A
   * system's own advance at the end of a room combat (sfrpg's
   * CombatSFRPG#delete calls game.time.advance(roundTime)) is dropped: the
   * server's rounds are the combat's time.
   */
  onWorldTime(worldTime, options) {
    if (options?.[TAG]) return;
    if (!this.isAutomation()) return;
    const saved = this.setting("clock") || {};
    if (saved.room === this.room && Number.isFinite(saved.offset)) {
      this.noteWorldTime(worldTime, saved.offset);
    } else {
      this.enqueue(async () => this.noteWorldTime(worldTime, await this.clockOffset()));
    }
  }

  /** The server clock that Foundry's time stands for now: the server's,
   * plus what is on its way, plus what is held. */
  expectedClock() {
    return this.client.state.clock + this.clockInflight + (this.clockPending?.seconds ?? 0);
  }

  noteWorldTime(worldTime, offset) {
    const wanted = Math.floor(worldTime - offset);
    const expected = this.expectedClock();
    if (wanted === expected) return; // our own echo, or less than a second
    const p = this.clockPending;
    if (wanted < expected && !(p && wanted >= p.base)) {
      this.notify("warn", "Rewind", { seconds: expected - wanted });
      this.enqueue(() => this.resyncClock());
      return;
    }
    const d = wanted - expected;
    if (d > 0 && this.isCombatEndAdvance(d, Date.now())) {
      this.enqueue(() => this.resyncClock());
      return;
    }
    const pending = p ?? { room: this.room, base: this.client.state.clock + this.clockInflight, seconds: 0, parts: [] };
    pending.seconds = wanted - pending.base;
    pending.parts.push({ d, at: Date.now() });
    this.clockPending = pending.seconds > 0 ? pending : null;
    this.saveClockPending();
    if (!this.clockPending) return;
    if (pending.seconds >= this.clockBatchSeconds) this.flushClock();
    else if (!this.clockTimer) this.clockTimer = setTimeout(() => this.flushClock(), this.clockWindowMs);
  }

  /** Held advances are remembered in this browser, so that a tab closed
   * before they were sent sends them when the GM is back. */
  saveClockPending() {
    const store = this.env.localStorage;
    if (!store) return;
    try {
      const p = this.clockPending;
      if (p) store.setItem(PENDING_CLOCK_KEY, JSON.stringify({ room: p.room, base: p.base, seconds: p.seconds }));
      else store.removeItem(PENDING_CLOCK_KEY);
    } catch {
      /* storage full or refused: the advance is only held in memory */
    }
  }

  /** A GM's session starts: advances held when the last tab closed are
   * sent now (the same ids: a copy from another tab is refused). */
  restoreClockPending() {
    const store = this.env.localStorage;
    if (!store || this.clockPending) return;
    let saved = null;
    try {
      saved = JSON.parse(store.getItem(PENDING_CLOCK_KEY) || "null");
    } catch {
      saved = null;
    }
    if (!saved || saved.room !== this.room || saved.base !== this.client.state.clock || !(saved.seconds > 0)) {
      store.removeItem?.(PENDING_CLOCK_KEY);
      return;
    }
    this.clockPending = { ...saved, parts: [] };
    this.flushClock();
  }

  /** Send the held advance now (in the queue). */
  flushClock() {
    clearTimeout(this.clockTimer);
    this.clockTimer = null;
    const p = this.takeClockPending();
    if (p) this.enqueue(() => this.sendClock(p));
  }

  takeClockPending() {
    clearTimeout(this.clockTimer);
    this.clockTimer = null;
    const p = this.clockPending;
    this.clockPending = null;
    this.saveClockPending();
    if (p) this.clockInflight += p.seconds;
    return p;
  }

  async sendClock(p) {
    const target = p.base + p.seconds;
    try {
      if (!this.client) return;
      await this.client.command(
        "advance_clock",
        { seconds: p.seconds, from: p.base },
        { id: clockId(p.base, target, this.client.version) },
      );
    } catch (err) {
      const clock = this.client?.state?.clock;
      if (err.code === "conflict" && clock >= target) return; // another tab sent it (or more)
      if (err.code === "conflict") this.notify("warn", "ClockCollision");
      else this.report(Object.assign(err, { op: "advance_clock" }));
    } finally {
      this.clockInflight -= p.seconds;
      this.lastClock = null;
    }
    await this.syncClock();
  }

  /** Foundry's time back to the server's (a refused rewind, a dropped advance). */
  async resyncClock() {
    this.lastClock = null;
    await this.syncClock();
  }

  /** Is an advance of `d` seconds the one a system makes when a room
   * combat ends (sfrpg: one round, right after its deletion)? */
  isCombatEndAdvance(d, now) {
    const round = Number(this.env.CONFIG?.time?.roundTime) || 0;
    if (!round || d !== round) return false;
    const i = this.endedCombats.findIndex((at) => now - at <= COMBAT_END_ADVANCE_MS);
    if (i < 0) return false;
    this.endedCombats.splice(i, 1);
    return true;
  }

  /** A room combat was deleted: a system's end-of-combat advance that
   * arrived just before (held, not yet sent) is dropped; one that arrives
   * just after will be. */
  noteCombatEnded(now) {
    const round = Number(this.env.CONFIG?.time?.roundTime) || 0;
    const p = this.clockPending;
    const i = p ? p.parts.findIndex((x) => x.d === round && now - x.at <= COMBAT_END_ADVANCE_MS) : -1;
    if (round && i >= 0) {
      p.parts.splice(i, 1);
      p.seconds -= round;
      if (p.seconds <= 0) {
        this.clockPending = null;
        clearTimeout(this.clockTimer);
        this.clockTimer = null;
      }
      this.saveClockPending();
      this.enqueue(() => this.resyncClock());
      return;
    }
    this.endedCombats.push(now);
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
    // Added beside the update's other keys, never replacing them: a system's
    // start (sfrpg's CombatSFRPG#startCombat) passes dotted `flags.sfrpg.*`
    // keys, which a new `flags` object would override when Foundry expands
    // the update.
    if (data.flags && typeof data.flags === "object") {
      data.flags[MODULE_ID] = { ...(data.flags[MODULE_ID] || {}), room: this.room };
    } else {
      data[`flags.${MODULE_ID}.room`] = this.room;
    }
  }

  /** Is this update about to make (or keep) the combat the room's? */
  willBeLinked(combat, changed) {
    if (this.isLinked(combat)) return true;
    const f = changed?.flags?.[MODULE_ID] ?? {};
    return Boolean(this.room) && (f.room ?? changed?.[`flags.${MODULE_ID}.room`]) === this.room;
  }

  /** Foundry's own time advance of an update to a room's combat, set to 0.
   * Every path passes here: core's next/previous turn and round (their
   * combatTurn/combatRound hooks too) and a system's own (sfrpg's
   * CombatSFRPG updates with `advanceTime` and fires none of those hooks).
   * v12 passes `advanceTime` and `worldTime: {delta}`, v13 `worldTime`. */
  zeroUpdateTime(options) {
    if (!options || typeof options !== "object") return;
    if ("advanceTime" in options) options.advanceTime = 0;
    if (options.worldTime && typeof options.worldTime === "object") options.worldTime.delta = 0;
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
    if (combat.started) this.noteCombatEnded(Date.now());
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
    if (this.willBeLinked(combat, changed)) this.zeroUpdateTime(options);
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
    if (!turns.length) return;
    const step = undoStep(this.client.state?.affordances);
    if (!step.ok) {
      this.notify("warn", "BackNotLast");
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
    if (!turns) {
      this.notify("warn", "BackNotLast");
      await this.restoreTurn(combat, from);
      return;
    }
    // One undo per turn to un-end, each one checked against what the
    // server says undo reverts now (its affordances, fresh after each patch).
    for (let i = 0; i < turns.length; i++) {
      const step = undoStep(this.client.state?.affordances);
      if (!step.ok) {
        this.notify("warn", "BackNotLast");
        await this.restoreTurn(combat, from);
        return;
      }
      const v = this.client.version;
      try {
        await this.command("undo", {}, { expect: v, id: `undo:${step.v}@${v}` });
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
