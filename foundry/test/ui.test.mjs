// The panel's HTML (the DOM wiring itself needs a real Foundry).
import assert from "node:assert/strict";
import { test } from "node:test";

import { escapeHtml, panelHtml, trackerHtml } from "../scripts/ui.mjs";

const t = (key, data) => (data ? `${key}(${Object.values(data).join(",")})` : key);

test("the panel shows the server's values, the actions as buttons, and escapes names", () => {
  const html = panelHtml(
    {
      status: "connected",
      linked: true,
      gm: false,
      id: "c1",
      char: { pv: 0, pv_max: 20, pe: 0, pe_max: 15, pp: 5, pp_max: 6, condition: "dying", activity: null },
      actions: [
        { op: "first_aid", args: { char: "c1", patient: "c2" }, key: "FirstAid", name: "<b>Bob</b>" },
      ],
      flagMaxima: null,
    },
    t,
  );
  assert.match(html, /PV 0\/20/);
  assert.match(html, /PP 5\/6/);
  assert.match(html, /class="vtt-sync-condition dying">Condition\.dying/);
  assert.match(
    html,
    /data-vtt-op="first_aid" data-vtt-args="\{&quot;char&quot;:&quot;c1&quot;,&quot;patient&quot;:&quot;c2&quot;\}"/,
  );
  assert.match(html, /Action\.FirstAid\(&lt;b&gt;Bob&lt;\/b&gt;\)/);
  assert.doesNotMatch(html, /<b>Bob/);
  assert.doesNotMatch(html, /data-vtt-gm/);
});

test("the GM's panel: link buttons, and the flag maxima for systems without PE/PP fields", () => {
  const html = panelHtml(
    {
      status: "off",
      linked: false,
      gm: true,
      id: null,
      char: null,
      actions: [],
      flagMaxima: { pe_max: 4, pp_max: 2, pe: true },
    },
    t,
  );
  assert.match(html, /data-vtt-gm="link">Link</);
  assert.match(html, /data-vtt-flag="pe_max" value="4"/);
  assert.match(html, /data-vtt-flag="pp_max" value="2"/);
  assert.match(trackerHtml(t), /data-vtt-tracker="resync"/);
  assert.equal(escapeHtml(`"'&`), "&quot;&#39;&amp;");
});

test("AppV1 sheets: the panel's place is the window's content, on the first render (whole window) and on re-renders (inner form only)", async () => {
  const { panelHost } = await import("../scripts/ui.mjs");
  // Just the DOM calls panelHost makes, on Foundry's AppV1 structure:
  // div.app.window-app > section.window-content > form.
  const node = (cls, children = []) => {
    const el = {
      cls,
      children,
      parent: null,
      matches: (sel) => sel === `.${cls}`,
      querySelector: (sel) => {
        for (const c of el.children) {
          if (c.matches(sel)) return c;
          const deep = c.querySelector(sel);
          if (deep) return deep;
        }
        return null;
      },
      closest: (sel) => (el.matches(sel) ? el : (el.parent?.closest(sel) ?? null)),
    };
    for (const c of children) c.parent = el;
    return el;
  };
  const form = node("sheet-form");
  const content = node("window-content", [form]);
  const win = node("window-app", [node("window-header"), content]);
  const app = { element: [win] }; // jQuery in AppV1
  assert.equal(panelHost(app, [win]), content); // first render: the whole window
  assert.equal(panelHost(app, [form]), content); // re-render: the inner form only
  assert.equal(panelHost({}, [form]), content); // no app.element: up from the form
  const v2 = node("application", [node("window-content")]);
  assert.equal(panelHost({ element: v2 }, v2), v2.children[0]); // AppV2: HTMLElements
});

test("the panel shows a nonlethal knock-out and the server's ability damage", () => {
  const html = panelHtml(
    {
      status: "connected",
      linked: true,
      gm: false,
      id: "c1",
      char: { pv: 0, pv_max: 20, pe: 0, pe_max: 15, pp: 5, pp_max: 6, condition: "stable", nonlethal: true, ability_damage: { str: 0, con: 4, wis: 2 } },
      actions: [],
      flagMaxima: null,
    },
    t,
  );
  assert.match(html, /class="vtt-sync-condition stable">Condition\.nonlethal</);
  assert.match(html, /AbilityDamage\(Con 4, Wis 2\)/);
});
