// The errors the module handles, as one shape.
/** An error as the client makes them (CommandError: `code`,
 * `serverMessage`; ConnectionFailed: `closeCode`), or any thrown value as one.
 * @param {unknown} err @returns {VttSync.ClientError} */
export function asClientError(err) {
  return err instanceof Error ? err : new Error(String(err));
}
