// The vtt-sync Foundry module: one client (this user's connection to the
// server's room) and the jobs around it, each in its own file:
//   settings.mjs    the settings, the menu, this user's token
//   connection.mjs  the connection, its status and notices, the connection test
//   tracker.mjs     a room combat: its start, order (tracker edits) and end
//   turns.mjs       its turns and rounds, forward and back
//   clock.mjs       world time, counted once (Foundry's and the server's)
//   sheets.mjs      actors: links, the server's values on sheets, sheet edits, actions
//   chat.mjs        rule events as chat messages
//   users.mjs       logins, owners, which client sends automation
// This file holds what they share: the client, the work queue, the
// notifications and the API.
//
// Written against injected globals (`env`: Hooks, game, ui, CONFIG...) so
// that node --test runs it with a stand-in of Foundry against a real server
// (foundry/test/). In Foundry, main.mjs passes `globalThis`.
//
// Who does what:
// - Every client connects with its own user's token (a player's actions go
//   with the player's token).
// - One GM's client sends automation (users.mjs: the first active GM, in
//   Foundry's order, that the server welcomed as a GM): turns, time, tracker
//   edits, and the writes that show the server's values on the sheets. Its
//   commands carry ids derived from the Foundry event, so a second tab of
//   the same GM, or a hook fired twice, applies once. With no such client,
//   the users who move a turn are told, and the GM who comes back sends
//   what was missed.
// - The client that makes an edit (a sheet's HP, a tracker step back) checks
//   it before Foundry applies it (pre-hooks run there only).

import { Chat } from "./chat.mjs";
import { Clock } from "./clock.mjs";
import { asClientError } from "./errors.mjs";
import { Connection, toWsUrl } from "./connection.mjs";
import { escapeHtml } from "./html.mjs";
import { MODULE_ID, TAG } from "./names.mjs";
import { Settings } from "./settings.mjs";
import { Sheets } from "./sheets.mjs";
import { Tracker } from "./tracker.mjs";
import { Turns } from "./turns.mjs";
import { Users } from "./users.mjs";

export { MODULE_ID, TAG, toWsUrl };

/** Errors kept for inspection (api.errors in a console); older ones are dropped. */
export const MAX_ERRORS = 50;

/** @typedef {import("./ui.mjs").Ui} Ui */
/** @typedef {"info" | "warn" | "error"} Level */
/** Listeners of the API's on(): "state" (state), "patch" (patch), "status" (status).
 * @typedef {(...args: unknown[]) => void} Listener */
/**
 * @typedef {object} ModuleOptions
 * @property {((mod: VttSyncModule) => Ui) | null} [createUi] builds the DOM side (ui.mjs); none in tests
 * @property {number} [clockWindowMs] how long a small world-time advance is held
 * @property {number} [clockBatchSeconds] the world seconds sent at once
 */

export class VttSyncModule {
  /**
   * @param {VttSyncEnv} env  Foundry's globals: Hooks, game, ui, CONFIG, Actor, WebSocket
   * @param {VttSync.ClientClass} Client the VttSyncClient class (client_stub/web/vtt-sync-client.js)
   * @param {ModuleOptions} [opts]
   */
  constructor(env, Client, { createUi = null, clockWindowMs = undefined, clockBatchSeconds = undefined } = {}) {
    this.env = env;
    this.Client = Client;
    /** @type {VttSync.Client | null} this user's connection to the room */
    this.client = null;
    /** @type {string} off, or the client's status */
    this.status = "off";
    /** @type {Promise<unknown>} */
    this.queue = Promise.resolve();
    this.syncScheduled = false;
    /** @type {Map<string, string>} key -> message shown, so a state is reported once */
    this.warned = new Map();
    /** @type {unknown[]} */
    this.errors = [];
    /** @type {Map<string, Set<Listener>>} */
    this.apiListeners = new Map();
    /** @type {Readonly<ReturnType<VttSyncModule["makeApi"]>> | null} */
    this._api = null;
    this.settings = new Settings(this);
    this.connection = new Connection(this);
    this.clock = new Clock(this, { windowMs: clockWindowMs, batchSeconds: clockBatchSeconds });
    this.tracker = new Tracker(this);
    this.turns = new Turns(this);
    this.sheets = new Sheets(this);
    this.users = new Users(this);
    this.chat = new Chat(this);
    this.ui = createUi ? createUi(this) : null;
  }

