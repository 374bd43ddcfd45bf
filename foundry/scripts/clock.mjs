// World time: Foundry's game.time and the server's clock, counted once.
// The server's clock is the truth (its rounds, rests and advances move it);
// the automation client mirrors it into game.time, sends a GM's world-time
// advance as `advance_clock`, and keeps Foundry's own combat time at 0 in
// the combats the server counts.

import { clockId } from "./combat.mjs";
import { asClientError } from "./errors.mjs";
import { MODULE_ID, TAG } from "./names.mjs";

/** @typedef {import("./module.mjs").VttSyncModule} VttSyncModule */
/** World time held, not sent yet: from the server clock `base`, `seconds` more.
 * @typedef {{room: string, base: number, seconds: number}} Held */
/** The time options of a combat update (v12 `advanceTime` and `worldTime`,
 * v13 `worldTime`): foundry-vtt-types v12.331.5 client/hooks.d.mts
 * (combatTurn, combatRound) and client/data/documents/combat.d.mts
 * (Combat.Database.Update).
 * @typedef {{advanceTime?: number, worldTime?: {delta?: number}}} CombatTimeOptions */

/** Small world-time advances (a calendar module's real-time clock writes
 * every few seconds) are held and sent as one advance_clock once they add up
 * to this many world seconds... */
export const CLOCK_BATCH_SECONDS = 60;

/** ...or this long after the first one (or before any other command). */
export const CLOCK_WINDOW_MS = 60_000;

/** Where a GM's browser keeps an advance not sent yet (localStorage). */
export const PENDING_CLOCK_KEY = "vtt-sync.pendingClock";

export class Clock {
  /**
   * @param {VttSyncModule} mod
   * @param {{windowMs?: number, batchSeconds?: number}} [opts]
   */
  constructor(mod, { windowMs = CLOCK_WINDOW_MS, batchSeconds = CLOCK_BATCH_SECONDS } = {}) {
    this.mod = mod;
    this.windowMs = windowMs;
    this.batchSeconds = batchSeconds;
    /** @type {number | null} the server clock last mirrored into game.time */
    this.lastClock = null;
    /** @type {Held | null} world time held, not sent yet */
    this.pending = null;
    this.inflight = 0; // seconds sent, not acknowledged yet
    /** @type {ReturnType<typeof setTimeout> | null} */
    this.timer = null;
  }

  get game() {
    return this.mod.env.game;
  }

  /** @param {typeof Hooks} H */
  register(H) {
    H.on("combatTurn", (combat, data, options) => this.zeroCombatTime(combat, options));
    H.on("combatRound", (combat, data, options) => this.zeroCombatTime(combat, options));
    /** @type {FoundryV13.UpdateWorldTime} */
    const onWorldTime = (worldTime, dt, options) => this.onWorldTime(worldTime, options);
    H.on("updateWorldTime", onWorldTime);
    /** sfrpg's own hook (src/module/combat/combat.js). @param {Combat.Implementation} combat */
    const onBeforeCombatEnd = (combat) => this.onSystemCombatEnd(combat);
    H.on("onBeforeCombatEnd", onBeforeCombatEnd);
  }

  /**
   * sfrpg's CombatSFRPG#delete fires its `onBeforeCombatEnd` hook, starts
   * core's deletion without awaiting it, then calls
   * `game.time.advance(CONFIG.time.roundTime)`, in one synchronous run
   * (foundryvtt-starfinder src/module/combat/combat.js): a round of world
   * time for the combat's end, which the server's rounds have counted. On
   * the client ending a combat whose time the server holds, that one call
   * (the next game.time.advance before this run ends) advances nothing.
   * Any other advance, just before or just after, is counted: no time
   * window guesses which one is the system's.
   */
  /** @param {Combat.Implementation} combat */
  onSystemCombatEnd(combat) {
    const time = this.game.time;
    if (!time || !this.mod.tracker.serverHolds(combat)) return;
    const own = Object.getOwnPropertyDescriptor(time, "advance");
    const restore = () => {
      if (own) Object.defineProperty(time, "advance", own);
      else Reflect.deleteProperty(time, "advance");
    };
    Object.defineProperty(time, "advance", {
      configurable: true,
      writable: true,
      value: async () => {
        restore();
        return time.worldTime;
      },
    });
    queueMicrotask(restore); // after this synchronous run: sfrpg's call, if any, was made
  }

