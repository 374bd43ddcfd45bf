// Text from the server (names, messages, numbers) is never HTML: every value
// that goes into markup (the sheet panel, notifications, chat messages) is
// escaped here, and numbers are written as numbers. A hostile server, or an
// imported room file, must not run script in any Foundry client.

/** @type {Record<string, string>} */
const ESC = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

/** Text as HTML that shows it. @param {unknown} text */
export function escapeHtml(text) {
  return String(text ?? "").replace(/[&<>"']/g, (c) => ESC[c]);
}

/** A number as text: an integer, or "?" for anything that is not a finite number.
 * @param {unknown} value */
export function num(value) {
  const n = typeof value === "number" ? value : Number.NaN;
  return Number.isFinite(n) ? String(Math.trunc(n)) : "?";
}
