// The GM's table setup: the room's settings, the people and their links,
// and the characters (the list, and the form that creates or edits one).
// Opened on arrival at an empty table, it folds away once play starts.

import { run } from "./commands.js";
import { $, $$, el } from "./dom.js";
import { clearFields } from "./fields.js";
import { copyLink, showLink } from "./links.js";
import { confirmDialog, toast } from "./notices.js";
import { affordances, byTableOrder, charName, page, userName } from "./page.js";

const ABILITIES = ["str", "dex", "con", "int", "wis", "cha"];
// Events of setting the table up; any other one (a clock advance, combat,
// damage, a roll...) means play has started.
const SETUP_KINDS = new Set(["character", "user", "room", "undo"]);

/** Table setup, opened on arrival at an empty table, folds away once play
 * starts (the first event that is not setting the table up), unless the GM
 * is typing in it. Opened or closed by hand, it stays as the GM put it. */
export function foldSetupOnPlay(patch) {
  const box = $("#setup");
  if (page.tableSetup.folded || box.hidden || !box.open) return;
  if (!(patch.events || []).some((ev) => !SETUP_KINDS.has(ev.kind))) return;
  if (box.contains(document.activeElement) && document.activeElement.matches("input, select, textarea")) return;
  page.tableSetup.folded = true;
  box.open = false;
}

/** The folded setup's line says what the table holds. */
function setupSummary(state) {
  const people = Object.keys(state?.users || {}).length;
  const chars = Object.keys(state?.characters || {}).length;
  const line = $("#setup-summary");
  if ($("#setup").open) line.textContent = "room, people and their links, characters";
  else {
    const counts = `${people} ${people === 1 ? "person" : "people"} · ${chars} character${chars === 1 ? "" : "s"}`;
    line.replaceChildren(counts, el("span", "wide-only", " · open to change")); // a phone's line: the counts
  }
}

export function renderTableSetup(state) {
  const box = $("#setup");
  box.hidden = !affordances().room?.update_room;
  if (box.hidden) return;
  if (!page.tableSetup.opened) {
    page.tableSetup.opened = true; // open it once on arrival when the table is still empty
    box.open = Object.keys(state.characters || {}).length === 0;
  }
  setupSummary(state);
  const form = $("#room-form");
  if (!form.contains(document.activeElement)) {
    form.name.value = state.name ?? "";
    form.round_seconds.value = String(state.round_seconds ?? 6);
    form.skip_dead.checked = state.skip_dead ?? true;
  }
  const people = Object.entries(state.users || {});
  $("#people").replaceChildren(
    ...people.map(([uid, u]) => {
      const li = el("li", "person");
      li.dataset.user = uid;
      li.append(el("span", "person-name", u.name), el("span", "muted small", ` ${u.role} · ${uid}`));
      if (uid === page.client.user) li.append(el("span", "muted small", " (you)"));
      else {
        const rotate = el("button", "icon", "New link");
        rotate.dataset.action = "rotate_token";
        rotate.title = "A new link for them; the old one stops working";
        const remove = el("button", "icon danger", "Remove");
        remove.dataset.action = "remove_user";
        remove.title = "Revoke their link";
        li.append(rotate, remove);
      }
      return li;
    }),
  );
  const chars = Object.entries(state.characters || {}).sort(byTableOrder);
  $("#setup-chars").replaceChildren(
    ...chars.map(([cid, c]) => {
      const li = el("li", "setup-char");
      li.dataset.char = cid;
      li.append(el("span", "person-name", c.name), el("code", "char-id", cid));
      li.append(el("span", "muted small", ` ${c.owner ? userName(c.owner) : "GM"}`));
      const shown = c.shown ?? "full";
      const badge = el("span", `badge small shown-badge shown-${shown}`, shown);
      badge.title = "Who sees it: full (everyone), status (others: name and condition), hidden (others: nothing)";
      li.append(badge);
      const edit = el("button", "icon", "Edit");
      edit.dataset.action = "edit";
      const remove = el("button", "icon danger", "Remove");
      remove.dataset.action = "remove_character";
      li.append(edit, remove);
      return li;
    }),
  );
}

function onRoomSubmit(ev) {
  ev.preventDefault();
  const form = ev.currentTarget;
  const state = page.client.state;
  const args = {};
  const name = form.name.value.trim();
  const round = Number.parseInt(form.round_seconds.value, 10);
  if (name && name !== state.name) args.name = name;
  if (Number.isFinite(round) && round !== state.round_seconds) args.round_seconds = round;
  if (form.skip_dead.checked !== (state.skip_dead ?? true)) args.skip_dead = form.skip_dead.checked;
  if (!Object.keys(args).length) return toast("ok", "Nothing changed", "");
  run("update_room", args, ev.submitter, { fieldOf: (path) => form.elements[path] ?? null });
}

async function onInvite(ev) {
  ev.preventDefault();
  const form = ev.currentTarget;
  const name = form.name.value.trim();
  const ack = await run("add_user", { name, role: form.role.value }, ev.submitter, { fieldOf: (path) => form.elements[path] ?? null });
  if (ack?.result?.token) {
    form.reset();
    showLink(name, ack.result.token);
  }
}

async function onPersonAction(ev) {
  const btn = ev.target.closest("button[data-action]");
  if (!btn) return;
  const uid = btn.closest("[data-user]").dataset.user;
  const who = userName(uid);
  if (btn.dataset.action === "rotate_token") {
    const ok = await confirmDialog(`A new link for ${who}?`, [`Their current link stops working at once.`], "New link");
    if (!ok) return;
    const ack = await run("rotate_token", { user: uid }, btn);
    if (ack?.result?.token) showLink(who, ack.result.token);
  } else {
    const lines = [`Their link stops working; their characters go back to the GM.`];
    if (await confirmDialog(`Remove ${who}?`, lines, "Remove")) run("remove_user", { user: uid }, btn);
  }
}

