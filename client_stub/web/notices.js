// Notices and questions shared by the table page (app.js) and the admin page
// (admin.js): toasts over the sticky top bar, and a modal confirmation.

import { $, el } from "./dom.js";

// Toasts sit over the top bar (sticky; it holds nothing to click), one line
// each, as many as fit in its height (the oldest go first), and go soon.
export const TOAST_MS = { ok: 2500, error: 6000 };

/** A short notice: `kind` "ok" or "error"; `code` kept as data-code. */
export function toast(kind, title, message, code = null) {
  const box = el("div", `toast ${kind}`);
  box.setAttribute("role", kind === "error" ? "alert" : "status");
  if (code) box.dataset.code = code;
  box.title = message ? `${title}: ${message}` : title; // the whole text, when cut
  box.append(el("strong", "toast-title", title));
  if (message) box.append(el("span", "toast-msg", message));
  box.addEventListener("click", () => box.remove());
  const area = $("#errors");
  area.style.height = `${$("#topbar").getBoundingClientRect().height}px`;
  area.prepend(box);
  while (area.children.length > 1 && area.scrollHeight > area.clientHeight) area.lastElementChild.remove();
  setTimeout(() => box.remove(), TOAST_MS[kind] ?? TOAST_MS.error);
}

/** A modal question (the page's <dialog id="confirm">); resolves true when
 * confirmed. `lines` are shown as a list; `focus` is the button focused
 * first ("ok", or "cancel" for what cannot be taken back). */
export function confirmDialog(title, lines, okLabel, focus = "ok") {
  const dialog = $("#confirm");
  $("#confirm-title").textContent = title;
  $("#confirm-body").replaceChildren(...lines.map((line) => el("li", null, line)));
  $("#confirm-ok").textContent = okLabel;
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.returnValue = "";
    dialog.showModal();
    $(focus === "cancel" ? "#confirm-cancel" : "#confirm-ok").focus();
  });
}
