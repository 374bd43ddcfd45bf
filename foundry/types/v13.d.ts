// The v13-only APIs the module uses, which foundry-vtt-types v12.331 (the
// version tsc checks against: the v13 package does not install here) does
// not declare. Each is copied in shape (not in code) from foundry-vtt-types
// v13.345.1, the file named beside it.
export {};

declare global {
  interface GameTime {
    /**
     * Directly set the world time (v13).
     * From src/foundry/client/helpers/time.d.mts (v13.345.1): `set(time, options)`.
     */
    set?(time: number, options?: object): Promise<number>;
  }

  namespace FoundryV13 {
    /**
     * The options of a world-time change as v13 passes them to the hook.
     * From src/foundry/client/hooks.d.mts (v13.345.1): `updateWorldTime(worldTime, delta, options, userId)`
     * (v12's declaration has the first two).
     */
    type UpdateWorldTime = (worldTime: number, delta: number, options: WorldTimeOptions | undefined, userId: string) => void;

    /** What the module reads of those options: its own tag. */
    interface WorldTimeOptions {
      vttSync?: boolean;
    }
  }
}
