// The DOM side: a vtt-sync panel on actor sheets (the server's values, the
// GM's link buttons, the players' actions), two GM buttons in the combat
// tracker, and a small connection indicator. The HTML comes from pure
// functions (panelHtml, trackerHtml) that the tests render; wiring them into
// Foundry's windows is what only a real Foundry shows (foundry/README.md).

import { escapeHtml, num } from "./html.mjs";
import { askMaxima, connectionDialog, element, menuClass } from "./menu.mjs";
import { CONDITIONS as CONDITION_LIST, MODULE_ID } from "./names.mjs";

export { element, escapeHtml, menuClass, num };

/** @typedef {import("./module.mjs").VttSyncModule} VttSyncModule */
/** @typedef {import("./menu.mjs").Texts} Texts */
/** @typedef {import("./actor-data.mjs").Maxima} Maxima */

/**
 * What the panel shows for one actor.
 * @typedef {object} PanelModel
 * @property {string} status the connection's status
 * @property {boolean} linked
 * @property {boolean} gm
 * @property {string | null} id the server character
 * @property {VttSync.Character | null} char
 * @property {{pv: string, pe: string, pp: string}} [labels]
 * @property {boolean} [paused]
 * @property {import("./actions.mjs").Action[]} actions
 * @property {{pe_max: unknown, pp_max: unknown, pe: boolean} | null} flagMaxima
 */

const STATUSES = ["off", "idle", "connecting", "connected", "disconnected", "failed", "closed"];
const CONDITIONS = new Set(CONDITION_LIST);

/** @param {VttSyncModule} mod @param {Actor.Implementation} actor @returns {PanelModel} */
export function panelModel(mod, actor) {
  const g = mod.game;
  const id = mod.sheets.charOf(actor);
  const char = id ? (mod.client?.state?.characters?.[id] ?? null) : null;
  const adapter = mod.sheets.adapter();
  const system = adapter.id;
  return {
    status: mod.status,
    linked: Boolean(id),
    gm: Boolean(g.user?.isGM),
    id,
    char,
    labels: mod.labels(actor),
    paused: mod.sheets.isPaused(actor),
    actions: char ? mod.sheets.actionsFor(actor) : [],
    // pf1 and other systems keep PE/PP maxima in the module's flags: the GM edits them here.
    flagMaxima:
      g.user?.isGM && system !== "sfrpg"
        ? {
            pe_max: actor.flags?.[MODULE_ID]?.pe_max ?? 0,
            pp_max: actor.flags?.[MODULE_ID]?.pp_max ?? 0,
            // PE max is the sheet's own under pf1's Wounds and Vigor (vigor), else a flag
            pe: !adapter.holdsPe?.(actor, mod.settings.getter()),
          }
        : null,
  };
}

/** The condition's text key: `nonlethal` for stable after nonlethal damage (N1).
 * @param {VttSync.Character} c */
function conditionKey(c) {
  return c.condition === "stable" && c.nonlethal === true ? "nonlethal" : c.condition;
}

/** The server's ability damage (A1), when there is any: " Con 4, Str 2".
 * @param {VttSync.Character} c @param {Texts} t */
function abilityDamageHtml(c, t) {
  const list = Object.entries(c.ability_damage ?? {})
    .filter(([, n]) => Number(n) > 0)
    .map(([a, n]) => `${a.charAt(0).toUpperCase()}${a.slice(1)} ${num(n)}`);
  return list.length ? ` <span class="vtt-sync-ability-damage">${escapeHtml(t("AbilityDamage", { list: list.join(", ") }))}</span>` : "";
}

