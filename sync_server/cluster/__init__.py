"""Several nodes on one database: who serves a room.

  leases          leases with fencing (PostgreSQL), and the single-node case
  sqlite_leases   the same in the SQLite file, for workers sharing it

The lease keeper that renews them and drops lost rooms is the room host's
(`sync_server.hosting.rooms`).
"""
