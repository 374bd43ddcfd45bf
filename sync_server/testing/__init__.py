"""Testing helpers shipped with the product (as trio ships `trio.testing`):
what the project's tests and benchmarks use, and what a module author needs
to test against a real server.

  server    an in-process server on port 0 (`running_server`), a raw
            protocol client with a mirror (`connect`, `connect_admin`), a
            ready table (`create_table`), a server in a child process
            (`start_subprocess_server`)

  contracts the storage contract (`check_storage`): every check a
            `Storage` backend must pass; the lease contract
            (`check_leases`, on a `LeaseWorld` of nodes sharing a
            database): every check a cluster `Leases` backend must pass;
            the bus contract (`check_bus`); for third-party backends too
            (a package: storage, leases, bus)

The rules engine's own helpers (a scripted-dice table, sample sheets) are in
`rules.testing`; the fake clock is `sync_server.clock.FakeClock` (with trio's
autojump: `FakeClock(autojump_threshold=0)`).
"""
