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


# Numbers in the close codes' ranges that are no close code: limits.py's
# limits (each a named constant) and the contracts' dedup window (1000
# versions).
NOT_CLOSE_CODES = {"sync_server/core/limits.py", "sync_server/testing/contracts/storage.py"}


def test_close_codes_are_written_in_the_protocol_module_only() -> None:
    """Every close code the server and the Python client send, expect or
    report is a name of wire/protocol.py (RFC 6455's own included): no
    module writes 1000-1015 or 4000-4999 as a number."""
    import ast

    root = Path(__file__).resolve().parents[1]
    found = []
    for pkg in ("sync_server", "client_stub", "vtt_sync"):
        for path in sorted((root / pkg).rglob("*.py")):
            rel = str(path.relative_to(root))
            if rel == "sync_server/wire/protocol.py" or rel in NOT_CLOSE_CODES:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not (isinstance(node, ast.Constant) and type(node.value) is int):
                    continue
                if 1000 <= node.value <= 1015 or 4000 <= node.value <= 4999:
                    found.append(f"{rel}:{node.lineno}: {node.value}")
    assert found == []
