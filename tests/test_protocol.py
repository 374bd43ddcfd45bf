"""The protocol is defined once (sync_server/wire/protocol.py); the vectors file
both test suites read is generated from it, and every Python user of the
protocol agrees with it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from client_stub import client, errors
from sync_server.wire import codec, protocol

VECTORS = Path(__file__).parent / "vectors" / "protocol.json"


def test_the_vectors_file_is_generated_from_the_protocol_module() -> None:
    """Regenerate with: python -m sync_server.wire.protocol > tests/vectors/protocol.json"""
    assert json.loads(VECTORS.read_text(encoding="utf-8")) == protocol.vectors()


def test_the_python_client_uses_the_protocols_names() -> None:
    v = protocol.vectors()
    assert v["subprotocols"] == client.SUBPROTOCOLS
    assert v["max_frame_bytes"] == client.MAX_FRAME
    assert sorted(errors.FINAL_CLOSE_CODES) == v["final_close_codes"]
    assert set(errors.COMMAND_ERRORS) == set(v["error_order"])
    assert (v["subprotocols"]["msgpack"], v["subprotocols"]["json"]) == codec.SUBPROTOCOLS


def test_the_vectors_are_printed_by_the_module() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "sync_server.wire.protocol"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(out.stdout) == protocol.vectors()
