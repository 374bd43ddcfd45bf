// The DOM side: a vtt-sync panel on actor sheets (the server's values, the
// GM's link buttons, the players' actions), two GM buttons in the combat
// tracker, and a small connection indicator. The HTML comes from pure
// functions (panelHtml, trackerHtml) that the tests render; wiring them into
// Foundry's windows is what only a real Foundry shows (foundry/README.md).

import { CONDITIONS as CONDITION_LIST, MODULE_ID } from "./names.mjs";
import { escapeHtml, num } from "./html.mjs";

export { escapeHtml, num };

const STATUSES = ["off", "idle", "connecting", "connected", "disconnected", "failed", "closed"];
const CONDITIONS = new Set(CONDITION_LIST);

/**
 * What the panel shows for one actor.
 * @returns {{status, linked, gm, char, id, actions, flagMaxima, labels, paused}}
 */
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
            pe: !(system === "pf1" && adapter.paths(actor, mod.settings.getter()).pe),
          }
        : null,
  };
}

/** The condition's text key: `nonlethal` for stable after nonlethal damage (N1). */
function conditionKey(c) {
  return c.condition === "stable" && c.nonlethal === true ? "nonlethal" : c.condition;
}

/** The server's ability damage (A1), when there is any: " Con 4, Str 2". */
function abilityDamageHtml(c, t) {
  const list = Object.entries(c.ability_damage ?? {})
    .filter(([, n]) => Number(n) > 0)
    .map(([a, n]) => `${a.charAt(0).toUpperCase()}${a.slice(1)} ${num(n)}`);
  return list.length ? ` <span class="vtt-sync-ability-damage">${escapeHtml(t("AbilityDamage", { list: list.join(", ") }))}</span>` : "";
}

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
    const input = (key) =>
      `<label>${escapeHtml(t(key === "pe_max" ? "PeMax" : "PpMax", { pe: L.pe, pp: L.pp }))} <input type="number" min="0" step="1" data-vtt-flag="${key}" value="${num(Number(f[key]) || 0)}"></label>`;
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
export function element(html) {
  if (!html) return null;
  if (typeof html.querySelector === "function") return html;
  return html[0] ?? null;
}

/**
 * Where a sheet's panel goes: the window's content area, found from the
 * application's own element. An AppV1 sheet's render hook passes the whole
 * window on the first render but only the inner form on re-renders
 * (Application#_render -> _replaceHTML, foundry-vtt-types v12
 * client/apps/app.d.mts); searching from `html` alone put the panel inside
 * the form at the first re-render. `app.element` is the window in both
 * (jQuery in AppV1, an HTMLElement in AppV2).
 */
export function panelHost(app, html) {
  const within = (el) => (el?.matches?.(".window-content") ? el : (el?.querySelector?.(".window-content") ?? null));
  const win = element(app?.element);
  const root = element(html);
  return within(win) ?? within(root) ?? root?.closest?.(".window-content") ?? root;
}

/**
 * registerMenu's `type`. Foundry refuses (throws, at `init`) anything but a
 * FormApplication or ApplicationV2 subclass (ClientSettings#registerMenu;
 * foundry-vtt-types v12.331.5 client/core/settings.d.mts, RegisterSubmenu
 * `type`). An ApplicationV2 subclass (in `foundry.applications.api` on v12
 * and v13) whose render() opens the connection dialog: Foundry's settings
 * window constructs it and renders it (SettingsConfig#_onClickSubmenu), as
 * foundry-rest-api's settings menu (ConnectionSettingsApp) does. Null when
 * Foundry has no ApplicationV2: no menu then, never a class Foundry refuses.
 */
export function menuClass(env, open) {
  const Base = env.foundry?.applications?.api?.ApplicationV2;
  if (!Base) return null;
  return class ConnectionMenu extends Base {
    async render() {
      open();
      return this;
    }
  };
}