/** The panel's HTML, every server value escaped. @param {PanelModel} model @param {Texts} t */
export function panelHtml(model, t) {
  const parts = [
    `<header><strong>vtt-sync</strong> <span class="vtt-sync-dot ${escapeHtml(model.status)}"></span></header>`,
  ];
  const c = model.char;
  const L = model.labels ?? { pv: t("PV"), pe: t("PE"), pp: t("PP") };
  if (model.paused) parts.push(`<div class="vtt-sync-paused">${escapeHtml(t("Paused"))}</div>`);
  if (model.linked && c) {
    parts.push(
      `<div class="vtt-sync-values">` +
        `<span>${escapeHtml(L.pv)} ${num(c.pv)}/${num(c.pv_max)}</span> ` +
        `<span>${escapeHtml(L.pe)} ${num(c.pe)}/${num(c.pe_max)}</span> ` +
        `<span>${escapeHtml(L.pp)} ${num(c.pp)}/${num(c.pp_max)}</span> ` +
        `<span class="vtt-sync-condition ${escapeHtml(CONDITIONS.has(c.condition) ? c.condition : "unknown")}">${escapeHtml(t(`Condition.${conditionKey(c)}`))}</span>` +
        (c.activity ? ` <span>${escapeHtml(t(`Rest.${c.activity.kind}`))}</span>` : "") +
        abilityDamageHtml(c, t) +
        `</div>`,
    );
  } else if (model.linked) {
    parts.push(`<div>${escapeHtml(t("NotOnServer", { char: model.id }))}</div>`);
  }
  /** @type {string[]} */
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
    if (model.linked) {
      buttons.push(`<button type="button" data-vtt-gm="unlink">${escapeHtml(t("Unlink"))}</button>`);
      buttons.push(
        `<label class="vtt-sync-nosync"><input type="checkbox" data-vtt-gm="nosync"${model.paused ? " checked" : ""}> ${escapeHtml(t("NoSync"))}</label>`,
      );
    }
  }
  if (buttons.length) parts.push(`<div class="vtt-sync-actions">${buttons.join("")}</div>`);
  if (model.flagMaxima) {
    const f = model.flagMaxima;
    /** @param {"pe_max" | "pp_max"} key */
    const input = (key) =>
      `<label>${escapeHtml(t(key === "pe_max" ? "PeMax" : "PpMax", { pe: L.pe, pp: L.pp }))} <input type="number" min="0" step="1" data-vtt-flag="${key}" value="${num(Number(f[key]) || 0)}"></label>`;
    parts.push(`<div class="vtt-sync-maxima">${f.pe ? input("pe_max") : ""}${input("pp_max")}</div>`);
  }
  return parts.join("");
}

/** @param {Texts} t */
export function trackerHtml(t) {
  return (
    `<button type="button" data-vtt-tracker="link">${escapeHtml(t("LinkCombatants"))}</button>` +
    `<button type="button" data-vtt-tracker="resync">${escapeHtml(t("SyncTurns"))}</button>`
  );
}

/**
 * Where a sheet's panel goes: the window's content area, found from the
 * application's own element. An AppV1 sheet's render hook passes the whole
 * window on the first render but only the inner form on re-renders
 * (Application#_render -> _replaceHTML, foundry-vtt-types v12
 * client/apps/app.d.mts); searching from `html` alone put the panel inside
 * the form at the first re-render. `app.element` is the window in both
 * (jQuery in AppV1, an HTMLElement in AppV2).
 * @param {{element?: unknown} | null | undefined} app @param {unknown} html @returns {Element | null}
 */
export function panelHost(app, html) {
  /** @param {Element | null} el */
  const within = (el) => (el?.matches(".window-content") ? el : (el?.querySelector(".window-content") ?? null));
  const win = element(app?.element);
  const root = element(html);
  return within(win) ?? within(root) ?? root?.closest(".window-content") ?? root;
}

/** The DOM side of the module (main.mjs gives it to the module; the tests
 * run without one). @typedef {ReturnType<typeof createUi>} Ui */

