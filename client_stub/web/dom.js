// DOM helpers shared by the pages' modules (the table page and the admin page).

/** The first element matching `sel` under `root` (untyped: the page's
 * elements are of many kinds, each used as what it is).
 * @param {string} sel
 * @param {ParentNode} [root]
 * @returns {any} */
export const $ = (sel, root = document) => root.querySelector(sel);

/** Every element matching `sel` under `root`, as an array.
 * @param {string} sel
 * @param {ParentNode} [root]
 * @returns {any[]} */
export const $$ = (sel, root = document) => [...root.querySelectorAll(sel)];

/** A new element with a class and a text (never innerHTML). */
export function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = text;
  return node;
}
