"""Property-based fuzzing of the env server's OpenAPI schema with schemathesis, against a
real uvicorn server: whatever requests the schema admits (and, in negative mode, what
it does not), the server never answers 500 or above, and what it answers to valid
requests matches the schema it publishes.

Bounded: MAX_EXAMPLES per operation and mode (about 400 requests in all)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable

from serve_helpers import GUESS, served

schemathesis = pytest.importorskip("schemathesis")

pytestmark = pytest.mark.timeout(300)
MAX_EXAMPLES = 15


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    # Few sessions and a short idle time: fuzzing creates sessions it never closes.
    with served(GUESS, max_sessions=64, idle_timeout=5.0) as running:
        yield running


@pytest.mark.parametrize("mode", ["positive", "negative"])
def test_no_request_makes_the_server_fail(server: Any, mode: str) -> None:
    api = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
    generation = schemathesis.GenerationMode(mode)
    checks = [schemathesis.checks.not_a_server_error]
    if generation is schemathesis.GenerationMode.POSITIVE:
        checks += [
            schemathesis.checks.status_code_conformance,
            schemathesis.checks.content_type_conformance,
            schemathesis.checks.response_schema_conformance,
        ]
    operations = [result.ok() for result in api.get_all_operations()]
    assert len(operations) >= 14
    statuses: dict[str, set[int]] = {}
    accepted: list[str] = []

    def fuzzer(operation: Any) -> Any:
        @given(case=operation.as_strategy(generation_mode=generation))
        @settings(
            max_examples=MAX_EXAMPLES,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def fuzz(case: Any) -> None:
            response = case.call(timeout=60)
            statuses.setdefault(operation.label, set()).add(response.status_code)
            # OpenEnv's POST /reset takes no body at all (a fresh episode of the next task),
            # which schemathesis counts as a negative case of its optional body
            no_body = case.method == "POST" and case.path == "/reset" and _unset(case.body)
            if (
                generation is schemathesis.GenerationMode.NEGATIVE
                and response.status_code < 400
                and not no_body
            ):
                accepted.append(
                    f"{case.method} {case.formatted_path} {case.body!r:.300} "
                    f"{case.query!r:.200} -> {response.status_code}"
                )
            full = response.status_code == 503 and "server_full" in response.text
            assert response.status_code < 500 or full, (
                f"{case.method} {case.formatted_path} -> {response.status_code}: "
                f"{response.text[:500]}"
            )
            case.validate_response(response, checks=checks)

        return fuzz

    for operation in operations:
        try:
            fuzzer(operation)()
        except Unsatisfiable:  # nothing to negate (no parameters, no body): /create, /health
            assert generation is schemathesis.GenerationMode.NEGATIVE
    assert all(code < 500 or code == 503 for codes in statuses.values() for code in codes)
    if generation is schemathesis.GenerationMode.POSITIVE:
        assert len(statuses) == len(operations)  # every operation was reached
    else:
        assert not accepted, accepted  # every request outside the schema is refused


def _unset(body: Any) -> bool:
    return type(body).__name__ == "NotSet"  # schemathesis's "no body"
