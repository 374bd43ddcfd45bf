"""Property-based API testing against the OpenAPI document (schemathesis):
requests generated from /api/v1/openapi.json, valid ones and invalid ones,
sent as the GM and as a player to a real room over real HTTP, never get a
5xx, and every answer (status, content type, headers, body) is one the
document describes. Bounded: a few dozen examples per operation.

The event stream is left out (it never ends); test_http_api.py tests it."""

from __future__ import annotations

import asyncio
from typing import Any

import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode, checks

from sync_server.hosting import apidoc
from tests.helpers.server import create_table, running_server

EXAMPLES = 20  # per operation and mode: seconds in all, not minutes
NOT_GENERATED = ("streamEvents",)
CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_headers_conformance,
    checks.response_schema_conformance,
]


def explore(base_url: str, room: str, tokens: dict[str, str]) -> dict[int, int]:
    """Run every operation's generated requests; returns the statuses seen."""
    schema = schemathesis.openapi.from_dict(apidoc.openapi())
    seen: dict[int, int] = {}
    for found in schema.get_all_operations():
        operation = found.ok()
        if operation.definition.raw.get("operationId") in NOT_GENERATED:
            continue
        modes = [GenerationMode.POSITIVE]
        if operation.path_parameters:  # something to break: a negative mode too
            modes.append(GenerationMode.NEGATIVE)
        for mode in modes:

            @given(case=operation.as_strategy(generation_mode=mode))
            @settings(
                max_examples=EXAMPLES,
                deadline=None,
                database=None,
                suppress_health_check=list(HealthCheck),
            )
            def requests_get_described_answers(case: Any) -> None:
                if "room" in (case.path_parameters or {}):
                    case.path_parameters["room"] = room  # a real room: the rules answer
                for who in ("gm", "p1"):
                    headers = {"Authorization": f"Bearer {tokens[who]}"}
                    response = case.call(base_url=base_url, headers=headers)
                    seen[response.status_code] = seen.get(response.status_code, 0) + 1
                    case.validate_response(response, checks=CHECKS, headers=headers)

            requests_get_described_answers()
    return seen


async def test_generated_requests_never_get_a_5xx_and_answers_match_the_document(
    tmp_path,
) -> None:
    # Without the address's allowance of refused requests: hundreds of them
    # are generated, faster than it refills (5 a second, burst 20) on a
    # quick machine, and past it every operation would only see 429s, which
    # this test would then explore instead of the operations' answers (the
    # allowance is tested in test_http_api.py, the 429 of every route too).
    async with running_server(tmp_path, hello_failure_rate=None) as srv:
        t = await create_table(srv.url)
        # the server runs on this loop; the generated requests in a thread
        seen = await asyncio.to_thread(explore, srv.http_url, t.room, t.tokens)
    assert not any(status >= 500 for status in seen)
    assert seen.get(200) and seen.get(400)  # accepted and refused ones were generated
