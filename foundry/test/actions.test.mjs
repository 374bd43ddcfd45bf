// The sheet panel's buttons are what the server says each user may do now
// (`state.affordances`): against a real server, over a scripted game, the
// buttons shown are exactly the actions offered, and pressing them is never
// refused.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { availableActions } from "../scripts/actions.mjs";
import { connect, makeRoom, startServer, waitFor } from "./server.mjs";

let server;
before(async () => {
  server = await startServer();
});
after(async () => {
  await server?.stop();
});

const SHEET = {
  level: 3,
  pv_max: 20,
  pe_max: 5,
  pp_max: 6,
  abilities: { str: 10, dex: 14, con: 14, int: 10, wis: 12, cha: 8 },
  medicine: 5,
};

const label = (a) => `${a.op}${a.args.patient ? `:${a.args.patient}` : ""}${a.args.kind ? `:${a.args.kind}` : ""}`;

/** Every action the affordances offer for `id`'s sheet, by the test's own reading. */
function offered(state, id) {
  const out = [];
  for (const [cid, ops] of Object.entries(state.affordances.chars)) {
    for (const [op, entry] of Object.entries(ops)) {
      if (entry.why) continue;
      if (op === "untend") {
        if (cid === id || state.characters[cid]?.healer === id) out.push(`untend:${cid}`);
      } else if (cid !== id || !["first_aid", "tend", "stabilize", "stay_in_fight", "rest", "stop_rest"].includes(op)) {
        continue;
      } else if (op === "rest") {
        for (const kind of entry.choices.kind) out.push(`rest:${kind}`);
      } else if (entry.choices?.patient) {
        for (const p of entry.choices.patient) out.push(`${op}:${p}`);
      } else out.push(op);
    }
  }
  return out.sort();
}

test("the panel shows exactly the offered actions, and none of them is refused", async () => {
  const people = await makeRoom(server, "aff", ["Paul", "Zoe"]);
  const gm = await connect(server.url, people.gm.token, "aff");
  const add = async (name, owner, extra = {}) =>
    (await gm.command("add_character", { ...SHEET, name, owner, ...extra })).result.char;
  const aline = await add("Aline", people.Paul.user);
  const bruno = await add("Bruno", people.Paul.user, { pp_max: 2 });
  const chloe = await add("Chloe", people.Zoe.user, { shown: "status" });
  await add("Liche", null, { shown: "hidden" });
  const paul = await connect(server.url, people.Paul.token, "aff");
  const zoe = await connect(server.url, people.Zoe.token, "aff");
  const clients = { gm, paul, zoe };
  // A scripted game: each step changes the table, then every user presses
  // every button their panels show (as the sheets would), in turn.
  const steps = [
    () => gm.command("damage", { char: bruno, amount: 25 }), // dying
    () => gm.command("damage", { char: chloe, amount: 25 }),
    () => gm.command("heal", { char: chloe, amount: 0, stabilize: true }), // stable
    () => gm.command("advance_clock", { seconds: 6 }),
    () => gm.command("damage", { char: aline, amount: 25 }),
    () => gm.command("heal", { char: aline, amount: 3 }),
    () => gm.command("combat_start", { order: [aline, chloe] }),
    () => gm.command("combat_end", {}),
  ];
  let refusals = 0;
  let pressed = 0;
  for (const step of steps) {
    await step();
    for (const [who, c] of Object.entries(clients)) {
      await waitFor(() => c.version === gm.version, { what: `${who} in step` });
      for (const id of Object.keys(c.state.characters)) {
        const buttons = availableActions(c.state, id);
        assert.deepEqual(buttons.map(label).sort(), offered(c.state, id), `${who}'s panel for ${id}`);
      }
    }
    // Press one offered button per user (the first panel that has one).
    for (const c of Object.values(clients)) {
      const id = Object.keys(c.state.characters).find((cid) => availableActions(c.state, cid).length);
      if (!id) continue;
      const [action] = availableActions(c.state, id);
      pressed += 1;
      try {
        await c.command(action.op, action.args);
      } catch (err) {
        refusals += 1;
        assert.fail(`${action.op} ${JSON.stringify(action.args)} refused: ${err.code} ${err.serverMessage}`);
      }
      await waitFor(() => Object.values(clients).every((o) => o.version === c.version), { what: "the others" });
    }
  }
  assert.equal(refusals, 0);
  assert.ok(pressed >= steps.length, `pressed ${pressed}`);
  // Nothing of the hidden Liche in a player's affordances.
  assert.ok(!JSON.stringify(paul.state.affordances).includes("Liche"));
  for (const c of Object.values(clients)) c.close();
});

test("a state without affordances (an older server) shows no button", () => {
  assert.deepEqual(availableActions({ characters: { me: { name: "X" } } }, "me"), []);
});