export function createUi(mod) {
  const t = (key, data) => mod.t(key, data);
  let indicator = null;

  function fillPanel(panel, actor) {
    panel.innerHTML = panelHtml(panelModel(mod, actor), t);
    for (const b of panel.querySelectorAll("[data-vtt-op]")) {
      b.addEventListener("click", () => mod.sheets.act(actor, b.dataset.vttOp, JSON.parse(b.dataset.vttArgs)));
    }
    panel.querySelector('[data-vtt-gm="link"]')?.addEventListener("click", () => mod.sheets.link(actor));
    panel.querySelector('[data-vtt-gm="unlink"]')?.addEventListener("click", () => mod.sheets.unlink(actor));
    const nosync = panel.querySelector('[data-vtt-gm="nosync"]');
    nosync?.addEventListener("change", () => mod.sheets.setPaused(actor, nosync.checked));
    for (const input of panel.querySelectorAll("[data-vtt-flag]")) {
      input.addEventListener("change", () => {
        const n = Math.max(0, Math.floor(Number(input.value) || 0));
        actor.setFlag(MODULE_ID, input.dataset.vttFlag, n);
      });
    }
  }

  function onSheet(app, html) {
    const actor = app.actor ?? app.document;
    const content = panelHost(app, html);
    if (!actor || !content) return;
    if (!mod.game.user?.isGM && !mod.sheets.charOf(actor)) return; // nothing to show a player
    let panel = content.querySelector(":scope > .vtt-sync-panel");
    if (!panel) {
      panel = document.createElement("section");
      panel.className = "vtt-sync-panel";
      content.prepend(panel);
    }
    panel.dataset.actorUuid = actor.uuid;
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
    bar.querySelector('[data-vtt-tracker="link"]').addEventListener("click", () => mod.turns.linkCombat(combat));
    bar.querySelector('[data-vtt-tracker="resync"]').addEventListener("click", () => mod.turns.resync(combat));
  }

  /** A dialog with one OK button, on v13's DialogV2 or v12's Dialog:
   * resolves with onOk(root)'s value, or null when closed. */
  /** @param {{title: string, content: string, ok: string, onOk: Function, onRender?: Function}} opts */
  function dialog({ title, content, ok, onOk, onRender = undefined }) {
    const env = mod.env;
    const V2 = env.foundry?.applications?.api?.DialogV2;
    return new Promise((resolve) => {
      let done = false;
      const finish = (v) => {
        if (!done) resolve(v);
        done = true;
      };
      if (V2) {
        const d = new V2({
          window: { title },
          content,
          buttons: [{ action: "ok", label: ok, default: true, callback: () => finish(onOk(d.element)) }],
        });
        d.addEventListener?.("close", () => finish(null));
        Promise.resolve(d.render({ force: true })).then(() => onRender?.(d.element));
      } else {
        new env.Dialog({
          title,
          content,
          buttons: { ok: { label: ok, callback: (html) => finish(onOk(element(html))) } },
          default: "ok",
          render: (html) => onRender?.(element(html)),
          close: () => finish(null),
        }).render(true);
      }
    });
  }

  /** Linking an actor of a system without PE/PP: the GM confirms the
   * proposed maxima (or edits them). */
  function askMaxima(actor, proposal, labels) {
    const field = (key, label) =>
      `<div class="form-group"><label>${escapeHtml(label)}</label>` +
      `<input type="number" min="0" step="1" name="${key}" value="${num(proposal[key])}"></div>`;
    const content =
      `<p>${escapeHtml(t("MaximaAsk", { name: actor.name }))}</p>` +
      ("pe_max" in proposal ? field("pe_max", t("PeMax", labels)) : "") +
      ("pp_max" in proposal ? field("pp_max", t("PpMax", labels)) : "");
    return dialog({
      title: t("MaximaTitle"),
      content,
      ok: t("Link"),
      onOk: (root) => {
        const out = {};
        for (const key of Object.keys(proposal)) {
          const v = Number(root?.querySelector(`[name="${key}"]`)?.value);
          out[key] = Number.isFinite(v) ? Math.max(0, Math.floor(v)) : proposal[key];
        }
        return out;
      },
    });
  }

  /** The settings menu: the connection's settings and a test that says
   * what is wrong. The token field is a password field, left empty (the
   * saved token is never shown); empty keeps the saved one. */
  function connectionDialog() {
    const gm = Boolean(mod.game.user?.isGM);
    const value = (k) => escapeHtml(mod.settings.get(k) ?? "");
    const dis = gm ? "" : " disabled";
    const content =
      `<div class="vtt-sync-connection">` +
      `<div class="form-group"><label>${escapeHtml(t("Settings.ServerUrl.Name"))}</label><input type="text" name="serverUrl" value="${value("serverUrl")}"${dis}></div>` +
      `<div class="form-group"><label>${escapeHtml(t("Settings.Room.Name"))}</label><input type="text" name="room" value="${value("room")}"${dis}></div>` +
      `<div class="form-group"><label>${escapeHtml(t("Settings.Token.Name"))}</label><input type="password" name="token" autocomplete="off" spellcheck="false" placeholder="${escapeHtml(t(mod.settings.token() ? "TokenSaved" : "TokenNone"))}"></div>` +
      `<p class="hint">${escapeHtml(t("Settings.Token.Hint"))}</p>` +
      `<p><button type="button" data-vtt-test>${escapeHtml(t("Test.Button"))}</button></p>` +
      `<p class="vtt-sync-test-result" aria-live="polite"></p></div>`;
    const read = (root) => {
      const v = (k) => root?.querySelector(`[name="${k}"]`)?.value?.trim() ?? "";
      const out = { token: v("token") || mod.settings.token() };
      if (gm) Object.assign(out, { serverUrl: v("serverUrl"), room: v("room") });
      return out;
    };
    return dialog({
      title: t("Menu.Title"),
      content,
      ok: t("Menu.Save"),
      onRender: (root) => {
        /** @type {HTMLElement} */
        const out = root?.querySelector(".vtt-sync-test-result");
        root?.querySelector("[data-vtt-test]")?.addEventListener("click", async () => {
          out.textContent = t("Test.running");
          const r = await mod.connection.test(read(root));
          const url = mod.connection.serverUrl();
          out.textContent = t(`Test.${r.code}`, { detail: r.detail ?? "", role: r.role ?? "", user: r.user ?? "", url, https: url.replace(/^ws/i, "http"), origin: mod.connection.pageOrigin() });
          out.dataset.code = r.code;
        });
      },
      onOk: async (root) => {
        const values = read(root);
        const s = mod.game.settings;
        if (gm) {
          if (values.serverUrl !== mod.settings.get("serverUrl")) await s.set("vtt-sync", "serverUrl", values.serverUrl);
          if (values.room !== mod.settings.get("room")) await s.set("vtt-sync", "room", values.room);
        }
        await mod.settings.setToken(values.token);
        return values;
      },
    });
  }

  return {
    askMaxima,
    connectionDialog,
    MenuClass: menuClass(mod.env, connectionDialog),
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
    status(status, detail) {
      if (!indicator) return;
      indicator.classList.remove(...STATUSES);
      indicator.classList.add("vtt-sync-dot", status);
      indicator.textContent = `vtt-sync: ${t(`Status.${status}`)}`;
      indicator.title = detail || "";
    },
    /** Redraw the open panels in place (the system's sheet is not re-rendered). */
    refresh() {
      for (const panel of document.querySelectorAll(/** @type {"section"} */ (".vtt-sync-panel[data-actor-uuid]"))) {
        const actor = mod.env.fromUuidSync?.(panel.dataset.actorUuid);
        if (actor) fillPanel(panel, actor);
      }
    },
  };
}
