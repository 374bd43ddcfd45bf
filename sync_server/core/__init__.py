"""The sans-I/O cores of the server: plain data in, decisions out. No asyncio,
no websockets, no socket (tests/test_layering.py checks it).

  room       a room's state machine: its face (take, evaluate_batch, stored,
             failed), evaluate, commit, rollback, dedup; assembled from
             commands (one command's evaluation) and reads (join, sync,
             history, views)
  batch      a batch's phases, as one table; the open batch
  inputs     what the host hands the room core (CommandIn, the log's undo target)
  outputs    what it hands back: the steps, the outputs, each command's Decision
  afford     the affordance cache: what each connected viewer may do, kept current
  patch_view how one patch looks to each viewer
  recent     a room's recent patches in memory (pickled: the collector's passes)
  session    a session's frame handling and hello checks
  auth       tokens: generation, hashes, comparison, the admin token
  ratelimit  the token bucket (the time is passed in)
  limits     every limit, with its reason; the `Limits` object

The asyncio glue around them (`sync_server.hosting`) does every I/O.
"""
