// The vtt-sync hook recorder: a tiny Foundry module a maintainer with a
// licence enables once per Foundry/system version, walks the manual
// check-list (foundry/README.md), then downloads the trace from a console or
// a macro:
//
//   game.modules.get("vtt-sync-recorder").api.download()
//
// It records the hooks the vtt-sync module listens to (shape.mjs's HOOKS),
// each as its shapes (shape.mjs: no values, so no names or tokens), in the
// order this client saw them. Run it in every client of the session (GM,
// player, a second GM tab) and keep one file per client: their order per
// client is what foundry/test/trace.test.mjs compares.
import { HOOKS, entry } from "./shape.mjs";

const entries = [];
for (const hook of HOOKS) Hooks.on(hook, (...args) => void entries.push(entry(hook, args)));

Hooks.once("ready", () => {
  const mod = game.modules.get("vtt-sync-recorder");
  const trace = () => ({
    format: "vtt-sync-hook-trace/1",
    foundry: game.version,
    system: `${game.system.id} ${game.system.version}`,
    module: game.modules.get("vtt-sync")?.version ?? null,
    clients: { [`${game.user.isGM ? "gm" : "player"}:${game.user.id}`]: entries },
  });
  mod.api = {
    trace,
    download() {
      const blob = new Blob([JSON.stringify(trace(), null, 1)], { type: "application/json" });
      const a = document.createElement("a");
      a.href = URL.createObjectURL(blob);
      a.download = `vtt-sync-trace-${game.version}-${game.system.id}-${game.user.isGM ? "gm" : "player"}.json`;
      a.click();
    },
  };
});
