"""The asyncio side: it carries out what the cores decide, and does every I/O.

server       the composition root; graceful shutdown
config       the server's options, as one attrs class
rooms        the room host (queue, batch, store, publish) and the directory
sessions     one WebSocket connection, hello to close, with its narrow deps
admin        create_room / delete_room / import_room against the directory
bus          the room bus: a room's frames to its subscribers
registry     this process's sessions per room and user
outbox       one client's sending side, bounded in bytes
ws_fastpath  the one module touching websockets' internals (optional)
web          /healthz, /metrics, the page's files; HEAD, OPTIONS, CORS
admin_http   GET /admin/export (the admin token in a header)
tls          the TLS context, reloaded in place (SIGHUP)

The clock port they read time through is `sync_server.clock`, below every
package that waits or stamps.
"""
