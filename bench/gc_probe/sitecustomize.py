"""The garbage collector's passes in a benchmarked server (bench/server_bench.py
puts this directory on the server's PYTHONPATH, so Python imports it at
start-up): when VTT_BENCH_GC_LOG names a file, each pass appends a line
"<wall time> <generation> <seconds>" to it. A `gc.callbacks` hook costs two
clock reads per pass; the server's code is not changed."""

import os

_path = os.environ.get("VTT_BENCH_GC_LOG")
if _path:
    import gc
    import time

    _log = open(_path, "a", buffering=1)  # noqa: SIM115 (open for the process's life)
    _started = [0.0]

    def _probe(phase: str, info: dict) -> None:
        if phase == "start":
            _started[0] = time.perf_counter()
        else:
            took = time.perf_counter() - _started[0]
            _log.write(f"{time.time():.3f} {info['generation']} {took:.6f}\n")

    gc.callbacks.append(_probe)
