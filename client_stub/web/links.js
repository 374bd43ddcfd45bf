// Addresses: the server's WebSocket URL from the page's own; a `ws=` link
// that names another server (the page asks before sending it the token);
// and the invitation links the GM hands out, on the server's public address
// (links.json, its --public-url) when it has one.

import { $ } from "./dom.js";
import { toast } from "./notices.js";
import { page } from "./page.js";

const LOOPBACK_HOSTS = new Set(["127.0.0.1", "localhost", "[::1]", "::1", "0.0.0.0"]);

/**
 * The server's WebSocket URL, from the page's own address, path included:
 * https://host/vtt/ (behind a reverse proxy under a sub-path) -> wss://host/vtt/.
 * @param {Location|URL} where
 */
export function socketUrl(where) {
  const url = new URL(".", where.href);
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  url.hash = "";
  url.search = "";
  return url.href;
}

/** The host a `ws=` URL points to when it is not this page's server (the
 * token would go there), else null: a link may name another server, but
 * the page asks before it sends the token to it. */
export function foreignHost(url, where) {
  try {
    const target = new URL(url, where.href);
    return target.host === where.host ? null : target.host;
  } catch {
    return String(url);
  }
}

/** Read links.json once (page.links.read resolves when it answered or failed). */
export function loadPublicPage() {
  page.links.read = (async () => {
    try {
      const r = await fetch(new URL("links.json", location.href), { cache: "no-store" });
      const found = r.ok ? (await r.json()).page : null;
      page.links.publicPage = typeof found === "string" && /^https?:\/\//.test(found) ? found : null;
    } catch {
      page.links.publicPage = null; // an older server, or a page served elsewhere: our own address
    }
  })();
}

function linkFor(token) {
  const params = new URLSearchParams(location.hash.slice(1));
  const next = new URLSearchParams({ room: page.client.room, token });
  if (params.get("ws")) next.set("ws", params.get("ws"));
  const publicPage = page.links.publicPage;
  if (publicPage && !params.get("ws")) return `${publicPage}#${next}`;
  return `${location.origin}${location.pathname}#${next}`;
}

/** Show `who`'s invitation link, to copy and send them. */
export async function showLink(who, token) {
  await page.links.read; // links.json answered (or failed) before the first link is made
  $("#link-who").textContent = who;
  $("#link-url").value = linkFor(token);
  // A link on 127.0.0.1 opens nothing on a friend's machine: say so.
  $("#link-local").hidden = Boolean(page.links.publicPage) || !LOOPBACK_HOSTS.has(location.hostname);
  $("#link-box").hidden = false;
  $("#link-url").select();
}

export async function copyLink() {
  const input = $("#link-url");
  try {
    await navigator.clipboard.writeText(input.value);
  } catch {
    input.select();
    document.execCommand("copy"); // http pages other than localhost have no clipboard API
  }
  toast("ok", "Link copied", "");
}
