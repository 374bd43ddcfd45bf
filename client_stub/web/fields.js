// A field the server refuses is marked where it is, not only in a toast:
// `aria-invalid` on it and the server's words beside it (its
// `aria-describedby`), until it is changed. The server's argument checks
// name the argument first ("level must be between 1 and 40, got 99",
// "set.level ...", "abilities.str ...", "rolls[0] ...", "rolls.c4 ..."), and
// a sheet's invariants name the value ("cannot add Eve: pv 25 must be
// between 0 and pv_max 20"): `refusedArg` reads that name, and the sender
// says which of its fields holds it.

import { $$, el } from "./dom.js";
import { page } from "./page.js";

const ARG_FIRST = /^([A-Za-z_]\w*(?:\.\w+|\[\d+\])*) (must .*)$/;
const INVARIANT = /: ([a-z_]+) -?\d+ (must be .*)$/;

/** The argument a refusal's message names ({path, words}), or null. */
export function refusedArg(message) {
  const text = String(message ?? "");
  const first = ARG_FIRST.exec(text);
  if (first) return { path: first[1], words: first[2] };
  const inv = INVARIANT.exec(text);
  return inv ? { path: inv[1], words: inv[2] } : null;
}

/** Mark `input` as refused, with `words` beside it. */
export function markField(input, words) {
  clearField(input);
  const note = el("span", "field-error", words.replace(/^./, (c) => c.toUpperCase()));
  note.id = `field-error-${++page.fieldMarks}`;
  note.setAttribute("role", "alert");
  input.setAttribute("aria-invalid", "true");
  input.setAttribute("aria-describedby", note.id);
  input.after(note);
  input.addEventListener("input", () => clearField(input), { once: true });
  input.addEventListener("change", () => clearField(input), { once: true });
}

export function clearField(input) {
  if (input.getAttribute("aria-invalid") !== "true") return;
  const id = input.getAttribute("aria-describedby");
  if (id) document.getElementById(id)?.remove();
  input.removeAttribute("aria-invalid");
  input.removeAttribute("aria-describedby");
}

/** Clear every mark under `root` (a form opened again). */
export function clearFields(root) {
  for (const input of $$('[aria-invalid="true"]', root)) clearField(input);
}