  get game() {
    return this.env.game;
  }

  /** The world's room id ("" when none is set). */
  get room() {
    return this.settings.room;
  }

  // ------------------------------------------------------------ API

  /**
   * The small API other modules use (README, "API"): game.modules.get(
   * "vtt-sync").api, also passed to the `vtt-sync.ready` hook.
   */
  api() {
    this._api ??= Object.freeze(this.makeApi());
    return this._api;
  }

  makeApi() {
    const mod = this;
    return {
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
      /** The server character id of an actor (linked in this room), or null.
       * @param {Actor.Implementation} actor */
      charId: (actor) => mod.sheets.charOf(actor),
      /** The server's character of an actor, or null. @param {Actor.Implementation} actor */
      character: (actor) => {
        const id = mod.sheets.charOf(actor);
        return id ? (mod.client?.state?.characters?.[id] ?? null) : null;
      },
      /** A player's action (first_aid, stabilize...), with this user's token.
       * @param {Actor.Implementation} actor @param {string} op @param {Record<string, unknown>} [args] */
      act: (actor, op, args = {}) => mod.sheets.act(actor, op, args),
      /** @param {Actor.Implementation} actor */
      link: (actor) => mod.sheets.link(actor),
      /** @param {Actor.Implementation} actor */
      unlink: (actor) => mod.sheets.unlink(actor),
      /** @param {Actor.Implementation} actor @param {boolean} synced */
      setSynced: (actor, synced) => mod.sheets.setPaused(actor, !synced),
      /** The settings' connection test: {code, detail?, role?, user?}.
       * @param {import("./connection.mjs").TestValues} [values] */
      testConnection: (values) => mod.connection.test(values),
      /** Subscribe to "state" (state), "patch" (patch), "status" (status);
       * returns the function that unsubscribes.
       * @param {string} type @param {Listener} fn */
      on: (type, fn) => {
        const set = mod.apiListeners.get(type) ?? new Set();
        mod.apiListeners.set(type, set);
        set.add(fn);
        return () => set.delete(fn);
      },
    };
  }

