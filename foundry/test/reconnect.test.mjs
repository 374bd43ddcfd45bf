// The server goes away and comes back: the module tells the user once,
// keeps what was done meanwhile, and resumes where it was.
import assert from "node:assert/strict";
import { test } from "node:test";

import { Table, sfrpgSheet, serverSeconds } from "./harness.mjs";
import { startServer, waitFor } from "./server.mjs";

test("reconnection resumes: one notice, commands made meanwhile applied once, clocks equal", async () => {
  let server = await startServer();
  const { dir, port, admin } = server;
  const t = await new Table(server, { room: "again" }).open();
  try {
    const aline = await t.actor({
      name: "Aline",
      system: sfrpgSheet(),
      ownership: { default: 0, [t.playerUser]: 3 },
    });
    const gorgol = await t.actor({ name: "Gorgol", type: "npc", system: sfrpgSheet() });
    await t.gm.mod.sheets.link(t.gm.client.actor(aline));
    await t.gm.mod.sheets.link(t.gm.client.actor(gorgol));
    const [ca, cg] = [`fvtt-${aline}`, `fvtt-${gorgol}`];
    const combat = await t.startCombat([
      { actorId: aline, initiative: 20 },
      { actorId: gorgol, initiative: 10 },
    ]);
    const before = t.watcher.version;

    t.watcher.close();
    await server.stop({ keepData: true });
    await waitFor(() => t.all.every((tab) => tab.mod.status === "disconnected"), {
      what: "modules see the drop",
    });
    // Meanwhile, in Foundry: a turn ends, then an hour passes.
    await combat.nextTurn();
    await t.gm.game.time.advance(3600);
    await t.world.flush();
    // Several reconnection attempts fail while the server is down.
    await waitFor(() => t.gm.mod.client.connections === 1 && t.gm.mod.client._attempt >= 2, {
      what: "retries",
    });

    server = await startServer({ dataDir: dir, port, admin });
    t.server = server;
    await waitFor(() => t.all.every((tab) => tab.mod.status === "connected"), {
      timeout: 20_000,
      what: "reconnected",
    });
    t.watcher = null;
    const { connect } = await import("./server.mjs");
    t.watcher = await connect(server.url, t.people.gm.token, t.room);
    t.watcher.on("patch", (p) => t.seenPatches.push(p));
    await t.settle();

    assert.deepEqual(t.state.combat, { order: [ca, cg], turn: 1, round: 1 });
    assert.equal(t.state.clock, 3600);
    assert.equal(t.watcher.version, before + 2); // the end_turn and the advance, once each
    for (const tab of t.all) {
      assert.equal(serverSeconds(tab), 3600);
      assert.equal(tab.mod.client.version, t.watcher.version);
      const texts = tab.client.notifications.map((n) => n.text);
      assert.equal(texts.filter((x) => /lost the connection/.test(x)).length, 1);
      assert.equal(texts.filter((x) => /connected again/.test(x)).length, 1);
    }
    t.assertClean({ allow: [/lost the connection/] });
  } finally {
    t.close();
    await server.stop();
  }
});