  /** The world time of the server's second 0; set once per room, on the
   * first sync, so Foundry's calendar keeps its date. */
  async offset() {
    const mod = this.mod;
    const saved = this.saved();
    if (saved !== null) return saved;
    const offset = Math.floor(this.worldTime()) - this.serverClock();
    await this.game.settings?.set(MODULE_ID, "clock", { room: mod.room, offset });
    return offset;
  }

  /** Foundry's world time (0 before its setup). */
  worldTime() {
    return this.game.time?.worldTime ?? 0;
  }

  /** The saved offset of this room, or null. */
  saved() {
    const saved = this.mod.settings.get("clock");
    return saved?.room === this.mod.room && typeof saved.offset === "number" && Number.isFinite(saved.offset)
      ? saved.offset
      : null;
  }

  /** The server's clock as this client has it (0 before any state). */
  serverClock() {
    return this.mod.client?.state?.clock ?? 0;
  }

  /** Absolute, so two GM tabs writing the same value write it once.
   * @param {number} value */
  async setWorldTime(value) {
    const time = this.game.time;
    if (typeof time?.set === "function") return time.set(value, { [TAG]: true }); // v13
    return this.game.settings?.set("core", "time", value, { [TAG]: true }); // v12: what GameTime#advance does
  }

  /** The server's clock moved (an end_turn ending a round, an advance, an
   * undo): Foundry's world time follows it. */
  async sync() {
    const state = this.mod.client?.state;
    if (!state) return;
    const offset = await this.offset();
    if (this.pending || this.inflight) return; // Foundry is ahead on purpose: it is being sent
    if (state.clock === this.lastClock) return;
    this.lastClock = state.clock;
    const target = state.clock + offset;
    if (this.worldTime() !== target) await this.setWorldTime(target);
  }

  /**
   * Someone changed Foundry's world time (not the module: its writes are
   * tagged, and an echo is recognised by its value). Forward, it is held
   * and sent as one `advance_clock` (calendar modules write every few
   * seconds: one command per CLOCK_BATCH_SECONDS of world time, or
   * CLOCK_WINDOW_MS after the first held second, or before any other
   * command of the module, so nothing is lost and the order is kept);
   * backward is refused and undone (the server's time only moves on).
   */
  /** @param {number} worldTime @param {FoundryV13.WorldTimeOptions | undefined} options */
  onWorldTime(worldTime, options) {
    const mod = this.mod;
    if (options?.[TAG]) return;
    if (!mod.isAutomation()) return;
    const saved = this.saved();
    if (saved !== null) {
      this.note(worldTime, saved);
    } else {
      mod.enqueue(async () => this.note(worldTime, await this.offset()));
    }
  }

  /** The server clock that Foundry's time stands for now: the server's,
   * plus what is on its way, plus what is held. */
  expected() {
    return this.serverClock() + this.inflight + (this.pending?.seconds ?? 0);
  }

  /** @param {number} worldTime @param {number} offset */
  note(worldTime, offset) {
    const mod = this.mod;
    const wanted = Math.floor(worldTime - offset);
    const expected = this.expected();
    if (wanted === expected) return; // our own echo, or less than a second
    const p = this.pending;
    if (wanted < expected && !(p && wanted >= p.base)) {
      mod.notify("warn", "Rewind", { seconds: expected - wanted });
      mod.enqueue(() => this.resync());
      return;
    }
    /** @type {Held} */
    const pending = p ?? { room: mod.room, base: this.serverClock() + this.inflight, seconds: 0 };
    pending.seconds = wanted - pending.base;
    this.pending = pending.seconds > 0 ? pending : null;
    this.save();
    if (!this.pending) return;
    if (pending.seconds >= this.batchSeconds) this.flush();
    else if (!this.timer) this.timer = setTimeout(() => this.flush(), this.windowMs);
  }

  /** Held advances are remembered in this browser, so that a tab closed
   * before they were sent sends them when the GM is back. */
  save() {
    const store = this.mod.env.localStorage;
    if (!store) return;
    try {
      const p = this.pending;
      if (p) store.setItem(PENDING_CLOCK_KEY, JSON.stringify({ room: p.room, base: p.base, seconds: p.seconds }));
      else store.removeItem(PENDING_CLOCK_KEY);
    } catch {
      /* storage full or refused: the advance is only held in memory */
    }
  }