/** @param {VttSyncModule} mod */
export function createUi(mod) {
  /** @type {Texts} */
  const t = (key, data) => mod.t(key, data);
  /** @type {HTMLElement | null} */
  let indicator = null;
  /** @type {WeakMap<Element, Actor.Implementation>} each drawn panel's actor */
  const panels = new WeakMap();

  /** @param {HTMLElement} panel @param {Actor.Implementation} actor */
  function fillPanel(panel, actor) {
    panel.innerHTML = panelHtml(panelModel(mod, actor), t);
    for (const b of panel.querySelectorAll("button[data-vtt-op]")) {
      if (!(b instanceof HTMLElement)) continue;
      const op = b.dataset.vttOp ?? "";
      const args = JSON.parse(b.dataset.vttArgs ?? "{}");
      b.addEventListener("click", () => mod.sheets.act(actor, op, args));
    }
    panel.querySelector('[data-vtt-gm="link"]')?.addEventListener("click", () => mod.sheets.link(actor));
    panel.querySelector('[data-vtt-gm="unlink"]')?.addEventListener("click", () => mod.sheets.unlink(actor));
    const nosync = panel.querySelector('input[data-vtt-gm="nosync"]');
    if (nosync instanceof HTMLInputElement) {
      nosync.addEventListener("change", () => mod.sheets.setPaused(actor, nosync.checked));
    }
    for (const input of panel.querySelectorAll("input[data-vtt-flag]")) {
      if (!(input instanceof HTMLInputElement)) continue;
      const key = input.dataset.vttFlag === "pe_max" ? "pe_max" : "pp_max";
      input.addEventListener("change", () => {
        const n = Math.max(0, Math.floor(Number(input.value) || 0));
        actor.setFlag(MODULE_ID, key, n);
      });
    }
  }

  /** A sheet was drawn: its panel, at the top of its content.
   * @param {{actor?: Actor.Implementation | null, element?: unknown}} app @param {unknown} html */
  function onSheet(app, html) {
    const actor = app.actor;
    const content = panelHost(app, html);
    if (!actor || !content) return;
    if (!mod.game.user?.isGM && !mod.sheets.charOf(actor)) return; // nothing to show a player
    let panel = content.querySelector(":scope > .vtt-sync-panel");
    if (!(panel instanceof HTMLElement)) {
      panel = document.createElement("section");
      panel.className = "vtt-sync-panel";
      content.prepend(panel);
    }
    if (!(panel instanceof HTMLElement)) return;
    panel.dataset.actorUuid = actor.uuid;
    panels.set(panel, actor);
    fillPanel(panel, actor);
  }

  /** The indicator is a line of Foundry's player list (bottom left), so it
   * never covers it; without one, it floats at the top of the screen. The
   * list is drawn again at each connection change (renderPlayerList). */
  function placeIndicator() {
    if (!indicator) return;
    const players = document.getElementById("players");
    indicator.classList.toggle("vtt-sync-floating", !players);
    if (players) {
      if (players.firstElementChild !== indicator) players.prepend(indicator);
    } else if (indicator.parentElement !== document.body) {
      document.body.append(indicator);
    }
  }

  /** The combat tracker was drawn: the GM's two buttons.
   * @param {{viewed?: Combat.Implementation | null}} app @param {unknown} html */
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
    bar.querySelector('[data-vtt-tracker="link"]')?.addEventListener("click", () => mod.tracker.linkCombat(combat));
    bar.querySelector('[data-vtt-tracker="resync"]')?.addEventListener("click", () => mod.tracker.resync(combat));
  }

  return {
    /** @param {Actor.Implementation} actor @param {Maxima} proposal @param {Record<string, string>} labels */
    askMaxima: (actor, proposal, labels) => askMaxima(mod.env, t, actor, proposal, labels),
    connectionDialog: () => connectionDialog(mod),
    MenuClass: menuClass(mod.env, () => void connectionDialog(mod)),
    /** @param {typeof Hooks} Hooks */
    register(Hooks) {
      Hooks.on("renderActorSheet", onSheet); // AppV1 sheets (sfrpg, pf1)
      Hooks.on("renderActorSheetV2", onSheet); // v13 AppV2 sheets
      Hooks.on("renderCombatTracker", onTracker);
      Hooks.on("renderPlayerList", () => placeIndicator()); // v12 (AppV1)
      Hooks.on("renderPlayers", () => placeIndicator()); // v13 (AppV2)
    },
    ready() {
      indicator = document.createElement("div");
      indicator.id = "vtt-sync-indicator";
      indicator.title = "vtt-sync";
      placeIndicator();
      this.status(mod.status, "");
    },
    /** @param {string} status @param {string} detail */
    status(status, detail) {
      if (!indicator) return;
      indicator.classList.remove(...STATUSES);
      indicator.classList.add("vtt-sync-dot", status);
      indicator.textContent = `vtt-sync: ${t(`Status.${status}`)}`;
      indicator.title = detail || "";
    },
    /** Redraw the open panels in place (the system's sheet is not re-rendered). */
    refresh() {
      for (const panel of document.querySelectorAll("section.vtt-sync-panel[data-actor-uuid]")) {
        if (!(panel instanceof HTMLElement)) continue;
        const actor = panels.get(panel);
        if (actor) fillPanel(panel, actor);
      }
    },
  };
}
