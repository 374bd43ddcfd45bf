// The admin page: the server's rooms (name, version, last activity, who is
// connected) with their export, deletion (asked first) and a new link for a
// GM who lost theirs; and a new room with its GM's link (what `vtt-sync
// client create-room NAME` prints). The admin token may come in the fragment
// (#token=...), which the browser never sends in an HTTP request; it goes to
// this server only, in an Authorization header or over the WebSocket.

import { $, el } from "./dom.js";
import { confirmDialog, toast } from "./notices.js";
import { VttSyncClient } from "./vtt-sync-client.js";

/** "Thursday table" -> "thursday-table" (as the CLI does). */
export function roomIdFromName(name) {
  const slug = name
    .toLowerCase()
    .replace(/[^a-z0-9_.-]+/g, "-")
    .replace(/^[-_.]+|[-_.]+$/g, "")
    .slice(0, 64)
    .replace(/[-_.]+$/g, "");
  return slug || "room";
}

function notice(title, message, kind = "error") {
  toast(kind, title, message);
}

// The server's address from this page's, path included (a reverse proxy's sub-path).
const base = new URL(".", location.href);
const wsUrl = `${base.protocol === "https:" ? "wss:" : "ws:"}//${base.host}${base.pathname}`;
let publicPage = null; // links.json: the server's --public-url, for the links

async function loadPublicPage() {
  try {
    const r = await fetch(new URL("links.json", base), { cache: "no-store" });
    const page = r.ok ? (await r.json()).page : null;
    publicPage = typeof page === "string" && /^https?:\/\//.test(page) ? page : null;
  } catch {
    publicPage = null;
  }
}

function linkFor(room, token) {
  const params = new URLSearchParams({ room, token });
  return `${publicPage ?? `${base.origin}${base.pathname}`}#${params}`;
}

function token() {
  return $("#admin-token").token.value.trim();
}

/** One admin command over a short admin session. */
async function adminCommand(op, args) {
  const client = new VttSyncClient({ url: wsUrl, token: token() });
  try {
    await client.connect();
    return await client.command(op, args);
  } finally {
    client.close();
  }
}

function failure(err, what) {
  if (err.closeCode === 4401) return notice("Wrong admin token", "check it and retry");
  notice(what, err.serverMessage ?? err.message);
}

function when(ts) {
  if (typeof ts !== "number") return "never";
  return new Date(ts * 1000).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
}

// --- the list ------------------------------------------------------------------

async function loadRooms() {
  const r = await fetch(new URL("admin/rooms", base), {
    headers: { Authorization: `Bearer ${token()}` },
    cache: "no-store",
  });
  if (r.status === 401) throw Object.assign(new Error("wrong admin token"), { closeCode: 4401 });
  if (!r.ok) throw new Error((await r.json().catch(() => ({}))).error ?? `HTTP ${r.status}`);
  return (await r.json()).rooms;
}

function roomRow(room) {
  const tr = el("tr");
  tr.dataset.room = room.room;
  const name = el("td");
  name.append(el("strong", "room-name", room.name ?? room.room), el("div", "muted small", room.room));
  const who = room.connected.map(
    (c) => `${c.name ?? c.user} (${c.role ?? "?"})${c.sessions > 1 ? ` ×${c.sessions}` : ""}`,
  );
  // the cell stays a table cell (its row's height and line); the buttons
  // are laid out in a box inside it
  const actions = el("td", "room-actions");
  const buttons = el("div", "row wrap end");
  for (const [action, label] of [
    ["export", "Export"],
    ["gm-link", "New GM link"],
    ["delete", "Delete"],
  ]) {
    const b = el("button", action === "delete" ? "danger" : null, label);
    b.type = "button";
    b.dataset.action = action;
    buttons.append(b);
  }
  actions.append(buttons);
  tr.append(
    name,
    el("td", "room-v", String(room.v)),
    el("td", "room-last", when(room.last_activity)),
    el("td", "room-who", who.length ? who.join(", ") : "nobody"),
    actions,
  );
  return tr;
}

