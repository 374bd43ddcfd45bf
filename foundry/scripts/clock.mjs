// World time: Foundry's game.time and the server's clock, counted once.
// The server's clock is the truth (its rounds, rests and advances move it);
// the automation client mirrors it into game.time, sends a GM's world-time
// advance as `advance_clock`, and keeps Foundry's own combat time at 0 in
// the combats the server counts.

import { clockId } from "./combat.mjs";
import { MODULE_ID, TAG } from "./names.mjs";

/** @typedef {import("./module.mjs").VttSyncModule} VttSyncModule */

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
    this.pending = null; // {room, base, seconds}: world time held, not sent yet
    this.inflight = 0; // seconds sent, not acknowledged yet
    this.timer = null;
  }

  get game() {
    return this.mod.env.game;
  }

  /** @param {typeof Hooks} H */
  register(H) {
    H.on("combatTurn", (combat, data, options) => this.zeroCombatTime(combat, options));
    H.on("combatRound", (combat, data, options) => this.zeroCombatTime(combat, options));
    H.on("updateWorldTime", (worldTime, dt, options) => this.onWorldTime(worldTime, options));
    H.on("onBeforeCombatEnd", (combat) => this.onSystemCombatEnd(combat)); // sfrpg's own hook
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
  onSystemCombatEnd(combat) {
    if (!this.mod.turns.serverHolds(combat)) return;
    const time = this.game.time;
    const own = Object.prototype.hasOwnProperty.call(time, "advance");
    const advance = time.advance;
    const restore = () => {
      if (own) time.advance = advance;
      else delete time.advance;
    };
    time.advance = async () => {
      restore();
      return time.worldTime;
    };
    queueMicrotask(restore); // after this synchronous run: sfrpg's call, if any, was made
  }

  /** The world time of the server's second 0; set once per room, on the
   * first sync, so Foundry's calendar keeps its date. */
  async offset() {
    const mod = this.mod;
    const saved = mod.settings.get("clock") || {};
    if (saved.room === mod.room && Number.isFinite(saved.offset)) return saved.offset;
    const offset = Math.floor(this.game.time.worldTime) - mod.client.state.clock;
    await this.game.settings.set(MODULE_ID, "clock", { room: mod.room, offset });
    return offset;
  }

  /** Absolute, so two GM tabs writing the same value write it once. */
  async setWorldTime(value) {
    const time = this.game.time;
    if (typeof time.set === "function") return time.set(value, { [TAG]: true }); // v13
    // @ts-expect-error the module's own option key, passed to updateWorldTime
    return this.game.settings.set("core", "time", value, { [TAG]: true }); // v12: what GameTime#advance does
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
    if (this.game.time.worldTime !== target) await this.setWorldTime(target);
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
  onWorldTime(worldTime, options) {
    const mod = this.mod;
    if (options?.[TAG]) return;
    if (!mod.isAutomation()) return;
    const saved = mod.settings.get("clock") || {};
    if (saved.room === mod.room && Number.isFinite(saved.offset)) {
      this.note(worldTime, saved.offset);
    } else {
      mod.enqueue(async () => this.note(worldTime, await this.offset()));
    }
  }

  /** The server clock that Foundry's time stands for now: the server's,
   * plus what is on its way, plus what is held. */
  expected() {
    return this.mod.client.state.clock + this.inflight + (this.pending?.seconds ?? 0);
  }

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
    const pending = p ?? { room: mod.room, base: mod.client.state.clock + this.inflight, seconds: 0 };
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
    if (!saved || saved.room !== mod.room || saved.base !== mod.client.state.clock || !(saved.seconds > 0)) {
      store.removeItem?.(PENDING_CLOCK_KEY);
      return;
    }
    this.pending = { ...saved };
    this.flush();
  }

  /** Send the held advance now (in the queue). */
  flush() {
    clearTimeout(this.timer);
    this.timer = null;
    const p = this.take();
    if (p) this.mod.enqueue(() => this.send(p));
  }

  /** The held advance, now counted as on its way (or null). */
  take() {
    clearTimeout(this.timer);
    this.timer = null;
    const p = this.pending;
    this.pending = null;
    this.save();
    if (p) this.inflight += p.seconds;
    return p;
  }

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
      const clock = mod.client?.state?.clock;
      if (err.code === "conflict" && clock >= target) return; // another tab sent it (or more)
      if (err.code === "conflict") mod.notify("warn", "ClockCollision");
      else mod.report(Object.assign(err, { op: "advance_clock" }));
    } finally {
      this.inflight -= p.seconds;
      this.lastClock = null;
    }
    await this.sync();
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
  zeroUpdateTime(options) {
    if (!options || typeof options !== "object") return;
    if ("advanceTime" in options) options.advanceTime = 0;
    if (options.worldTime && typeof options.worldTime === "object") options.worldTime.delta = 0;
  }

  /** Time is counted once: the server's end_turn advances the clock by a
   * round and the module mirrors it, so Foundry's own advance is set to 0
   * (v12 `advanceTime`, v13 `worldTime.delta`). */
  zeroCombatTime(combat, options) {
    if (!options || !this.mod.turns.serverHolds(combat)) return;
    if (options.worldTime && typeof options.worldTime === "object") options.worldTime.delta = 0;
    if ("advanceTime" in options || !options.worldTime) options.advanceTime = 0;
  }
}
