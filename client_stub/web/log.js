// The event log: each version's events as sentences in the feed (newest
// first, the recent ones fetched on arrival), the events remembered by
// version (what an undo reverts, what a card's command did), and the
// versions undone since, marked in the feed.

import { $, $$, el } from "./dom.js";
import { affordances, page, userName } from "./page.js";

const FEED_MAX = 200;
const KEEP_PATCHES = 500; // versions whose events the page remembers (undo texts)
const BACKFILL_PATCHES = 30; // versions whose events the log shows on arrival

/** One event as a sentence (DOM nodes, never innerHTML): each field a span. */
export function describeEvent(ev) {
  const line = el("div", "line");
  for (const [text, field] of page.eventText.segments(ev)) {
    if (!field) {
      line.append(document.createTextNode(text));
      continue;
    }
    const span = el("span", `v v-${field}`, text);
    const raw = ev[field];
    if (typeof raw === "string" || typeof raw === "number") span.dataset.value = String(raw);
    line.append(span);
  }
  return line;
}

export function sentence(ev) {
  return page.eventText.sentence(ev);
}

function remember(patch) {
  const { patchEvents, undone } = page;
  patchEvents.set(patch.v, patch.events || []);
  for (const ev of patch.events || []) if (ev.kind === "undo" && Number.isInteger(ev.undone)) undone.add(ev.undone);
  if (patchEvents.size > KEEP_PATCHES) {
    const oldest = Math.min(...patchEvents.keys());
    patchEvents.delete(oldest);
  }
}

function eventItem(ev, patch) {
  const li = el("li", "event");
  li.dataset.kind = ev.kind;
  li.dataset.v = String(patch.v);
  if (ev.char) li.dataset.char = ev.char;
  if (ev.kind === "roll") li.dataset.outcome = ev.outcome;
  const stamp = el("span", "stamp muted", `v${patch.v}${patch.by ? ` · ${userName(patch.by)}` : ""}`);
  li.append(describeEvent(ev), stamp);
  return li;
}

/** A patch's events as complete as its ops allow, remembered by version. */
function complete(patch) {
  patch.events = (patch.events || []).map((ev) => page.eventText.complete(ev, patch.ops));
  remember(patch);
}

/** Newest patch first; the events of one patch in their order. */
export function addPatch(patch) {
  page.names.update(page.client.state); // the state already holds the patch: names of newcomers
  complete(patch);
  const events = patch.events || [];
  if (!events.length) return;
  const feed = $("#feed");
  const block = document.createDocumentFragment();
  for (const ev of events) block.append(eventItem(ev, patch));
  feed.prepend(block);
  while (feed.children.length > FEED_MAX) feed.lastElementChild.remove();
  $("#no-events").hidden = true;
  markUndone();
}

/** The recent log, fetched once on arrival: below what arrived live since.
 * It reaches back to the version Undo would revert too (after undos it can
 * be far back), so that Undo's tooltip can say what it reverts; the feed
 * shows the last BACKFILL_PATCHES of them. */
export async function backfill() {
  const client = page.client;
  const target = affordances().undo?.v;
  const reach = Number.isInteger(target) ? Math.min(KEEP_PATCHES, client.version - target + 1) : 0;
  const patches = await client.history(Math.max(BACKFILL_PATCHES, reach));
  const feed = $("#feed");
  const shown = new Set($$("li.event", feed).map((li) => li.dataset.v));
  const block = document.createDocumentFragment();
  for (const patch of patches) complete(patch);
  for (const patch of patches.slice(-BACKFILL_PATCHES).reverse()) {
    if (shown.has(String(patch.v))) continue;
    for (const ev of patch.events || []) block.append(eventItem(ev, patch));
  }
  feed.append(block);
  if (feed.children.length) $("#no-events").hidden = true;
  markUndone();
}

function markUndone() {
  for (const li of $$("#feed li.event")) {
    const isUndone = page.undone.has(Number(li.dataset.v));
    if (isUndone && !li.classList.contains("undone")) {
      li.classList.add("undone");
      $(".stamp", li).append(el("span", "undone-tag", " · undone"));
    }
  }
}
