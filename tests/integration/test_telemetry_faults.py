"""When the workspace is down, slow, refuses or answers garbage, the approval request still goes
out on time and the card says so in one line; and the query is signed the way AMP checks it."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator

import pytest
from botocore.credentials import Credentials

from sdc_remediation.infra.local.prometheus import StandIn, real_prometheus
from sdc_remediation.lambdas.adapters import prometheus as prometheus_adapter
from sdc_remediation.lambdas.adapters.prometheus import AmpPrometheus
from sdc_remediation.lambdas.logic import approval
from sdc_remediation.lambdas.models.errors import (
    TelemetryBadAnswer,
    TelemetryRefused,
    TelemetrySlow,
)
from sdc_remediation.lambdas.models.incident import IncidentState
from sdc_remediation.lambdas.models.payloads import ApprovalRequest
from sdc_remediation.lambdas.models.telemetry import TelemetryState
from tests.integration.prometheus_server import (
    CLUSTER,
    INSTANCE_A,
    NODE_A,
    UUID_A1,
    WORKSPACE_ID,
    Dataset,
    workspace,
)
from tests.unit.world import TOKEN, World, settings

KEY, SECRET = "AKIDLOCALTEST", "local-secret"


@pytest.fixture(scope="module")
def data() -> Dataset:
    return Dataset.build()


def requested(data: Dataset, base_url: str, **adapter_options) -> tuple[World, str, float]:
    """request_approval for node A's incident with the workspace at `base_url`: the world, the
    card's HARDWARE TELEMETRY lines and how long the request took."""
    world = World(settings=settings(telemetry={CLUSTER: workspace()}))
    world.prometheus = AmpPrometheus(
        lambda: Credentials(KEY, SECRET),
        endpoint_overrides={WORKSPACE_ID: base_url},
        **adapter_options,
    )
    world.hyperpod.add_node(CLUSTER, "gpu-workers", INSTANCE_A)
    incident = data.incident(INSTANCE_A, node_name=NODE_A, gpu_uuid=UUID_A1)
    world.store.create(incident)
    world.clock.current = data.later()
    started = time.monotonic()
    approval.request_approval(ApprovalRequest(incident.incident_id, TOKEN), world.deps)
    took = time.monotonic() - started
    (paragraph,) = [
        p
        for p in world.notifier.published[-1].message.split("\n\n")
        if p.startswith("HARDWARE TELEMETRY")
    ]
    return world, paragraph, took


def world_incident_id(world: World) -> str:
    (incident_id,) = world.store.incidents
    return incident_id


def waits_for_approval(world: World) -> bool:
    (incident,) = world.store.incidents.values()
    return (
        incident.state is IncidentState.AWAITING_APPROVAL
        and world.store.task_token(incident.incident_id) == TOKEN
    )


@pytest.fixture
def stand_in(data) -> Iterator[tuple[StandIn, str]]:
    server = StandIn(data.series, trusted={KEY: SECRET})
    with server.serve() as url:
        yield server, url


def test_the_query_is_a_sigv4_signed_post_for_aps_that_the_workspace_accepts(data, stand_in):
    server, url = stand_in

    _, paragraph, _ = requested(data, url)

    (request,) = server.requests
    assert (request.method, request.path, request.status) == ("POST", "/api/v1/query_range", 200)
    assert f"Credential={KEY}/" in request.headers["Authorization"]
    assert "/us-west-2/aps/aws4_request" in request.headers["Authorization"]
    assert set(request.form) == {"query", "start", "end", "step"} and request.form["step"] == "15s"
    assert f"XID 79 at {data.clock(90, 15)} on {UUID_A1} (GPU 1)" in paragraph


def test_a_wrong_signature_is_refused_like_amp_refuses_it(data):
    server = StandIn(data.series, trusted={KEY: "another-secret"})
    with server.serve() as url:
        world, paragraph, _ = requested(data, url)

    assert server.requests[0].status == 403
    assert world.incident(world_incident_id(world)).telemetry.state == TelemetryState.REFUSED
    assert "signature" in paragraph


