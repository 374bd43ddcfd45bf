// The admin page: create a room with the server's admin token and get its GM's
// link (what `vtt-sync client create-room NAME` prints). The token may come in
// the fragment (#token=...), which the browser never sends in an HTTP request.

import { VttSyncClient } from "./vtt-sync-client.js";

const $ = (sel) => document.querySelector(sel);

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

function notice(title, message) {
  const box = document.createElement("div");
  box.className = "toast error";
  box.setAttribute("role", "alert");
  const strong = document.createElement("strong");
  strong.className = "toast-title";
  strong.textContent = title;
  const span = document.createElement("span");
  span.className = "toast-msg";
  span.textContent = message;
  box.append(strong, span);
  box.addEventListener("click", () => box.remove());
  $("#errors").prepend(box);
}

async function createRoom(ev) {
  ev.preventDefault();
  const form = ev.currentTarget;
  const name = form.name.value.trim();
  const room = form.room.value.trim() || roomIdFromName(name);
  // the server's address from this page's, path included (a reverse proxy's sub-path)
  const base = new URL(".", location.href);
  const url = `${base.protocol === "https:" ? "wss:" : "ws:"}//${base.host}${base.pathname}`;
  const client = new VttSyncClient({ url, token: form.token.value.trim() });
  ev.submitter.disabled = true;
  try {
    await client.connect();
    const ack = await client.command("create_room", { room, name, gm_name: form.gm_name.value.trim() });
    const params = new URLSearchParams({ room: ack.result.room, token: ack.result.gm_token });
    const link = `${base.origin}${base.pathname}#${params}`;
    $("#gm-link-url").value = link;
    $("#gm-link-open").href = link;
    $("#gm-link").hidden = false;
  } catch (err) {
    const refused = err.code === "conflict" ? `${err.serverMessage}: choose another room id.` : null;
    notice(err.closeCode === 4401 ? "Wrong admin token" : "Not created", refused ?? err.serverMessage ?? err.message);
  } finally {
    client.close();
    ev.submitter.disabled = false;
  }
}

const params = new URLSearchParams(location.hash.slice(1));
if (params.get("token")) $("#create-room").token.value = params.get("token");
$("#create-room").addEventListener("submit", createRoom);
