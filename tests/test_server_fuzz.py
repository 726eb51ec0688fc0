"""schemathesis against the served OpenAPI document: requests generated from it for every
operation (valid and invalid ones, a bounded number each, with a made-up and with a real agent
name); every answer conforms to the document (status code, content type, body schema, each SSE
event too) and none is a server error.

(schemathesis' pytest plugin does not run under pytest 9, so the operations' Hypothesis
strategies are driven directly.)"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from test_server import LiveServer, served

EXAMPLES = 20


server = served("fuzz")


@pytest.mark.parametrize(
    "mode", [schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE]
)
def test_no_request_makes_the_server_fail(
    server: LiveServer, mode: schemathesis.GenerationMode
) -> None:
    schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) == len(schema.raw_schema["paths"]) == 23  # one method each
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
                case.call_and_validate(
                    checks=[
                        not_a_server_error,
                        status_code_conformance,
                        content_type_conformance,
                        response_schema_conformance,
                    ]
                )

            try:
                check()
            except Unsatisfiable:  # nothing invalid to send (no parameters, no body)
                assert mode is schemathesis.GenerationMode.NEGATIVE, operation.label
