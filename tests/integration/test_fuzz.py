"""schemathesis against a real `durable-kafka serve` on the real broker, from /openapi.json.

Each operation of the document gets `FUZZ_EXAMPLES` generated requests of positive and of
negative data, each checked by every schemathesis check but `ignored_auth` (the adapter runs
without authentication here): no 5xx but a documented 503, every status documented, every error the
documented JSON body. A stateful run follows the document's links (create a bucket → create
a stream → append → read from its start) with the same checks. `make fuzz` runs it longer.
(schemathesis' own pytest plugin needs pytest internals that pytest 9 removed, so hypothesis
drives each operation's strategy here.)
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import ignored_auth, positive_data_acceptance
from schemathesis.specs.openapi.schemas import OpenApiSchema

from adapter.http.openapi import describe
from adapter.http.routes import table
from tests.adapter_process import running_adapter

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "10"))
# ignored_auth: the adapter runs without authentication here. positive_data_acceptance:
# requests valid for the document may still break a rule it cannot state (Stream-TTL with
# Stream-Expires-At, only some Producer-* headers, a stream that does not exist): 4xx is right.
EXCLUDED = [ignored_auth, positive_data_acceptance]
OPERATIONS = [
    pytest.param(method.upper(), path, mode, id=f"{method.upper()} {path} {mode.value}")
    for path, item in describe(table())["paths"].items()
    for method, operation in item.items()
    if method != "parameters"
    # Negative data needs something to make invalid: a parameter or a body.
    for mode in GenerationMode
    if mode is GenerationMode.POSITIVE
    or "parameters" in item
    or "parameters" in operation
    or "requestBody" in operation
]


@pytest.fixture(scope="module")
def base_url(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    home = tmp_path_factory.mktemp("fuzz")
    env = {
        "DURABLE_KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "DURABLE_KAFKA_TOPIC_PREFIX": f"fz{uuid.uuid4().hex[:10]}.",
        "DURABLE_KAFKA_COLD_DIR": str(home / "cold"),
        "DURABLE_KAFKA_LONG_POLL_TIMEOUT_MS": "200",
        "DURABLE_KAFKA_SSE_MAX_DURATION_MS": "1000",
        "DURABLE_KAFKA_PARTITIONS": "1",
    }
    with running_adapter(env, Path(home) / "adapter.log") as url:
        yield url


@pytest.fixture(scope="module")
def api_schema(base_url: str) -> OpenApiSchema:
    return schemathesis.openapi.from_url(f"{base_url}/openapi.json")


@pytest.mark.parametrize(("method", "path", "mode"), OPERATIONS)
def test_operation(
    api_schema: OpenApiSchema, base_url: str, method: str, path: str, mode: GenerationMode
) -> None:
    operation = api_schema[path][method]

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
        database=None,
    )
    def run(case: Any) -> None:
        case.call_and_validate(base_url=base_url, excluded_checks=EXCLUDED, timeout=30)

    run()


def test_create_append_read_workflow(api_schema: OpenApiSchema, base_url: str) -> None:
    """Scenarios chained by the document's OpenAPI links, each step checked as above."""
    links = api_schema.as_state_machine()

    class Workflow(links):  # type: ignore[misc, valid-type]
        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            return {"base_url": base_url, "timeout": 30}

        def validate_response(
            self, response: Any, case: Any, additional_checks: Any = None, **kwargs: Any
        ) -> None:
            case.validate_response(response, excluded_checks=EXCLUDED, transport_kwargs=kwargs)

    Workflow.run(
        settings=settings(
            max_examples=EXAMPLES,
            stateful_step_count=6,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
            database=None,
        )
    )
