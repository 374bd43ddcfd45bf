// What the module reads of the vtt-sync server (docs/protocol.md: the
// room's state as a viewer sees it, patches, affordances) and the
// client's interface (client_stub/web/vtt-sync-client.js, copied at build:
// built/vtt-sync-client.d.ts declares the module the scripts import).
export {};

declare global {
  namespace VttSync {
    /** A reason a command cannot be sent now: a sentence key and its values. */
    interface Why {
      key: string;
      [value: string]: unknown;
    }

    /** An affordance (docs/protocol.md, "What each viewer may do"). */
    interface Offer {
      args?: Record<string, unknown>;
      why?: Why;
      choices?: Record<string, unknown[]>;
      refused?: Record<string, Record<string, Why>>;
      free?: string[];
      cost?: { pp?: number };
    }

    interface UndoOffer {
      v?: number;
      op?: string;
      by?: string;
      why?: Why;
    }

    interface Affordances {
      chars?: Record<string, Record<string, Offer | undefined> | undefined>;
      room?: Record<string, Offer | undefined>;
      undo?: UndoOffer;
    }

    /** A character as the viewer sees it (docs/protocol.md, "State"). */
    interface Character {
      name: string;
      owner?: string | null;
      level: number;
      pv: number;
      pv_max: number;
      pe: number;
      pe_max: number;
      /** pe_max before ability damage (A2), when it differs. */
      pe_max_base?: number;
      pp: number;
      pp_max: number;
      condition: string;
      nonlethal?: boolean;
      ability_damage?: Record<string, number>;
      activity?: { kind: string } | null;
      healer?: string | null;
    }

    interface Combat {
      order: string[];
      turn: number;
      round: number;
    }

    interface User {
      name?: string;
      role: string;
    }

    /** The room as this viewer sees it. */
    interface RoomState {
      clock: number;
      combat: Combat | null;
      characters: Record<string, Character | undefined>;
      users?: Record<string, User | undefined>;
      affordances?: Affordances;
    }

    /** A rule event of a patch (docs/operations.md, "Events"). */
    interface Event {
      kind: string;
      char?: string;
      [field: string]: unknown;
    }

    interface Patch {
      v: number;
      id?: string;
      by?: string;
      events?: Event[];
    }

    interface Welcome {
      role: string;
      user: string;
      v: number;
    }

    interface Ack {
      v?: number;
      result?: unknown;
    }

    type Status = "idle" | "connecting" | "connected" | "disconnected" | "failed" | "closed";

    interface CommandOptions {
      id?: string | null;
      expect?: number | null;
      timeout?: number | null;
    }

    interface ClientOptions {
      url: string;
      token: string;
      room?: string | null;
      reconnect?: boolean;
      backoffInitial?: number;
      backoffMax?: number;
      helloTimeout?: number;
      WebSocketImpl?: WebSocketClass;
    }

    type WebSocketClass = new (url: string | URL, protocols?: string | string[]) => WebSocket;

    interface ClientEvents {
      status: [status: Status, detail: string];
      patch: [patch: Patch];
      welcome: [frame: Welcome];
      state: [state: RoomState, v: number];
    }

    /** The client's members the module uses (types.test.mjs checks each
     * exists on the real VttSyncClient). */
    interface Client {
      readonly url: string;
      status: Status;
      role: string | null;
      user: string | null;
      state: RoomState | null;
      version: number | null;
      connections: number;
      readonly connected: boolean;
      on<K extends keyof ClientEvents>(type: K, fn: (...args: ClientEvents[K]) => void): unknown;
      connect(): Promise<unknown>;
      close(): void;
      command(op: string, args?: object, opts?: CommandOptions): Promise<Ack>;
    }

    type ClientClass = new (opts: ClientOptions) => Client;

    /** A refused command (CommandError) or a final failure (ConnectionFailed). */
    interface ClientError extends Error {
      code?: string;
      serverMessage?: string;
      closeCode?: number | null;
      op?: string;
    }
  }
}
