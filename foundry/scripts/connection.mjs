// Where the module connects, and what it refuses: the server URL as a
// WebSocket URL (wss:// from an https page), the rule for a cluster's
// `redirect` (never to a host the GM did not configure), the browser's
// refusals that no retry can fix (mixed content), and the connection test of
// the settings menu. Pure functions and one WebSocket wrapper: the tests run
// them in Node and in headless Chromium (tests/foundry/).

/** Hosts that are "this machine": a browser treats them as secure contexts. */
const LOOPBACK = new Set(["localhost", "127.0.0.1", "[::1]", "::1"]);

/**
 * A server URL as typed by the GM, as a WebSocket URL: `http(s)://` becomes
 * `ws(s)://`, a bare `host:port` becomes `wss://` from an https page (a
 * browser refuses `ws://` there: mixed content) and `ws://` from an http one.
 * @param {string} text
 * @param {string} [pageProtocol] the page's `location.protocol` ("https:", "http:")
 */
export function toWsUrl(text, pageProtocol = "") {
  const url = String(text || "").trim();
  if (!url) return "";
  if (/^wss?:\/\//i.test(url)) return url;
  if (/^https?:\/\//i.test(url)) return url.replace(/^http/i, "ws");
  return `${pageProtocol === "https:" ? "wss" : "ws"}://${url}`;
}

/** @param {string} url */
function parse(url) {
  try {
    return new URL(url);
  } catch {
    return null;
  }
}

/** A ws:// URL that a page served over https cannot open (loopback hosts
 * excepted: browsers count them as secure). */
/** @param {string} wsUrl @param {string} pageProtocol */
export function isMixedContent(wsUrl, pageProtocol) {
  const u = parse(wsUrl);
  return Boolean(u && pageProtocol === "https:" && u.protocol === "ws:" && !LOOPBACK.has(u.hostname));
}

/** @param {string} host */
function isIp(host) {
  return /^\d+\.\d+\.\d+\.\d+$/.test(host) || host.startsWith("[");
}

/** The domain a host's siblings share: `node-2.vtt.example.org` and
 * `vtt.example.org` are of the family `vtt.example.org`'s parent,
 * `example.org`; an IP address, a one-label name, or a parent with one
 * label (`example`, `org`) has no family but itself. @param {string} host */
export function hostFamily(host) {
  const h = String(host || "").toLowerCase();
  if (!h || isIp(h)) return null;
  const labels = h.split(".");
  if (labels.length < 3) return null;
  return labels.slice(1).join(".");
}

/**
 * May a `redirect` frame send this client (and its token) to `target`?
 * Only with the configured scheme (`ws://` may become `wss://`, never the
 * reverse) and to the configured host, one of its siblings (the same parent
 * domain of at least two labels), or a host the GM listed in the world's
 * "other server addresses" setting. Anything else is refused before any
 * connection is made.
 * @param {string} target   the URL the redirect names
 * @param {string} configured the URL the GM configured (as a WebSocket URL)
 * @param {string[]} [extraHosts] hosts the GM allowed too
 */
export function redirectAllowed(target, configured, extraHosts = []) {
  const t = parse(target);
  const c = parse(configured);
  if (!t || !c) return false;
  if (t.protocol !== "wss:" && t.protocol !== "ws:") return false;
  if (c.protocol === "wss:" && t.protocol !== "wss:") return false;
  const th = t.hostname.toLowerCase();
  const ch = c.hostname.toLowerCase();
  if (th === ch) return true;
  if (extraHosts.map((h) => String(h).trim().toLowerCase()).includes(th)) return true;
  const family = hostFamily(ch);
  return Boolean(family && th.endsWith(`.${family}`) && hostFamily(th) === family);
}

/** The hosts of the "other server addresses" setting (comma or space separated).
 * @param {unknown} text @returns {string[]} */
export function parseHosts(text) {
  return String(text || "")
    .split(/[\s,]+/)
    .map((h) => h.trim())
    .filter(Boolean)
    .map((h) => parse(/:\/\//.test(h) ? h : `wss://${h}`)?.hostname ?? h);
}

/**
 * The WebSocket class the client is given: the browser's, with two guards
 * run before any connection is made (so a token never leaves for a host the
 * rules refuse): a URL other than the configured one must pass
 * `redirectAllowed` (`onRefused(url)` is called, and the constructor throws);
 * the browser's SecurityError (mixed content, a blocked port) is reported
 * through `onInsecure(url, err)`, then rethrown as the client expects.
 * @param {VttSync.WebSocketClass} Base
 * @param {{configured: string, extraHosts?: string[], onRefused?: (url: string) => void,
 *   onInsecure?: (url: string, err: Error) => void}} opts
 * @returns {VttSync.WebSocketClass}
 */
export function guardedWebSocket(Base, { configured, extraHosts = [], onRefused, onInsecure }) {
  return class GuardedWebSocket extends Base {
    /** @param {string | URL} url  @param {string | string[]} [protocols] */
    constructor(url, protocols) {
      const target = String(url);
      if (target !== configured && !redirectAllowed(target, configured, extraHosts)) {
        onRefused?.(target);
        throw new Error(`vtt-sync: a redirect to ${target} was refused (not the configured server)`);
      }
      try {
        super(url, protocols);
      } catch (err) {
        if (err instanceof Error && err.name === "SecurityError") onInsecure?.(target, err);
        throw err;
      }
    }
  };
}

/**
 * The settings menu's connection test: one connection with these settings,
 * no retry; what went wrong, in a GM's words (the `code` picks the message
 * in lang/*.json, VTTSYNC.Test.<code>):
 *   ok            connected; `role`, `user` and the room's name are known
 *   empty         a setting is missing
 *   insecure      ws:// from an https page (or the browser refused it)
 *   unreachable   nothing answered (down, wrong address or port, no TLS
 *                 on a wss:// port, or a certificate this browser does not
 *                 trust: a page cannot tell these apart)
 *   refused       the server refused the token or the room (it does not say which)
 *   redirect      the server sent the client to a host the GM did not configure
 * @param {VttSync.ClientClass} Client @param {VttSync.WebSocketClass} WebSocketImpl
 * @param {{url: unknown, room: unknown, token: unknown, pageProtocol: string, extraHosts?: string[], timeoutMs?: number}} opts
 * @returns {Promise<TestResult>}
 */
export async function testConnection(Client, WebSocketImpl, { url, room, token, pageProtocol, extraHosts = [], timeoutMs = 8000 }) {
  const wsUrl = toWsUrl(String(url ?? ""), pageProtocol);
  if (!wsUrl || !room || !token) return { code: "empty" };
  if (isMixedContent(wsUrl, pageProtocol)) return { code: "insecure", detail: wsUrl };
  /** @type {TestResult | null} */
  let verdict = null;
  const Guarded = guardedWebSocket(WebSocketImpl, {
    configured: wsUrl,
    extraHosts,
    onRefused: (target) => (verdict ??= { code: "redirect", detail: target }),
    onInsecure: (target) => (verdict ??= { code: "insecure", detail: target }),
  });
  const client = new Client({
    url: wsUrl,
    token: String(token),
    room: String(room),
    reconnect: false,
    helloTimeout: timeoutMs,
    WebSocketImpl: Guarded,
  });
  /** @type {Promise<TestResult>} */
  const timer = new Promise((resolve) => setTimeout(() => resolve({ code: "unreachable", detail: wsUrl }), timeoutMs));
  try {
    /** @type {Promise<TestResult | null>} */
    const connected = client.connect().then(
      () => ({ code: "ok", role: client.role ?? "", user: client.user ?? "", room: String(room) }),
      (/** @type {VttSync.ClientError} */ err) =>
        [4401, 4403, 4404].includes(err?.closeCode ?? 0) ? { code: "refused", detail: err.message } : null,
    );
    const outcome = await Promise.race([connected, timer]);
    return verdict ?? outcome ?? { code: "unreachable", detail: wsUrl };
  } finally {
    client.close();
  }
}

/** @typedef {import("./module.mjs").VttSyncModule} VttSyncModule */

/** The connection test's verdict (see testConnection).
 * @typedef {{code: string, detail?: string, role?: string, user?: string, room?: string}} TestResult */
/** The settings the test tries, as typed in the menu (the saved ones otherwise).
 * @typedef {{serverUrl?: string, room?: string, token?: string, redirectHosts?: string}} TestValues */

/**
 * This user's connection to the server's room: opened at `ready` (and again
 * when a setting changes), its status shown and reported once, the
 * failures no retry can fix said once, in words a GM can act on.
 */
export class Connection {
  /** @param {VttSyncModule} mod */
  constructor(mod) {
    this.mod = mod;
    /** @type {string | null} the key of a failure no retry can fix, once reported */
    this.final = null;
    this.readyFired = false;
  }

  /** The page's protocol ("https:" in most hosted worlds), "" outside a browser. */
  pageProtocol() {
    return this.mod.env.location?.protocol ?? "";
  }

  /** This page's origin, which the server must allow (--allow-origin). */
  pageOrigin() {
    return this.mod.env.location?.origin ?? "";
  }

  /** The server URL as the client uses it (wss:// by default from https). */
  serverUrl() {
    return toWsUrl(String(this.mod.settings.get("serverUrl") ?? ""), this.pageProtocol());
  }

  connect() {
    const mod = this.mod;
    const old = mod.client;
    mod.client = null;
    old?.close();
    const url = this.serverUrl();
    const room = mod.room;
    const token = mod.settings.token();
    mod.clock.lastClock = null;
    mod.warned.clear();
    this.final = null;
    if (!url || !room || !token) {
      this.setStatus("off");
      if (url && room && !token) this.askToken();
      mod.users.withdraw();
      return null;
    }
    if (isMixedContent(url, this.pageProtocol())) {
      // No retry can fix this: the browser refuses ws:// from an https page.
      this.finalFailure(null, "Insecure", { url, wss: url.replace(/^ws:/i, "wss:") });
      return null;
    }
    const Base = mod.env.WebSocket ?? globalThis.WebSocket;
    /** @type {VttSync.Client | null} */
    let client = null;
    const WebSocketImpl = guardedWebSocket(Base, {
      configured: url,
      extraHosts: parseHosts(mod.settings.get("redirectHosts")),
      onRefused: (target) => this.finalFailure(client, "RedirectRefused", { url: target, configured: url }),
      onInsecure: (target) =>
        this.finalFailure(client, "Insecure", { url: target, wss: target.replace(/^ws:/i, "wss:") }),
    });
    const made = new mod.Client({ url, token, room, WebSocketImpl });
    client = made;
    mod.client = made;
    // Events of a client replaced since (settings changed) are dropped.
    made.on("status", (status, detail) => mod.client === made && this.setStatus(status, detail));
    made.on("patch", (patch) => mod.client === made && this.onPatch(patch));
    made.on("welcome", (frame) => mod.client === made && this.onWelcome(frame));
    made.on("state", () => mod.client === made && this.onState());
    made.connect().catch(() => {}); // a final failure arrives as the status "failed"
    return made;
  }

  /** A failure no retry can fix (mixed content, a redirect to a host the
   * GM did not configure): reported once, in words a GM can act on, and
   * the client stops (no token is sent anywhere meanwhile).
   * @param {VttSync.Client | null} client @param {string} key @param {Record<string, unknown>} data */
  finalFailure(client, key, data) {
    const mod = this.mod;
    if (client && mod.client !== client) return;
    if (this.final) return;
    this.final = key;
    const text = mod.t(key, data);
    mod.status = "failed";
    mod.ui?.status("failed", text);
    mod.env.ui?.notifications?.error?.(mod.escapeForNotice(text), { permanent: true });
    mod.users.withdraw();
    if (client) queueMicrotask(() => client.close());
  }

  /** Every setting is filled but this user's token (a new browser, or a
   * token that was never entered): say where it goes, once. */
  askToken() {
    this.mod.warnOnce("token", "TokenMissing");
  }

  /** Status changes reach the indicator; the user hears of a lost
   * connection once, not at every retry, and once more when it is back.
   * @param {string} status @param {string} [detail] */
  setStatus(status, detail = "") {
    const mod = this.mod;
    if (this.final) return; // reported already; the client is stopping
    const before = mod.status;
    mod.status = status;
    mod.ui?.status(status, detail);
    if (status !== before) mod.emitApi("status", status);
    if (status === "connected") {
      if (mod.warned.has("connection")) {
        mod.warned.delete("connection");
        mod.notify("info", "Reconnected");
      }
    } else if (status === "disconnected" && before !== "disconnected") {
      const url = this.serverUrl();
      if (mod.client && !mod.client.connections) {
        // Never connected in this session: say what may be wrong. A page
        // cannot tell a server that is down from a certificate it does not
        // trust, so both are named.
        const https = url.replace(/^ws/i, "http");
        mod.warnOnce("connection", /^wss:/i.test(url) ? "UnreachableTls" : "Unreachable", {
          url,
          https,
          origin: this.pageOrigin(),
        });
      } else {
        mod.warnOnce("connection", "Disconnected", { url });
      }
    } else if (status === "failed") {
      mod.warned.set("connection", "failed");
      mod.notify("error", "Failed", { reason: detail });
      mod.users.withdraw();
      mod.users.onUsersChanged();
    }
  }

  /** The settings menu's connection test, with the settings as saved (or as typed).
   * @param {TestValues} [values] */
  test(values = {}) {
    const mod = this.mod;
    return testConnection(mod.Client, mod.env.WebSocket ?? globalThis.WebSocket, {
      url: values.serverUrl ?? mod.settings.get("serverUrl"),
      room: values.room ?? mod.room,
      token: values.token ?? mod.settings.token(),
      pageProtocol: this.pageProtocol(),
      extraHosts: parseHosts(values.redirectHosts ?? mod.settings.get("redirectHosts")),
    });
  }

  /** @param {VttSync.Welcome} frame */
  onWelcome(frame) {
    const mod = this.mod;
    if (!this.readyFired) {
      this.readyFired = true;
      // For other modules: Hooks.once("vtt-sync.ready", (api) => ...), once
      // per page, at the first welcome from the server (README, "API").
      mod.env.Hooks.callAll("vtt-sync.ready", mod.api());
    }
    if (frame.role === "gm" && !mod.game.user?.isGM) {
      mod.warnOnce("gm-token", "GmTokenOnPlayer");
    }
    mod.users.announce();
    mod.users.onUsersChanged();
  }

  /** @param {VttSync.Patch} patch */
  onPatch(patch) {
    const mod = this.mod;
    mod.emitApi("patch", patch);
    if (mod.isAutomation() && mod.settings.get("chatMessages")) mod.chat.post(patch);
  }

  onState() {
    const mod = this.mod;
    mod.ui?.refresh();
    mod.emitApi("state", mod.client?.state);
    // Once this client has become the automation client (its first sync
    // comes after what it catches up: becomeAutomation).
    if (mod.users.was && mod.isAutomation()) mod.scheduleSync();
  }
}
