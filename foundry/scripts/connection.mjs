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

function parse(url) {
  try {
    return new URL(url);
  } catch {
    return null;
  }
}

/** A ws:// URL that a page served over https cannot open (loopback hosts
 * excepted: browsers count them as secure). */
export function isMixedContent(wsUrl, pageProtocol) {
  const u = parse(wsUrl);
  return Boolean(u && pageProtocol === "https:" && u.protocol === "ws:" && !LOOPBACK.has(u.hostname));
}

function isIp(host) {
  return /^\d+\.\d+\.\d+\.\d+$/.test(host) || host.startsWith("[");
}

/** The domain a host's siblings share: `node-2.vtt.example.org` and
 * `vtt.example.org` are of the family `vtt.example.org`'s parent,
 * `example.org`; an IP address, a one-label name, or a parent with one
 * label (`example`, `org`) has no family but itself. */
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

/** The hosts of the "other server addresses" setting (comma or space separated). */
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
 */
export function guardedWebSocket(Base, { configured, extraHosts = [], onRefused, onInsecure }) {
  return class GuardedWebSocket extends Base {
    /** @param {string} url  @param {string[]} [protocols] */
    constructor(url, protocols) {
      const target = String(url);
      if (target !== configured && !redirectAllowed(target, configured, extraHosts)) {
        onRefused?.(target);
        throw new Error(`vtt-sync: a redirect to ${target} was refused (not the configured server)`);
      }
      try {
        super(url, protocols);
      } catch (err) {
        if (err?.name === "SecurityError") onInsecure?.(target, err);
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
 * @returns {Promise<{code: string, detail?: string, role?: string, user?: string, room?: string}>}
 */
export async function testConnection(Client, WebSocketImpl, { url, room, token, pageProtocol, extraHosts = [], timeoutMs = 8000 }) {
  const wsUrl = toWsUrl(url, pageProtocol);
  if (!wsUrl || !room || !token) return { code: "empty" };
  if (isMixedContent(wsUrl, pageProtocol)) return { code: "insecure", detail: wsUrl };
  let verdict = null;
  const Guarded = guardedWebSocket(WebSocketImpl, {
    configured: wsUrl,
    extraHosts,
    onRefused: (target) => (verdict ??= { code: "redirect", detail: target }),
    onInsecure: (target) => (verdict ??= { code: "insecure", detail: target }),
  });
  const client = new Client({ url: wsUrl, token, room, reconnect: false, helloTimeout: timeoutMs, WebSocketImpl: Guarded });
  const timer = new Promise((resolve) => setTimeout(() => resolve({ code: "unreachable", detail: wsUrl }), timeoutMs));
  try {
    const outcome = await Promise.race([
      client.connect().then(
        () => ({ code: "ok", role: client.role, user: client.user, room }),
        (err) => ([4401, 4403, 4404].includes(err?.closeCode) ? { code: "refused", detail: err.message } : null),
      ),
      timer,
    ]);
    return verdict ?? outcome ?? { code: "unreachable", detail: wsUrl };
  } finally {
    client.close();
  }
}