  /** A GM's session starts: advances held when the last tab closed are
   * sent now (the same ids: a copy from another tab is refused). */
  restore() {
    const mod = this.mod;
    const store = mod.env.localStorage;
    if (!store || this.pending) return;
    let saved;
    try {
      saved = JSON.parse(store.getItem(PENDING_CLOCK_KEY) || "null");
    } catch {
      saved = null;
    }
    if (!isHeld(saved) || saved.room !== mod.room || saved.base !== this.serverClock() || !(saved.seconds > 0)) {
      store.removeItem?.(PENDING_CLOCK_KEY);
      return;
    }
    this.pending = { ...saved };
    this.flush();
  }

  /** Send the held advance now (in the queue). */
  flush() {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    const p = this.take();
    if (p) this.mod.enqueue(() => this.send(p));
  }

  /** The held advance, now counted as on its way (or null). */
  take() {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    const p = this.pending;
    this.pending = null;
    this.save();
    if (p) this.inflight += p.seconds;
    return p;
  }

  /** @param {Held} p */
  async send(p) {
    const mod = this.mod;
    const target = p.base + p.seconds;
    try {
      if (!mod.client) return;
      await mod.client.command(
        "advance_clock",
        { seconds: p.seconds, from: p.base },
        { id: clockId(p.base, target, mod.client.version) },
      );
    } catch (err) {
      const e = asClientError(err);
      if (e.code === "conflict" && this.serverClock() >= target) return; // another tab sent it (or more)
      if (e.code === "conflict") mod.notify("warn", "ClockCollision");
      else mod.report(Object.assign(e, { op: "advance_clock" }));
    } finally {
      this.inflight -= p.seconds;
      this.lastClock = null;
    }
    await this.sync();
  }

  /**
   * This client starts sending automation: Foundry's world time that moved
   * while no client did (a GM without a valid token advancing it, a combat
   * the server does not hold) is sent now as one advance_clock, so it is
   * counted, not rewound by the next sync. Called after the turns passed
   * meanwhile were sent (their rounds moved the server's clock). Returns the
   * seconds sent. Nothing before this room's offset is known (the first
   * connection sets it from Foundry's time: nothing was missed).
   */
  async catchUp() {
    const saved = this.saved();
    const state = this.mod.client?.state;
    if (saved === null || !state || this.pending) return 0;
    const seconds = Math.floor(this.worldTime() - saved) - this.expected();
    if (seconds < 1) return 0;
    const held = { room: this.mod.room, base: state.clock + this.inflight, seconds };
    this.inflight += seconds;
    await this.send(held);
    return seconds;
  }

  /** Foundry's time back to the server's (a refused rewind, a dropped advance). */
  async resync() {
    this.lastClock = null;
    await this.sync();
  }

  /** Foundry's own time advance of an update to a room's combat, set to 0.
   * Every path passes here: core's next/previous turn and round (their
   * combatTurn/combatRound hooks too) and a system's own (sfrpg's
   * CombatSFRPG updates with `advanceTime` and fires none of those hooks).
   * v12 passes `advanceTime` and `worldTime: {delta}`, v13 `worldTime`. */
  /** @param {CombatTimeOptions | undefined} options */
  zeroUpdateTime(options) {
    if (!options || typeof options !== "object") return;
    if ("advanceTime" in options) options.advanceTime = 0;
    if (options.worldTime && typeof options.worldTime === "object") options.worldTime.delta = 0;
  }

  /** Time is counted once: the server's end_turn advances the clock by a
   * round and the module mirrors it, so Foundry's own advance is set to 0
   * (v12 `advanceTime`, v13 `worldTime.delta`). */
  /** @param {Combat.Implementation} combat @param {CombatTimeOptions | undefined} options */
  zeroCombatTime(combat, options) {
    if (!options || !this.mod.tracker.serverHolds(combat)) return;
    if (options.worldTime && typeof options.worldTime === "object") options.worldTime.delta = 0;
    if ("advanceTime" in options || !options.worldTime) options.advanceTime = 0;
  }
}

/** Is this what save() wrote? @param {unknown} v @returns {v is Held} */
function isHeld(v) {
  return (
    typeof v === "object" &&
    v !== null &&
    "room" in v &&
    typeof v.room === "string" &&
    "base" in v &&
    typeof v.base === "number" &&
    "seconds" in v &&
    typeof v.seconds === "number"
  );
}
