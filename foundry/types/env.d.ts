// The Foundry globals the module reads through its `env` (main.mjs passes
// globalThis; the tests a stand-in), typed with foundry-vtt-types v12's
// declarations, so that tsc --checkJs checks hook names, their arguments and
// the document methods the module calls.
export {};

declare global {
  interface VttSyncEnv {
    Hooks: typeof Hooks;
    game: Game;
    ui: typeof ui;
    CONFIG: typeof CONFIG;
    Actor: typeof Actor;
    ChatMessage: typeof ChatMessage;
    Dialog?: typeof Dialog;
    foundry?: typeof foundry;
    fromUuidSync?: typeof fromUuidSync;
    WebSocket?: typeof WebSocket;
    location?: Location;
    localStorage?: Storage;
  }
}

// The module's settings and flags, declared as foundry-vtt-types asks
// modules to (declaration merging into SettingConfig and FlagConfig).
declare global {
  interface SettingConfig {
    "vtt-sync.serverUrl": string;
    "vtt-sync.room": string;
    "vtt-sync.tokens": Record<string, string>;
    "vtt-sync.redirectHosts": string;
    "vtt-sync.chatMessages": boolean;
    "vtt-sync.clock": { room?: string; offset?: number };
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
