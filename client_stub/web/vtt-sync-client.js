// vtt-sync browser client: a dependency-free ES module speaking the wire protocol v1 (docs/protocol.md)
// over the JSON subprotocol. What a Foundry (or any VTT) module imports:
//
//   import { VttSyncClient } from "./vtt-sync-client.js";
//   const c = new VttSyncClient({ url: "ws://host:8765/", token, room: "r1" });
//   c.on("state", (state, v) => render(state));
//   c.on("event", (event) => log(event));
//   await c.connect();                               // first welcome
//   const ack = await c.command("damage", { char: "c1", amount: 3 });
//
// It keeps a mirror of the room (welcome state + patches in order; a gap in
// versions sends `sync`), reconnects with capped exponential backoff and
// jitter, resumes with `since`, and re-sends the commands still waiting for an
// answer under their original ids (the server deduplicates them). Close codes
// 4400/4401/4403/4404 are final; every other close is retried.

// The protocol's names and numbers; tests/js checks them against the
// project's protocol vectors, which the Python side generates.
export const PROTO = 1;
export const SUBPROTOCOL = "vtt-sync.json.v1";
export const MAX_FRAME = 64 * 1024;
export const MAX_REDIRECTS = 3;

export const CLOSE_CODES = Object.freeze({
  shutdown: 1001,
  policy: 1008,
  too_big: 1009,
  internal: 1011,
  service_restart: 1012,
  too_slow: 1013,
  redirect: 4302,
  misuse: 4400,
  unauthenticated: 4401,
  revoked: 4403,
  room_deleted: 4404,
  hello_timeout: 4408,
  too_many: 4429,
});

export const FINAL_CLOSE_CODES = Object.freeze({
  4400: "protocol misuse",
  4401: "bad token or room",
  4403: "this user was removed or its token rotated",
  4404: "the room was deleted",
});

/** The frames a client sends (optional fields left out when absent). */
export function helloFrame(token, room = null, since = null) {
  const frame = { t: "hello", proto: PROTO, token };
  if (room !== null && room !== undefined) frame.room = room;
  if (since !== null && since !== undefined) frame.since = since;
  return frame;
}

export function cmdFrame(id, op, args = {}, expect = null) {
  const frame = { t: "cmd", id, op, args: args || {} };
  if (expect !== null && expect !== undefined) frame.expect = expect;
  return frame;
}

export function syncFrame(since, id = null) {
  const frame = { t: "sync", since };
  if (id !== null && id !== undefined) frame.id = id;
  return frame;
}

/** The server refused a command: `code` is the protocol's error code (docs/protocol.md, "Refusals"). */
export class CommandError extends Error {
  constructor(code, message, id = null) {
    super(message ? `${code}: ${message}` : code);
    this.name = "CommandError";
    this.code = code;
    this.serverMessage = message || "";
    this.id = id;
  }
}

/** The session ended for good (`closeCode` 4401, 4403, 4404...) or was closed. */
export class ConnectionFailed extends Error {
  constructor(message, closeCode = null) {
    super(closeCode ? `${message} (close ${closeCode})` : message);
    this.name = "ConnectionFailed";
    this.code = closeCode === null ? "closed" : `close_${closeCode}`;
    this.closeCode = closeCode;
  }
}

const clone =
  typeof structuredClone === "function" ? structuredClone : (v) => JSON.parse(JSON.stringify(v));

// Path parts no op may name: `obj["__proto__"] = v` (or `constructor` then
// `prototype`) would reach the prototype every object of the page shares.
// No state has such keys (the server refuses them as ids); a patch that
// names one is refused whole, like the server's own apply_ops does.
export const FORBIDDEN_KEYS = Object.freeze(["__proto__", "constructor", "prototype"]);