async function onCharAction(ev) {
  const btn = ev.target.closest("button[data-action]");
  if (!btn) return;
  const cid = btn.closest("[data-char]").dataset.char;
  if (btn.dataset.action === "edit") openCharForm(cid);
  else {
    const lines = ["Its sheet and its place in the combat go. Undo brings it back."];
    if (await confirmDialog(`Remove ${charName(cid)}?`, lines, "Remove")) run("remove_character", { char: cid }, btn);
  }
}

export function wireTableSetup() {
  $("#room-form").addEventListener("submit", onRoomSubmit);
  $("#invite-form").addEventListener("submit", onInvite);
  $("#link-copy").addEventListener("click", copyLink);
  $("#setup").addEventListener("toggle", () => setupSummary(page.client?.state));
  $("#setup summary").addEventListener("click", () => {
    page.tableSetup.folded = true; // the GM's own choice from now on
  });
  $("#people").addEventListener("click", onPersonAction);
  $("#setup-chars").addEventListener("click", onCharAction);
  $("#new-char").addEventListener("click", () => openCharForm(null));
  $("#char-form").addEventListener("submit", onCharSubmit);
}

// --- the character form ---------------------------------------------------------

function openCharForm(cid) {
  page.tableSetup.editing = cid;
  const form = $("#char-form");
  const state = page.client.state;
  const owner = form.owner;
  // players first, then GMs; an observer plays no character (the server
  // refuses one), unless it owns this one already (an older room): kept, so
  // that editing never drops an owner
  const current = cid === null ? null : state.characters[cid].owner;
  const rank = ([, u]) => (u.role === "player" ? 0 : 1);
  const users = Object.entries(state.users || {})
    .filter(([uid, u]) => u.role !== "observer" || uid === current)
    .sort((a, b) => rank(a) - rank(b));
  owner.replaceChildren(
    new Option("GM (nobody)", ""),
    ...users.map(([uid, u]) => new Option(u.role === "player" ? u.name : `${u.name} (${u.role})`, uid)),
  );
  form.reset();
  clearFields(form);
  $$(".edit-only", form).forEach((n) => (n.hidden = cid === null));
  $$(".create-only", form).forEach((n) => (n.hidden = cid !== null));
  $("#char-form-title").textContent = cid === null ? "New character" : `Edit ${charName(cid)} (${cid})`;
  $("#char-save").textContent = cid === null ? "Create" : "Save";
  if (cid !== null) {
    const c = state.characters[cid];
    const values = { ...c, ...c.abilities, pe_max: c.pe_max_base ?? c.pe_max, owner: c.owner ?? "", shown: c.shown ?? "full" };
    for (const input of form.elements) if (input.name && input.name in values) input.value = String(values[input.name]);
  }
  $("#char-dialog").showModal();
  form.name.focus();
}

function readCharForm(form) {
  const num = (name) => Number.parseInt(form[name].value, 10);
  const sheet = {
    name: form.name.value.trim(),
    level: num("level"),
    pv_max: num("pv_max"),
    pe_max: num("pe_max"),
    pp_max: num("pp_max"),
    medicine: num("medicine"),
    abilities: Object.fromEntries(ABILITIES.map((a) => [a, num(a)])),
    owner: form.owner.value || null,
  };
  if (form.shown.value) sheet.shown = form.shown.value; // "": the default (creation only)
  if (page.tableSetup.editing !== null) for (const k of ["pv", "pe", "pp"]) sheet[k] = num(k);
  return sheet;
}

/** The form's field of a sheet's argument: "level", "set.level",
 * "abilities.str", "set.abilities.str" (fields.js marks it when refused). */
function sheetField(form, path) {
  const name = path.replace(/^set\./, "").replace(/^abilities\./, "");
  const field = form.elements.namedItem(name);
  return field instanceof HTMLInputElement || field instanceof HTMLSelectElement ? field : null;
}

async function onCharSubmit(ev) {
  ev.preventDefault();
  const form = ev.currentTarget;
  if (ev.submitter?.value === "cancel") return $("#char-dialog").close();
  if (!form.reportValidity()) return;
  const sheet = readCharForm(form);
  const editing = page.tableSetup.editing;
  let ack;
  if (editing === null) {
    if (sheet.owner === null) delete sheet.owner;
    ack = await run("add_character", sheet, ev.submitter, { fieldOf: (path) => sheetField(form, path) });
    if (ack) toast("ok", `${sheet.name} joins the table`, `id ${ack.result.char}`);
  } else {
    const c = page.client.state.characters[editing];
    const current = { ...c, pe_max: c.pe_max_base ?? c.pe_max };
    const set = {};
    for (const [k, v] of Object.entries(sheet)) {
      if (k === "abilities") {
        const changed = Object.fromEntries(Object.entries(v).filter(([a, s]) => c.abilities[a] !== s));
        if (Object.keys(changed).length) set.abilities = changed;
      } else if (current[k] !== v) set[k] = v;
    }
    if (!Object.keys(set).length) return $("#char-dialog").close();
    ack = await run("update_character", { char: editing, set }, ev.submitter, { fieldOf: (path) => sheetField(form, path) });
  }
  if (ack) $("#char-dialog").close();
}
