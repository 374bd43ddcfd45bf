// The DOM side: a vtt-sync panel on actor sheets (the server's values, the
// GM's link buttons, the players' actions), two GM buttons in the combat
// tracker, and a small connection indicator. The HTML comes from pure
// functions (panelHtml, trackerHtml) that the tests render; wiring them into
// Foundry's windows is what only a real Foundry shows (foundry/README.md).

import { MODULE_ID } from "./systems.mjs";

const ESC = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

export function escapeHtml(text) {
  return String(text ?? "").replace(/[&<>"']/g, (c) => ESC[c]);
}

/**
 * What the panel shows for one actor.
 * @returns {{status, linked, gm, char, id, actions, flagMaxima}}
 */
export function panelModel(mod, actor) {
  const g = mod.game;
  const id = mod.charOf(actor);
  const char = id ? (mod.client?.state?.characters?.[id] ?? null) : null;
  const system = mod.adapter().id;
  return {
    status: mod.status,
    linked: Boolean(id),
    gm: Boolean(g.user?.isGM),
    id,
    char,
    actions: char ? mod.actionsFor(actor) : [],
    // pf1 and other systems keep PE/PP maxima in the module's flags: the GM edits them here.
    flagMaxima:
      g.user?.isGM && system !== "sfrpg"
        ? {
            pe_max: actor.flags?.[MODULE_ID]?.pe_max ?? 0,
            pp_max: actor.flags?.[MODULE_ID]?.pp_max ?? 0,
            // PE max is the sheet's own under pf1's Wounds and Vigor (vigor), else a flag
            pe: !(system === "pf1" && mod.adapter().paths(actor, mod.settingsGetter()).pe),
          }
        : null,
  };
}

export function panelHtml(model, t) {
  const parts = [
    `<header><strong>vtt-sync</strong> <span class="vtt-sync-dot ${escapeHtml(model.status)}"></span></header>`,
  ];
  const c = model.char;
  if (model.linked && c) {
    parts.push(
      `<div class="vtt-sync-values">` +
        `<span>${t("PV")} ${c.pv}/${c.pv_max}</span> <span>${t("PE")} ${c.pe}/${c.pe_max}</span> ` +
        `<span>${t("PP")} ${c.pp}/${c.pp_max}</span> ` +
        `<span class="vtt-sync-condition ${escapeHtml(c.condition)}">${escapeHtml(t(`Condition.${c.condition}`))}</span>` +
        (c.activity ? ` <span>${escapeHtml(t(`Rest.${c.activity.kind}`))}</span>` : "") +
        `</div>`,
    );
  } else if (model.linked) {
    parts.push(`<div>${escapeHtml(t("NotOnServer", { char: model.id }))}</div>`);
  }
  const buttons = [];
  for (const a of model.actions) {
    const label = t(`Action.${a.key}`, a.name ? { name: a.name } : undefined);
    buttons.push(
      `<button type="button" data-vtt-op="${escapeHtml(a.op)}" data-vtt-args="${escapeHtml(JSON.stringify(a.args))}">${escapeHtml(label)}</button>`,
    );
  }
  if (model.gm) {
    buttons.push(
      `<button type="button" data-vtt-gm="link">${escapeHtml(t(model.linked ? "Relink" : "Link"))}</button>`,
    );
    if (model.linked)
      buttons.push(`<button type="button" data-vtt-gm="unlink">${escapeHtml(t("Unlink"))}</button>`);
  }
  if (buttons.length) parts.push(`<div class="vtt-sync-actions">${buttons.join("")}</div>`);
  if (model.flagMaxima) {
    const f = model.flagMaxima;
    const input = (key) =>
      `<label>${escapeHtml(t(key === "pe_max" ? "PeMax" : "PpMax"))} <input type="number" min="0" step="1" data-vtt-flag="${key}" value="${Number(f[key]) || 0}"></label>`;
    parts.push(`<div class="vtt-sync-maxima">${f.pe ? input("pe_max") : ""}${input("pp_max")}</div>`);
  }
  return parts.join("");
}

export function trackerHtml(t) {
  return (
    `<button type="button" data-vtt-tracker="link">${escapeHtml(t("LinkCombatants"))}</button>` +
    `<button type="button" data-vtt-tracker="resync">${escapeHtml(t("SyncTurns"))}</button>`
  );
}

/** An element from a render hook's html (jQuery in AppV1, an element in AppV2). */
function element(html) {
  if (!html) return null;
  if (html instanceof HTMLElement) return html;
  return html[0] ?? null;
}

export function createUi(mod) {
  const t = (key, data) => mod.t(key, data);
  let indicator = null;

  function fillPanel(panel, actor) {
    panel.innerHTML = panelHtml(panelModel(mod, actor), t);
    for (const b of panel.querySelectorAll("[data-vtt-op]")) {
      b.addEventListener("click", () => mod.act(actor, b.dataset.vttOp, JSON.parse(b.dataset.vttArgs)));
    }
    panel.querySelector('[data-vtt-gm="link"]')?.addEventListener("click", () => mod.link(actor));
    panel.querySelector('[data-vtt-gm="unlink"]')?.addEventListener("click", () => mod.unlink(actor));
    for (const input of panel.querySelectorAll("[data-vtt-flag]")) {
      input.addEventListener("change", () => {
        const n = Math.max(0, Math.floor(Number(input.value) || 0));
        actor.setFlag(MODULE_ID, input.dataset.vttFlag, n);
      });
    }
  }

  function onSheet(app, html) {
    const actor = app.actor ?? app.document;
    const root = element(html);
    if (!actor || !root) return;
    if (!mod.game.user?.isGM && !mod.charOf(actor)) return; // nothing to show a player
    const content = root.querySelector(".window-content") ?? root;
    let panel = content.querySelector(":scope > .vtt-sync-panel");
    if (!panel) {
      panel = document.createElement("section");
      panel.className = "vtt-sync-panel";
      content.prepend(panel);
    }
    panel.dataset.actorUuid = actor.uuid;
    fillPanel(panel, actor);
  }

  function onTracker(app, html) {
    const root = element(html);
    if (!root || !mod.game.user?.isGM) return;
    const combat = app.viewed ?? mod.game.combat;
    if (!combat) return;
    let bar = root.querySelector(".vtt-sync-tracker");
    if (!bar) {
      bar = document.createElement("div");
      bar.className = "vtt-sync-tracker";
      (root.querySelector("header, .combat-tracker-header") ?? root).append(bar);
    }
    bar.innerHTML = trackerHtml(t);
    bar.querySelector('[data-vtt-tracker="link"]').addEventListener("click", () => mod.linkCombat(combat));
    bar.querySelector('[data-vtt-tracker="resync"]').addEventListener("click", () => mod.resync(combat));
  }

  return {
    register(Hooks) {
      Hooks.on("renderActorSheet", onSheet); // AppV1 sheets (sfrpg, pf1)
      Hooks.on("renderActorSheetV2", onSheet); // v13 AppV2 sheets
      Hooks.on("renderCombatTracker", onTracker);
    },
    ready() {
      indicator = document.createElement("div");
      indicator.id = "vtt-sync-indicator";
      indicator.title = "vtt-sync";
      document.body.append(indicator);
      this.status(mod.status, "");
    },
    status(status, detail) {
      if (!indicator) return;
      indicator.className = `vtt-sync-dot ${status}`;
      indicator.textContent = `vtt-sync: ${t(`Status.${status}`)}`;
      indicator.title = detail || "";
    },
    /** Redraw the open panels in place (the system's sheet is not re-rendered). */
    refresh() {
      for (const panel of document.querySelectorAll(".vtt-sync-panel[data-actor-uuid]")) {
        const actor = mod.env.fromUuidSync?.(panel.dataset.actorUuid);
        if (actor) fillPanel(panel, actor);
      }
    },
  };
}
