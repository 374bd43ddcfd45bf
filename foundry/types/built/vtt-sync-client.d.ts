// The client as the built module holds it: build.py copies
// client_stub/web/vtt-sync-client.js to scripts/vtt-sync-client.js, which
// main.mjs imports. tsconfig's rootDirs merge this folder with scripts/ so
// that the import resolves here (the class's shape: vtt-sync.d.ts).
export declare const VttSyncClient: VttSync.ClientClass;
