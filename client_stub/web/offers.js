// The server's offers (affordances) as controls: a button shown for each
// action offered, disabled with its reason when it cannot be done now; a
// <select> of an action's choices; the characters whose action names a
// patient.

import { affordances, byTableOrder, page } from "./page.js";

/** Show a button for an offered action (disabled, with its reason, when not now). */
export function offerButton(btn, entry) {
  if (!btn) return;
  if (btn.dataset.title === undefined) btn.dataset.title = btn.title || "";
  btn.hidden = !entry;
  btn.disabled = !!entry?.why;
  if (entry?.why) {
    btn.dataset.why = entry.why.key;
    btn.title = page.eventText.reason(entry.why);
  } else {
    delete btn.dataset.why;
    btn.title = btn.dataset.title;
  }
}

/** A <select> of an action's fixed choices (a rest's kind): refused ones disabled, with why. */
export function offerChoices(select, entry, arg) {
  const refused = entry?.refused?.[arg] ?? {};
  select.hidden = !entry || !!entry.why;
  for (const option of select.options) {
    const why = refused[option.value];
    option.disabled = !!why;
    option.title = why ? page.eventText.reason(why) : "";
  }
  if (select.selectedOptions[0]?.disabled) {
    const first = [...select.options].find((o) => !o.disabled);
    if (first) select.value = first.value;
  }
}

/** The characters whose `op` (first aid, tend) offers `patient` now, in table order. */
export function offering(op, patient, state) {
  return Object.entries(affordances().chars ?? {})
    .filter(([, ops]) => ops[op]?.choices?.patient?.includes(patient))
    .map(([cid]) => [cid, state.characters[cid]])
    .filter(([, c]) => c)
    .sort(byTableOrder);
}

// Refill a <select> of characters only when its options change (keeps the choice).
export function fillPicker(select, entries) {
  const keep = select.value;
  const wanted = entries.map(([cid]) => cid).join(",");
  if (select.dataset.options !== wanted) {
    select.replaceChildren(...entries.map(([cid, ch]) => new Option(ch.name, cid)));
    select.dataset.options = wanted;
    if (entries.some(([cid]) => cid === keep)) select.value = keep;
  }
}
