// The Foundry globals the module reads through its `env` (main.mjs passes
// globalThis; the tests a stand-in), typed with foundry-vtt-types v12's
// declarations, so that tsc --checkJs checks hook names, their arguments and
// the document methods the module calls.
export {};

declare global {
  interface VttSyncEnv {
    Hooks: typeof Hooks;
    game: typeof game;
    ui: typeof ui;
    CONFIG: typeof CONFIG;
    Actor: typeof Actor;
    ChatMessage: typeof ChatMessage;
    Dialog?: typeof Dialog;
    foundry?: typeof foundry;
    WebSocket?: typeof WebSocket;
    location?: Location;
    localStorage?: Storage;
  }
}

// The module's settings, flags and API, declared as foundry-vtt-types asks
// modules to (declaration merging into SettingConfig, FlagConfig and
// ModuleConfig: game.modules.get("vtt-sync").api).
declare global {
  interface ModuleConfig {
    "vtt-sync": { api: ReturnType<import("../scripts/module.mjs").VttSyncModule["api"]> };
  }

  interface SettingConfig {
    "vtt-sync.serverUrl": string;
    "vtt-sync.room": string;
    "vtt-sync.tokens": Record<string, string>;
    "vtt-sync.redirectHosts": string;
    "vtt-sync.chatMessages": boolean;
    "vtt-sync.clock": { room?: string; offset?: number };
    /** pf1's health variants (pf1 10.8, registered by pf1): only read. */
    "pf1.healthConfig": object;
  }
  interface FlagConfig {
    Actor: {
      "vtt-sync": {
        room?: string | null;
        char?: string | null;
        noSync?: boolean;
        pv?: number;
        pe?: number;
        pp?: number;
        pv_max?: number;
        pe_max?: number;
        pp_max?: number;
        medicine?: number;
      };
    };
    User: { "vtt-sync": { login?: { room: string; user: string; role?: string } | null } };
    Combat: { "vtt-sync": { room?: string | null; roundOffset?: number } };
    ChatMessage: { "vtt-sync": { room: string; v: number; kind: string } };
  }
}