def test_a_stopped_server_is_one_line_and_the_approval_still_goes_out(data):
    with real_prometheus(data.series[:1]) as server:
        url = server.base_url
        server.stop()  # the real one, stopped: nothing listens on its port

        world, paragraph, took = requested(data, url)

    lines = paragraph.splitlines()
    assert (
        lines[1].startswith("  not available: workspace ws-") and "could not be reached" in lines[1]
    )
    assert lines[2].startswith("  dashboard: https://")
    assert len(lines) == 3
    assert waits_for_approval(world) and world.notifier.published
    assert took < 2


def test_a_slow_workspace_is_given_up_after_5_s_and_the_approval_still_goes_out(data):
    server = StandIn(data.series, mode="slow", delay=30)
    with server.serve() as url:
        world, paragraph, took = requested(data, url)

    assert prometheus_adapter.TIMEOUT_SECONDS == 5.0
    assert 5.0 <= took < 6.5
    assert "did not answer within 5 s" in paragraph.splitlines()[1]
    assert world.incident(world_incident_id(world)).telemetry.state == TelemetryState.SLOW
    assert waits_for_approval(world)


def test_the_bound_holds_for_a_shorter_configured_timeout_too(data):
    server = StandIn(data.series, mode="slow", delay=30)
    with server.serve() as url:
        adapter = AmpPrometheus(
            lambda: Credentials(KEY, SECRET), endpoint_overrides={WORKSPACE_ID: url}, timeout=0.5
        )
        started = time.monotonic()
        with pytest.raises(TelemetrySlow, match=r"did not answer within 0\.5 s"):
            adapter.query_range(workspace(), "{}", data.later(), data.later(), 15)

    # Half the default bound (5 s): the configured one was used, with room for a loaded machine.
    assert time.monotonic() - started < 2.5


@pytest.mark.parametrize(
    ("mode", "state", "words"),
    [
        (
            "forbid",
            TelemetryState.REFUSED,
            "refused the query (403: User: arn:aws:sts::111122223333:assumed-role/request-approval "
            "is not authorized to perform: aps:QueryMetrics); the function's role needs "
            "aps:QueryMetrics on the workspace (sdc:telemetry)",
        ),
        ("fail", TelemetryState.UNREACHABLE, "failed on its side (500: internal failure)"),
        ("garbage", TelemetryState.FAILED, "did not run the query (200"),
    ],
)
def test_a_refusing_failing_or_garbled_workspace_is_one_line_that_says_so(data, mode, state, words):
    server = StandIn(data.series, mode=mode)
    with server.serve() as url:
        world, paragraph, took = requested(data, url)

    lines = paragraph.splitlines()
    assert len(lines) == 3 and words in lines[1]
    assert world.incident(world_incident_id(world)).telemetry.state == state
    assert waits_for_approval(world) and took < 2


def test_an_answer_larger_than_the_limit_is_refused_as_unusable(data, stand_in):
    _, url = stand_in

    world, paragraph, _ = requested(data, url, max_answer_bytes=1000)

    assert "answered with more than 1000 bytes" in paragraph
    assert world.incident(world_incident_id(world)).telemetry.state == TelemetryState.FAILED


def test_the_adapter_refuses_a_plain_http_workspace_url_outside_the_local_override(data):
    plain = dataclasses.replace(workspace(), query_url="http://aps-workspaces.example/ws")
    adapter = AmpPrometheus(lambda: Credentials(KEY, SECRET))

    with pytest.raises(TelemetryBadAnswer, match="is not an https URL"):
        adapter.query_range(plain, "{}", data.later(), data.later(), 15)


def test_no_credentials_means_nothing_is_sent(data, stand_in):
    server, url = stand_in
    adapter = AmpPrometheus(lambda: None, endpoint_overrides={WORKSPACE_ID: url})

    with pytest.raises(TelemetryRefused, match="no AWS credentials to sign"):
        adapter.query_range(workspace(), "{}", data.later(), data.later(), 15)

    assert server.requests == []
