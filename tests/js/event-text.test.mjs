// The page's sentences (client_stub/web/event-text.js) are the Python
// client's (client_stub/events.py): both read events.json, and both say
// each case of tests/vectors/event_sentences.json word for word (the Python
// side: tests/client/test_events.py). Among them, what a rule did: L4's
// raise to 10, only the abilities a rest restored, an undo's command.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";

import { EventText, Names } from "../../client_stub/web/event-text.js";

const read = (path) => JSON.parse(readFileSync(new URL(path, import.meta.url), "utf8"));
const texts = read("../../client_stub/web/events.json");
const vectors = read("../vectors/event_sentences.json");

test("every case reads as the Python client says it", () => {
  const names = new Names();
  names.update(vectors.names);
  assert.ok(vectors.cases.length >= 10);
  for (const c of vectors.cases) {
    const history = (v) => c.history?.[String(v)] ?? null;
    assert.equal(new EventText(texts, names, history).sentence(c.event), c.said, c.about);
  }
});

test("a join names only what is there; an each names every entry, in order", () => {
  const rule = [
    "got ",
    {
      join: [{ if: "a", then: "{a} A" }, { if: "b", then: "{b} B" }, { each: "more", then: "{value} {key}" }],
      none: "nothing",
    },
  ];
  const say = (ev) => new EventText({ ...texts, events: { x: rule } }).sentence({ kind: "x", ...ev });
  assert.equal(say({ a: 1, b: 0 }), "got 1 A");
  assert.equal(say({ a: 1, b: 2 }), "got 1 A and 2 B");
  assert.equal(say({ a: 1, b: 2, more: { x: 3, y: 4 } }), "got 1 A, 2 B, 3 x and 4 y");
  assert.equal(say({ more: { x: 3 } }), "got 3 x");
  assert.equal(say({}), "got nothing");
});