  /** @param {string} type @param {unknown[]} args */
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
    H.once("init", () => this.settings.register());
    H.once("ready", () => this.onReady());
    this.tracker.register(H);
    this.turns.register(H);
    this.clock.register(H);
    this.sheets.register(H);
    this.users.register(H);
    this.ui?.register(H);
    return this;
  }

  onReady() {
    this.turns.ready();
    this.ui?.ready();
    this.settings.migrating = true;
    this.settings
      .migrateToken()
      .catch((err) => this.report(err))
      .then(() => {
        this.settings.migrating = false;
        this.connect();
      });
  }

  /** (Re)connect with the settings as they are now. */
  connect() {
    return this.connection.connect();
  }

  // ------------------------------------------------------------ automation

  /** Is this client the one that sends automation? (users.mjs) */
  isAutomation() {
    return this.users.isSelf();
  }

  /** This client now sends automation: bring everything in step. The
   * world time held in this browser is sent, then the turns the tracker
   * passed while no client sent automation (the server's clock moves with
   * the rounds they end), then the rest of Foundry's world time that moved
   * meanwhile; then Foundry's time follows the server's, then the sheets. */
  becomeAutomation() {
    this.users.was = true;
    this.clock.restore();
    this.enqueue(async () => {
      let missed = 0;
      for (const combat of this.tracker.combats()) {
        if (this.tracker.isLinked(combat) && combat.started) missed += await this.turns.catchUp(combat);
      }
      if (missed) this.notify("warn", "CaughtUp", { turns: missed });
      const seconds = await this.clock.catchUp();
      if (seconds) this.notify("warn", "CaughtUpTime", { seconds });
    });
    this.scheduleSync();
    this.enqueue(async () => {
      for (const actor of this.sheets.linkedActors()) await this.sheets.push(actor);
    });
  }

  /** The clock, then the sheets, brought to the server's state (once per burst of patches). */
  scheduleSync() {
    if (this.syncScheduled) return;
    this.syncScheduled = true;
    this.enqueue(async () => {
      this.syncScheduled = false;
      if (!this.isAutomation()) return;
      await this.clock.sync();
      await this.sheets.sync();
    });
  }

  // ------------------------------------------------------------ work queue

  /** Automation runs one task at a time, in order: a turn's end_turn, the
   * clock mirrored after it, the sheets written after that. */
  /** @template T @param {() => T | Promise<T>} fn @returns {Promise<T | undefined>} */
  enqueue(fn) {
    /** @type {Promise<T | undefined>} */
    const run = this.queue.then(fn).catch((err) => {
      this.report(err);
      return undefined;
    });
    this.queue = run;
    return run;
  }

  /** Resolves once the work queued so far is done (tests, and callers that
   * must see the effect of an automation step). */
  idle() {
    return this.queue;
  }

  /** What is waiting on a timer (a tracker edit's burst, held world time):
   * the tests settle once nothing is. */
  pending() {
    return {
      orders: this.tracker.orderTimers.size,
      sync: this.syncScheduled,
      clockHeld: this.clock.timer !== null,
      clockWindowMs: this.clock.windowMs,
    };
  }

  /** An error, kept and told: a refused command with the server's
   * message, anything else as an internal error. @param {unknown} err */
  report(err) {
    this.errors.push(err);
    if (this.errors.length > MAX_ERRORS) this.errors.shift();
    const e = asClientError(err);
    if (e.name === "CommandError") {
      this.notify("warn", "Refused", { op: e.op || "", message: e.serverMessage || e.message });
    } else if (e.name === "ConnectionFailed") {
      // the status already told the user
    } else {
      console.error("vtt-sync:", err);
      this.notify("error", "Internal", { message: e.message || String(err) });
    }
  }

  /** A command of the module's automation; world time held so far is sent
   * first, so the server sees time and turns in Foundry's order. */
  /** @param {string} op @param {object} [args] @param {VttSync.CommandOptions} [opts] @returns {Promise<VttSync.Ack>} */
  async command(op, args = {}, opts = {}) {
    if (!this.client) throw new Error("vtt-sync is not connected");
    const held = this.clock.take();
    if (held) await this.clock.send(held);
    const client = this.client;
    if (!client) throw new Error("vtt-sync is not connected");
    return client.command(op, args, opts).catch((/** @type {unknown} */ err) => {
      throw Object.assign(asClientError(err), { op });
    });
  }

  // ------------------------------------------------------------ notifications

  /** A text of lang/*.json (VTTSYNC.<key>) with its values.
   * @param {string} key @param {Record<string, unknown>} [data] */
  t(key, data) {
    const i18n = this.game.i18n;
    const values = Object.fromEntries(Object.entries({ ...this.labels(), ...(data || {}) }).map(([k, v]) => [k, String(v)]));
    return i18n ? i18n.format(`VTTSYNC.${key}`, values) : key;
  }

  /** The names of PV, PE and PP as this system's players know them
   * (lang/*.json, VTTSYNC.Label.<system>): sfrpg's HP/SP/RP, pf1's HP (or
   * Wounds and Vigor) and the module's names for the rest. */
  /** @param {Actor.Implementation | null} [actor] */
  labels(actor = null) {
    const adapter = this.sheets.adapter();
    let key = adapter.id;
    if (adapter.id === "pf1" && actor && adapter.holdsPe?.(actor, this.settings.getter())) key = "pf1wv";
    const i18n = this.game.i18n;
    /** @param {string} name */
    const one = (name) => {
      const k = `VTTSYNC.Label.${key}.${name}`;
      const v = i18n?.localize(k) ?? k;
      return v === k ? (i18n?.localize(`VTTSYNC.Label.generic.${name}`) ?? name) : v;
    };
    return { pv: one("PV"), pe: one("PE"), pp: one("PP") };
  }

  /** Notifications are HTML (v12 renders the message as is; v13 cleans it
   * and renders it): the text, which carries server values, is escaped. */
  /** @param {string} text */
  escapeForNotice(text) {
    return escapeHtml(text);
  }

  /** @param {Level} level @param {string} key @param {Record<string, unknown>} [data] */
  notify(level, key, data) {
    const text = this.t(key, data);
    this.env.ui?.notifications?.[level]?.(this.escapeForNotice(text));
    return text;
  }

  /** Report a state once; the same key again is silent until it is cleared. */
  /** @param {string} key @param {string} messageKey @param {Record<string, unknown>} [data] */
  warnOnce(key, messageKey, data) {
    const text = this.t(messageKey, data);
    if (this.warned.get(key) === text) return;
    this.warned.set(key, text);
    this.env.ui?.notifications?.warn?.(this.escapeForNotice(text));
  }
}