async function showRooms() {
  let rooms;
  try {
    rooms = await loadRooms();
  } catch (err) {
    failure(err, "No list of rooms");
    return;
  }
  $("#rooms").hidden = false;
  $("#rooms-table tbody").replaceChildren(...rooms.map(roomRow));
  $("#rooms-table").hidden = rooms.length === 0;
  $("#rooms-empty").hidden = rooms.length > 0;
}

async function exportRoom(room) {
  const r = await fetch(new URL(`admin/export?${new URLSearchParams({ room })}`, base), {
    headers: { Authorization: `Bearer ${token()}` },
  });
  if (!r.ok) {
    notice("Not exported", (await r.json().catch(() => ({}))).error ?? `HTTP ${r.status}`);
    return;
  }
  const url = URL.createObjectURL(await r.blob());
  const a = el("a");
  a.href = url;
  a.download = `${room}.json`;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60000);
  notice("Exported", `${room}.json`, "ok");
}

async function onRoomAction(ev) {
  const btn = ev.target.closest("button[data-action]");
  if (!btn) return;
  const room = btn.closest("tr").dataset.room;
  const name = btn.closest("tr").querySelector(".room-name").textContent;
  btn.disabled = true;
  try {
    if (btn.dataset.action === "export") await exportRoom(room);
    else if (btn.dataset.action === "delete") {
      const lines = [
        "Its state, its whole log and every link to it are gone for good; whoever is connected is cut off.",
        "Export it first to keep a copy.",
      ];
      if (!(await confirmDialog(`Delete ${name} (${room})?`, lines, "Delete", "cancel"))) return;
      await adminCommand("delete_room", { room });
      notice("Deleted", room, "ok");
      await showRooms();
    } else {
      const lines = ["The GM's current link stops working at once; every other link keeps working."];
      if (!(await confirmDialog(`A new link for the GM of ${name}?`, lines, "New link"))) return;
      const ack = await adminCommand("reissue_gm_link", { room });
      const link = linkFor(ack.result.room, ack.result.gm_token);
      $("#room-link-who").textContent = `The new link of ${name}'s GM`;
      $("#room-link-url").value = link;
      $("#room-link-open").href = link;
      $("#room-link").hidden = false;
    }
  } catch (err) {
    failure(err, "Refused");
  } finally {
    btn.disabled = false;
  }
}

// --- a new room ----------------------------------------------------------------

async function createRoom(ev) {
  ev.preventDefault();
  const form = ev.currentTarget;
  const name = form.name.value.trim();
  const room = form.room.value.trim() || roomIdFromName(name);
  ev.submitter.disabled = true;
  try {
    const ack = await adminCommand("create_room", { room, name, gm_name: form.gm_name.value.trim() });
    const link = linkFor(ack.result.room, ack.result.gm_token);
    $("#gm-link-url").value = link;
    $("#gm-link-open").href = link;
    $("#gm-link").hidden = false;
    if (!$("#rooms").hidden) await showRooms();
  } catch (err) {
    const refused = err.code === "conflict" ? `${err.serverMessage}: choose another room id.` : null;
    if (refused) notice("Not created", refused);
    else failure(err, "Not created");
  } finally {
    ev.submitter.disabled = false;
  }
}

const params = new URLSearchParams(location.hash.slice(1));
if (params.get("token")) {
  $("#admin-token").token.value = params.get("token");
  history.replaceState(null, "", location.pathname); // out of the address bar
}
loadPublicPage();
$("#admin-token").addEventListener("submit", (ev) => {
  ev.preventDefault();
  showRooms();
});
$("#rooms-refresh").addEventListener("click", showRooms);
$("#rooms-table").addEventListener("click", onRoomAction);
$("#create-room").addEventListener("submit", createRoom);
if (params.get("token")) showRooms();
