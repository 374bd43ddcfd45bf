// The module's dialogs: the settings menu (the connection's settings and
// its test), and the PE/PP maxima asked when linking an actor of a system
// that has none. DialogV2 on v13 (and v12, which has it too), v12's Dialog
// when there is no DialogV2.

import { escapeHtml, num } from "./html.mjs";
import { MODULE_ID } from "./names.mjs";

/** @typedef {import("./module.mjs").VttSyncModule} VttSyncModule */
/** @typedef {import("./actor-data.mjs").Maxima} Maxima */
/** @typedef {(key: string, data?: Record<string, unknown>) => string} Texts */

/** An element, or what a render hook passes (jQuery in AppV1, an element
 * in AppV2), as an element. @param {unknown} html @returns {Element | null} */
export function element(html) {
  if (isElement(html)) return html;
  if (typeof html === "object" && html !== null && 0 in html) {
    const first = Reflect.get(html, 0);
    return isElement(first) ? first : null;
  }
  return null;
}

/** @param {unknown} v @returns {v is Element} */
function isElement(v) {
  return typeof v === "object" && v !== null && "querySelector" in v && typeof v.querySelector === "function";
}

/** The text of an input of `root`, trimmed. @param {Element | null} root @param {string} name */
function inputValue(root, name) {
  const el = root?.querySelector(`[name="${name}"]`);
  return el && "value" in el && typeof el.value === "string" ? el.value.trim() : "";
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
 * @param {VttSyncEnv} env @param {() => void} open
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

/**
 * @typedef {object} DialogSpec
 * @property {string} title
 * @property {string} content the dialog's HTML (escaped by the caller)
 * @property {string} ok the OK button's label
 * @property {(root: Element | null) => unknown} onOk the value the dialog resolves with
 * @property {(root: Element | null) => void} [onRender]
 */

/** A dialog with one OK button: resolves with onOk(root)'s value, or null
 * when closed. @param {VttSyncEnv} env @param {DialogSpec} spec @returns {Promise<unknown>} */
export function dialog(env, { title, content, ok, onOk, onRender }) {
  const V2 = env.foundry?.applications?.api?.DialogV2;
  return new Promise((resolve) => {
    let done = false;
    /** @param {unknown} v */
    const finish = (v) => {
      if (!done) resolve(v);
      done = true;
    };
    if (V2) {
      const d = new V2({
        window: { title },
        content,
        // The callback's third argument is the dialog's element (DialogV2 ButtonCallback).
        buttons: [{ action: "ok", label: ok, default: true, callback: async (event, button, el) => finish(onOk(el)) }],
      });
      d.addEventListener("close", () => finish(null));
      Promise.resolve(d.render({ force: true })).then(() => onRender?.(d.element));
    } else if (env.Dialog) {
      new env.Dialog({
        title,
        content,
        buttons: { ok: { label: ok, callback: (html) => finish(onOk(element(html))) } },
        default: "ok",
        render: (html) => onRender?.(element(html)),
        close: () => finish(null),
      }).render(true);
    } else {
      finish(null);
    }
  });
}

/** Linking an actor of a system without PE/PP: the GM confirms the
 * proposed maxima (or edits them); null when cancelled.
 * @param {VttSyncEnv} env @param {Texts} t @param {Actor.Implementation} actor @param {Maxima} proposal
 * @param {Record<string, string>} labels @returns {Promise<Maxima | null>} */
export async function askMaxima(env, t, actor, proposal, labels) {
  /** @param {"pe_max" | "pp_max"} key @param {string} label */
  const field = (key, label) =>
    `<div class="form-group"><label>${escapeHtml(label)}</label>` +
    `<input type="number" min="0" step="1" name="${key}" value="${num(proposal[key])}"></div>`;
  const content =
    `<p>${escapeHtml(t("MaximaAsk", { name: actor.name }))}</p>` +
    ("pe_max" in proposal ? field("pe_max", t("PeMax", labels)) : "") +
    ("pp_max" in proposal ? field("pp_max", t("PpMax", labels)) : "");
  /** @type {Maxima | null} */
  let chosen = null;
  await dialog(env, {
    title: t("MaximaTitle"),
    content,
    ok: t("Link"),
    onOk: (root) => {
      /** @type {Maxima} */
      const out = {};
      for (const key of /** @type {const} */ (["pe_max", "pp_max"])) {
        if (!(key in proposal)) continue;
        const v = Number(inputValue(root, key));
        out[key] = Number.isFinite(v) ? Math.max(0, Math.floor(v)) : proposal[key];
      }
      chosen = out;
      return out;
    },
  });
  return chosen;
}

/** The settings menu: the connection's settings and a test that says what
 * is wrong. The token field is a password field, left empty (the saved
 * token is never shown); empty keeps the saved one. The URL and the room
 * are the GM's (disabled for a player). @param {VttSyncModule} mod */
export function connectionDialog(mod) {
  /** @type {Texts} */
  const t = (key, data) => mod.t(key, data);
  const gm = Boolean(mod.game.user?.isGM);
  /** @param {"serverUrl" | "room"} k */
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
  /** @param {Element | null} root @returns {import("./connection.mjs").TestValues} */
  const read = (root) => ({
    token: inputValue(root, "token") || mod.settings.token(),
    ...(gm ? { serverUrl: inputValue(root, "serverUrl"), room: inputValue(root, "room") } : {}),
  });
  return dialog(mod.env, {
    title: t("Menu.Title"),
    content,
    ok: t("Menu.Save"),
    onRender: (root) => {
      const out = root?.querySelector(".vtt-sync-test-result");
      root?.querySelector("[data-vtt-test]")?.addEventListener("click", async () => {
        if (!out) return;
        out.textContent = t("Test.running");
        const r = await mod.connection.test(read(root));
        const url = mod.connection.serverUrl();
        const https = url.replace(/^ws/i, "http");
        const origin = mod.connection.pageOrigin();
        out.textContent = t(`Test.${r.code}`, { detail: r.detail ?? "", role: r.role ?? "", user: r.user ?? "", url, https, origin });
        out.setAttribute("data-code", r.code);
      });
    },
    onOk: async (root) => {
      const values = read(root);
      const s = mod.game.settings;
      if (gm && s) {
        if (values.serverUrl !== mod.settings.get("serverUrl")) await s.set(MODULE_ID, "serverUrl", values.serverUrl ?? "");
        if (values.room !== mod.settings.get("room")) await s.set(MODULE_ID, "room", values.room ?? "");
      }
      await mod.settings.setToken(values.token ?? "");
      return values;
    },
  });
}
