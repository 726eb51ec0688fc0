"""schemathesis against the served OpenAPI document: requests generated from it for every
operation (valid and invalid ones, a bounded number each, with a made-up and with a real agent
name); every answer conforms to the document (status code, content type, body schema, each SSE
event too) and none is a server error. The default run sends a few cases per operation and
kind, `pytest --long` many more (tests/long_run.py).

(schemathesis' pytest plugin does not run under pytest 9, so the operations' Hypothesis
strategies are driven directly.)"""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from long_run import examples
from test_server import LiveServer, served

EXAMPLES = examples(quick=5, long=100)


server = served("fuzz")


def nothing_invalid(operation: Any) -> bool:
    """No body and only free-form path parameters (any string is a valid one): there is no
    invalid request to send (schemathesis would search for one at length, then give up)."""
    return not operation.body and all(
        parameter.definition["in"] == "path"
        and parameter.definition["schema"] == {"type": "string"}
        for parameter in operation.iter_parameters()
    )


@pytest.mark.long
@pytest.mark.parametrize(
    "mode", [schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE]
)
def test_no_request_makes_the_server_fail(
    server: LiveServer, mode: schemathesis.GenerationMode
) -> None:
    schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert (len(operations), len(schema.raw_schema["paths"])) == (41, 39)  # admin: 2 paths x2
    if mode is schemathesis.GenerationMode.NEGATIVE:
        skipped = [op.label for op in operations if nothing_invalid(op)]
        assert len(skipped) == 12, skipped  # GET /health, GET /lifecycle, ...
        operations = [op for op in operations if not nothing_invalid(op)]
    operations = [op for op in operations if op.path != "/lifecycle"]  # (a stream without end)
    sent: dict[str, int] = {}
    for operation in operations:
        names = [None]
        if "{name}" in operation.path:
            names.append({"name": "shop"})
        for fixed in names:

            @given(case=operation.as_strategy(mode, path_parameters=fixed))
            @settings(
                max_examples=EXAMPLES,
                deadline=None,
                derandomize=True,
                database=None,
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            def check(case: schemathesis.Case) -> None:
                sent[case.operation.label] = sent.get(case.operation.label, 0) + 1
                case.call_and_validate(
                    checks=[
                        not_a_server_error,
                        status_code_conformance,
                        content_type_conformance,
                        response_schema_conformance,
                    ]
                )

            check()  # raises Unsatisfiable when no case could be made
    assert sorted(sent) == sorted(op.label for op in operations)  # every operation was called
