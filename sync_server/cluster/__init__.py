"""Several nodes on one database: who serves a room.

  leases          leases with fencing (PostgreSQL), and the single-node case
  sqlite_leases   the same in the SQLite file, for workers sharing it

`leases.LeaseKeeper` renews the claims; the server hands the rooms it
reports lost to the directory (`sync_server.hosting.rooms`), which drops them.
"""