/** Apply patch ops (`["set", path, value]`, `["del", path]`) to `state` in place. */
export function applyOps(state, ops) {
  for (const op of ops || []) {
    const [kind, path] = op;
    if (!Array.isArray(path) || path.length === 0) throw new Error("an op needs a path");
    for (const key of path) {
      if (typeof key !== "string" || FORBIDDEN_KEYS.includes(key)) {
        throw new Error(`an op's path may not hold ${JSON.stringify(key)}`);
      }
    }
    let target = state;
    for (const key of path.slice(0, -1)) {
      // own keys only: an inherited one (toString...) is no place in a state
      if (target === null || typeof target !== "object" || !Object.hasOwn(target, key)) {
        throw new Error(`an op's path names no place of the state: ${path.join(".")}`);
      }
      target = target[key];
    }
    if (target === null || typeof target !== "object" || Array.isArray(target)) {
      throw new Error(`an op's path names no map of the state: ${path.join(".")}`);
    }
    const last = path[path.length - 1];
    if (kind === "set") target[last] = clone(op[2]);
    else if (kind === "del") delete target[last];
    else throw new Error(`unknown patch op ${kind}`);
  }
  return state;
}

function randomPrefix() {
  const bytes = new Uint8Array(4);
  globalThis.crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

export class VttSyncClient {
  /**
   * @param {object} opts
   * @param {string} opts.url     ws:// or wss:// URL of the server
   * @param {string} opts.token   the user's secret (sent in the hello only)
   * @param {string|null} [opts.room]  room id (omit for the admin session)
   * @param {boolean} [opts.reconnect]  retry after a non-final close (default true)
   * @param {number} [opts.backoffInitial]  first retry delay, ms (default 200)
   * @param {number} [opts.backoffMax]  longest retry delay, ms (default 10000)
   * @param {number} [opts.backoffFactor]  delay growth per failed attempt (default 2)
   * @param {number} [opts.helloTimeout]  ms to wait for the welcome (default 10000)
   * @param {string|null} [opts.idPrefix]  prefix of command ids (default: random)
   * @param {typeof WebSocket} [opts.WebSocketImpl]  the WebSocket class (default: the global one)
   */
  constructor({
    url,
    token,
    room = null,
    reconnect = true,
    backoffInitial = 200,
    backoffMax = 10000,
    backoffFactor = 2,
    helloTimeout = 10000,
    idPrefix = null,
    WebSocketImpl = globalThis.WebSocket,
  }) {
    this.url = url;
    this.room = room;
    this.reconnect = reconnect;
    this.backoffInitial = backoffInitial;
    this.backoffMax = backoffMax;
    this.backoffFactor = backoffFactor;
    this.helloTimeout = helloTimeout;
    this.state = null;
    this.version = null;
    this.user = null;
    this.role = null;
    this.status = "idle"; // idle, connecting, connected, disconnected, failed, closed
    this.connections = 0;
    this.failure = null;
    /** @type {string} the secret: not enumerable, so it never shows in a dump of the client */
    this._token = undefined;
    Object.defineProperty(this, "_token", {
      value: token,
      enumerable: false,
      writable: false,
      configurable: false,
    });
    this._WS = WebSocketImpl;
    this._prefix = idPrefix || randomPrefix();
    this._counter = 0;
    this._ws = null;
    this._attempt = 0;
    this._timer = null;
    this._helloTimer = null;
    this._closed = false;
    this._pending = new Map(); // id -> {frame, resolve, reject, timer}
    this._parked = []; // acks whose version the mirror has not reached yet
    this._ahead = new Map(); // future patches buffered across a gap
    this._syncSentAt = null;
    this._authMessage = null;
    this._listeners = new Map();
    this._historyWaiters = new Map(); // history() requests by their sync id
    this._settle = null;
    this._settled = new Promise((resolve, reject) => (this._settle = { resolve, reject }));
    this._settled.catch(() => {});
  }

  // --- listeners -----------------------------------------------------------

  /** Subscribe: "patch" (patch), "event" (event, patch), "state" (state, v),
   * "status" (status, detail), "error" (frame, for errors answering no command),
   * "welcome" (frame). Returns a function that unsubscribes. */
  on(type, fn) {
    if (!this._listeners.has(type)) this._listeners.set(type, new Set());
    this._listeners.get(type).add(fn);
    return () => this.off(type, fn);
  }

  off(type, fn) {
    this._listeners.get(type)?.delete(fn);
  }

  _emit(type, ...args) {
    for (const fn of [...(this._listeners.get(type) || [])]) {
      try {
        fn(...args);
      } catch (err) {
        console.error(`vtt-sync ${type} listener failed`, err);
      }
    }
  }

  _setStatus(status, detail = "") {
    this.status = status;
    this._emit("status", status, detail);
  }

  // --- lifecycle -----------------------------------------------------------

  /** Open the session; resolves at the first welcome, rejects on a final close. */
  connect() {
    if (this._closed) return Promise.reject(new ConnectionFailed("client closed"));
    if (!this._ws && this._timer === null && this.status === "idle") this._open();
    return this._settled;
  }

  close() {
    if (this._closed) return;
    this._closed = true;
    clearTimeout(this._timer);
    clearTimeout(this._helloTimer);
    const ws = this._ws;
    this._ws = null;
    if (ws) {
      try {
        ws.close(1000, "client closed");
      } catch {
        /* already closed */
      }
    }
    this._finish(new ConnectionFailed("client closed"));
    this._setStatus("closed");
  }

  get connected() {
    return this.status === "connected";
  }

  _open(target = this.url, hops = 0) {
    this._timer = null;
    if (this._closed) return;
    this._setStatus("connecting", target);
    let ws;
    let redirect = null; // cluster mode: the node serving the room (v1.1)
    try {
      ws = new this._WS(target, [SUBPROTOCOL]);
    } catch (err) {
      this._scheduleReconnect(String(err));
      return;
    }
    this._ws = ws;
    let welcomed = false;
    ws.onopen = () => {
      const since = this.state !== null && this.version !== null ? this.version : null;
      ws.send(JSON.stringify(helloFrame(this._token, this.room, since)));
      this._helloTimer = setTimeout(() => ws.close(4000, "no welcome"), this.helloTimeout);
    };
    ws.onmessage = (msg) => {
      if (ws !== this._ws) return;
      let frame;
      try {
        frame = JSON.parse(msg.data);
      } catch {
        console.warn("vtt-sync: undecodable frame ignored");
        return;
      }
      if (!frame || typeof frame !== "object") return;
      if (frame.t === "welcome") {
        welcomed = true;
        clearTimeout(this._helloTimer);
        this._onWelcome(frame);
      } else if (frame.t === "redirect" && !welcomed && typeof frame.url === "string") {
        redirect = frame.url;
      } else {
        this._handle(frame);
      }
    };
    ws.onerror = () => {}; // a close event always follows
    ws.onclose = (ev) => {
      clearTimeout(this._helloTimer);
      if (ws !== this._ws) return;
      this._ws = null;
      if (this._closed) return;
      if (ev.code in FINAL_CLOSE_CODES) {
        const message = this._authMessage || ev.reason || FINAL_CLOSE_CODES[ev.code];
        this._fail(new ConnectionFailed(message, ev.code));
        return;
      }
      if (redirect !== null) {
        // Another node serves the room: go there at once, same hello
        // (`since` included), at most MAX_REDIRECTS hops in a row; past
        // them, report it and start over from the given URL after a backoff.
        if (hops < MAX_REDIRECTS) {
          this._open(redirect, hops + 1);
          return;
        }
        this._scheduleReconnect(`redirected ${hops + 1} times in a row (last to ${redirect})`);
        return;
      }
      if (welcomed) this._attempt = 0;
      this._scheduleReconnect(`connection closed (${ev.code})`);
    };
  }

  _scheduleReconnect(detail) {
    this._setStatus("disconnected", detail);
    if (!this.reconnect) {
      this._fail(new ConnectionFailed(`disconnected: ${detail}`));
      return;
    }
    const base = Math.min(this.backoffMax, this.backoffInitial * this.backoffFactor ** this._attempt);
    this._attempt += 1;
    const delay = base * (0.5 + Math.random() * 0.5);
    this._timer = setTimeout(() => this._open(), delay);
  }

  /** Reconnect at once (e.g. when the browser comes back online). */
  retryNow() {
    if (this._closed || this._ws || this._timer === null) return;
    clearTimeout(this._timer);
    this._open();
  }

  _fail(err) {
    this.failure = err;
    this._closed = true;
    this._settle.reject(err);
    this._finish(err);
    this._setStatus("failed", err.message);
  }

  _finish(err) {
    for (const w of this._historyWaiters.values()) w.resolve([]);
    this._historyWaiters.clear();
    for (const p of this._pending.values()) {
      clearTimeout(p.timer);
      p.reject(err);
    }
    this._pending.clear();
    for (const [, p] of this._parked) p.reject(err);
    this._parked = [];
  }

  // --- commands ------------------------------------------------------------

  /** Send a command; resolves with the ack once the mirror holds its version,
   * rejects with a CommandError (`code`, `serverMessage`) when refused. */
  command(op, args = {}, { expect = null, id = null, timeout = null } = {}) {
    if (this._closed) return Promise.reject(this.failure || new ConnectionFailed("client closed"));
    this._counter += 1;
    const cid = id || `${this._prefix}-${this._counter}`;
    const frame = cmdFrame(cid, op, args, expect);
    const text = JSON.stringify(frame);
    if (new TextEncoder().encode(text).length > MAX_FRAME) {
      return Promise.reject(new CommandError("frame_too_big", "frame over 64 KiB", cid));
    }
    return new Promise((resolve, reject) => {
      const pending = { frame, resolve, reject, timer: null, sent: false };
      if (timeout) {
        pending.timer = setTimeout(() => {
          this._pending.delete(cid);
          reject(new CommandError("timeout", `no answer within ${timeout} ms`, cid));
        }, timeout);
      }
      this._pending.set(cid, pending);
      if (this.connected) pending.sent = this._send(frame);
    });
  }

  /** Take back a command still waiting that never left this client (sent
   * while the server was unreachable): it rejects with code "expired" and
   * is never sent, so the server certainly did not apply it. Returns false
   * (and keeps waiting) for a command already sent once: the server may
   * have applied it, and its retry after the reconnection tells. */
  withdraw(id) {
    const p = this._pending.get(id);
    if (!p || p.sent) return false;
    this._pending.delete(id);
    clearTimeout(p.timer);
    p.reject(new CommandError("expired", "not sent: the server was unreachable", id));
    return true;
  }

  /** The last `count` patches before the current version (for an event log
   * on arrival), asked with `sync`; resolves with [] if the server no longer
   * has them. Does not change the mirror. */
  history(count = 30) {
    if (!this.connected || this.version === null) return Promise.resolve([]);
    const since = Math.max(0, this.version - count);
    if (since >= this.version) return Promise.resolve([]);
    this._counter += 1;
    const rid = `h-${this._prefix}-${this._counter}`;
    return new Promise((resolve) => {
      this._historyWaiters.set(rid, { upTo: this.version, resolve });
      if (!this._send(syncFrame(since, rid))) {
        this._historyWaiters.delete(rid);
        resolve([]);
      }
    });
  }

  get pendingCommands() {
    return [...this._pending.keys()];
  }

  _send(frame) {
    const ws = this._ws;
    if (!ws || ws.readyState !== 1) return false;
    ws.send(JSON.stringify(frame));
    return true;
  }

  // --- mirror --------------------------------------------------------------

  _onWelcome(frame) {
    this.user = frame.user ?? null;
    this.role = frame.role ?? null;
    this._authMessage = null;
    this._syncSentAt = null;
    if (frame.state) {
      this._reset(frame.state, frame.v);
    } else if (Array.isArray(frame.patches)) {
      const applied = [];
      for (const p of frame.patches) applied.push(...this._feed(p));
      this._changed(applied, false);
      if (typeof frame.v === "number" && this.version !== null && this.version < frame.v) {
        this._requestSync();
      }
    }
    this.connections += 1;
    this._setStatus("connected", `${this.user} (${this.role})`);
    this._emit("welcome", frame);
    this._settle.resolve(this);
    for (const p of this._pending.values()) p.sent = this._send(p.frame) || p.sent;
  }

  _reset(state, v) {
    this.state = clone(state);
    this.version = v;
    this._changed(this._drain(), true);
  }

  /** Returns the patches applied (in order); buffers a future one. */
  _feed(patch) {
    if (this.state === null || typeof patch.v !== "number") return [];
    if (patch.v <= this.version) return [];
    if (patch.v > this.version + 1) {
      this._ahead.set(patch.v, patch);
      this._requestSync();
      return [];
    }
    applyOps(this.state, patch.ops);
    this.version = patch.v;
    return [patch, ...this._drain()];
  }

  _drain() {
    const applied = [];
    for (const v of [...this._ahead.keys()].sort((a, b) => a - b)) {
      if (v <= this.version) this._ahead.delete(v);
      else if (v === this.version + 1) {
        const patch = this._ahead.get(v);
        this._ahead.delete(v);
        applyOps(this.state, patch.ops);
        this.version = v;
        applied.push(patch);
      } else break;
    }
    return applied;
  }

  _requestSync() {
    if (this.version === null || this._syncSentAt === this.version) return;
    if (this._send(syncFrame(this.version))) this._syncSentAt = this.version;
  }

  _changed(applied, reset) {
    for (const patch of applied) {
      this._emit("patch", patch);
      for (const event of patch.events || []) this._emit("event", event, patch);
    }
    if (!applied.length && !reset) return;
    if (this._parked.length) {
      const keep = [];
      for (const [v, p, ack] of this._parked) {
        if (v <= this.version) p.resolve(ack);
        else keep.push([v, p, ack]);
      }
      this._parked = keep;
    }
    this._emit("state", this.state, this.version);
  }

  _handle(frame) {
    switch (frame.t) {
      case "patch":
        this._changed(this._feed(frame), false);
        break;
      case "patches": {
        const waiter = frame.id ? this._historyWaiters.get(frame.id) : undefined;
        if (waiter) {
          // the answer to history(), told by its id (v1.1)
          this._historyWaiters.delete(frame.id);
          waiter.resolve((frame.patches || []).filter((p) => p.v <= waiter.upTo));
        } else this._syncSentAt = null;
        const applied = [];
        for (const p of frame.patches || []) applied.push(...this._feed(p));
        this._changed(applied, false);
        if (this._ahead.size) this._requestSync();
        break;
      }
      case "snapshot": {
        const waiter = frame.id ? this._historyWaiters.get(frame.id) : undefined;
        if (waiter) {
          this._historyWaiters.delete(frame.id);
          waiter.resolve([]); // further back than the server keeps
        } else this._syncSentAt = null;
        this._reset(frame.state, frame.v);
        break;
      }
      case "ack": {
        const p = this._pending.get(frame.id);
        if (!p) return;
        this._pending.delete(frame.id);
        clearTimeout(p.timer);
        if (typeof frame.v === "number" && (this.version === null || this.version < frame.v)) {
          this._parked.push([frame.v, p, frame]); // its patch is missing: ask for it
          this._requestSync();
        } else p.resolve(frame);
        break;
      }
      case "error": {
        const p = frame.id ? this._pending.get(frame.id) : null;
        if (p) {
          this._pending.delete(frame.id);
          clearTimeout(p.timer);
          p.reject(new CommandError(frame.code, frame.message, frame.id));
          return;
        }
        if (frame.code === "unauthenticated") this._authMessage = frame.message || null;
        this._emit("error", frame);
        break;
      }
      default:
        break; // unknown frames are ignored (the protocol only grows)
    }
  }
}

export default VttSyncClient;
