"""A burst: a culprit report and a contributor alarm for every node of one 1,000-node cluster,
plus redeliveries.

Everything fires at once, the way a bad software rollout or recipe change would look. What must
hold: the blast-radius guard lets exactly its limit of incidents open, every other instance ends
in a held incident, no instance and no event gets two incidents, nothing is replaced (nothing was
approved); and the whole burst goes through the deployed intake path in at most 30 s.

The events take the path the local drill gives them: the deployed rules' patterns route them to
the open-incident function, whose real handler runs in-process on the moto account; the
remediation executions the opened incidents start run the synthesized definition in moto's
interpreter. The figures come from what the account holds afterwards (incident records, the audit
log, executions, the approver's inbox, the fake HyperPod's call log), not from the handlers'
answers alone.

Two things in the harness keep the figure about the pipeline rather than about the emulator:
moto answers a base-table Query by sorting every item of the table (real DynamoDB reads the one
partition), which makes each of the burst's queries cost O(table) and the burst O(n²); and the
local run builds fresh boto3 clients for every invocation, where a warm Lambda reuses its own.
moto also backs up every table a TransactWriteItems names with a deep copy of the whole table
(for its rollback), again O(table) per held incident. While the burst runs, a Query of a base
table looks in its partition only, a transaction backs up the partitions it writes only, and
clients are built once per service (`_partition_queries`, `_partition_backups`,
`reused_clients`): same answers, same calls, same rollback.
"""

from __future__ import annotations

import io
import json
import logging
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from moto.dynamodb.models.table import Table

from sdc_remediation.infra.cli.queries import DynamoAuditChains
from sdc_remediation.infra.local.evaluator import InsightsAlarm, _contributor_id, _event
from sdc_remediation.infra.local.fake_hyperpod import FakeHyperPod
from sdc_remediation.infra.local.run import CLUSTER, TERMINAL, LocalRun
from sdc_remediation.lambdas.adapters._aws import from_item
from sdc_remediation.lambdas.logic.safety.guard import open_limit
from sdc_remediation.lambdas.models.incident import Incident
from sdc_remediation.lambdas.models.settings import Settings
from sdc_remediation.lambdas.observability import SERVICE
from tests.bench.clients import reused_clients
from tests.unit.reports import forged_event
from trainer_emitter.contract import Metric

GOAL_SECONDS = 30.0
NODES = 1000
GROUP = "gpu-workers"
REDELIVER_EVERY = 10
"""Every 10th event is delivered a second time (EventBridge delivers at least once)..."""
REDELIVER_MORE_EVERY = 50
"""...and every 50th twice more on top."""
SETTLE_SECONDS = 60.0


@dataclass
class Burst:
    """What one burst did, counted from the account afterwards."""

    nodes: int
    limit: int
    settings: Settings = field(repr=False)
    deliveries: int
    failed_deliveries: int
    seconds: float
    settle_seconds: float
    incidents: list[Incident] = field(repr=False)
    opened: int
    """Incidents whose intake audit entry is `incident_opened`."""
    held_at_intake: int
    """Incidents whose intake audit entry is `incident_held`."""
    hold_kinds: Counter[str]
    """Held incidents by hold kind (guard, storm, paused), in-flight holds included."""
    held_in_flight: int
    """Opened incidents that a later step held (the storm hold reaching in-flight incidents)."""
    instances_covered: int
    """Distinct instances with an opened or held incident."""
    instances_other: int
    """Distinct instances whose incidents are neither opened nor held (skipped, say)."""
    instances_with_several: int
    events_with_several: int
    executions: int
    execution_statuses: Counter[str]
    notifications: Counter[str]
    replace_calls: int
    hyperpod_calls: Counter[str] = field(default_factory=Counter)
    """HyperPod (fake) calls during the burst, by operation."""
    aws_calls: Counter[str] = field(default_factory=Counter)
    """AWS (moto) calls during the burst, by `service.Operation`."""
    audit_entries: int = 0
    each: list[float] = field(default_factory=list, repr=False)
    """Seconds per delivery, in delivery order."""


def instance_ids(nodes: int) -> list[str]:
    return [f"i-0b{n:015x}" for n in range(1, nodes + 1)]


def cluster_of(nodes: int) -> FakeHyperPod:
    """One cluster (the local run's name) with `nodes` running nodes."""
    hyperpod = FakeHyperPod()
    hyperpod.add_cluster(CLUSTER, instance_groups=[GROUP])
    for instance_id in instance_ids(nodes):
        hyperpod.add_node(CLUSTER, GROUP, instance_id)
    return hyperpod


def sdc_alarms(alarms: list[InsightsAlarm]) -> list[InsightsAlarm]:
    """The deployed alarms on silent data corruption: the burst is a corruption storm. The
    training watch's alarms go by their own rows (a straggler alarm alone is a notice, not an
    incident the guard counts), which the watch's own tests judge."""
    watch = {str(Metric.HANG), str(Metric.STRAGGLER)}
    return [alarm for alarm in alarms if alarm.metric not in watch]


def contributor_events(alarms: list[InsightsAlarm], instances: list[str]) -> list[dict[str, Any]]:
    """One ALARM contributor event per instance, in the documented shape the local evaluator
    produces, the deployed alarms taking turns; all within one evaluation minute."""
    start = datetime.now(UTC)
    events = []
    for n, instance_id in enumerate(instances):
        alarm = alarms[n % len(alarms)]
        attributes = {"ClusterName": CLUSTER, "InstanceId": instance_id}
        contributor = _contributor_id(attributes, alarm.dimensions)
        at = start + timedelta(milliseconds=20 * n)
        events.append(_event(alarm, contributor, attributes, "ALARM", 1.0, at))
    return events


def with_redeliveries(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The delivery order: each event, and its redeliveries a few deliveries later."""
    keyed: list[tuple[float, dict[str, Any]]] = []
    for n, event in enumerate(events):
        keyed.append((n, event))
        if n % REDELIVER_EVERY == 0:
            keyed.append((n + 3.5, event))
        if n % REDELIVER_MORE_EVERY == 0:
            keyed.append((n + 7.5, event))
            keyed.append((n + 40.5, event))
    return [event for _, event in sorted(keyed, key=lambda pair: pair[0])]


def culprit_reports(instances: list[str]) -> list[dict[str, Any]]:
    """Each node's SDC report naming it the culprit: a corruption storm is seen by the emitters
    too, and the storm rule counts the nodes reports name (an alarm alone flags nothing: any pod
    can put the metric's datapoint)."""
    return [
        forged_event([i], ambiguous=False, role="culprit", report_id=f"burst-{n:08d}")
        for n, i in enumerate(instances)
    ]


def burst(
    nodes: int = NODES, *, context: dict[str, Any] | None = None, reports: bool = True
) -> Burst:
    """Stand up the local account with a `nodes`-node cluster, deliver the burst, count.
    `reports`: each node's report comes before its alarm (False: the alarms alone)."""
    hyperpod = cluster_of(nodes)
    calls: Counter[str] = Counter()
    with LocalRun.open(context=context, hyperpod=hyperpod) as run:
        settings = run.deps.settings
        ids = instance_ids(nodes)
        events = contributor_events(sdc_alarms(run.evaluator.alarms()), ids)
        if reports:
            events = [e for pair in zip(culprit_reports(ids), events, strict=True) for e in pair]
        stream = with_redeliveries(events)
        run.session.events.register("before-call", _counter(calls))
        # The functions' metric records (EMF) go where their logs would, not into the table:
        # with metrics disabled, Powertools still prints every 100th value of a counter.
        with (
            _partition_queries(),
            _partition_backups(),
            reused_clients(run.session),
            _quiet_functions(),
            redirect_stdout(io.StringIO()),
        ):
            failed = 0
            each: list[float] = []
            started = time.perf_counter()
            for event in stream:
                before = time.perf_counter()
                failed += sum(1 for d in run.put_event(event) if not d.ok)
                each.append(time.perf_counter() - before)
            seconds = time.perf_counter() - started
        burst_calls = Counter(calls)
        burst_hyperpod = Counter(c.operation for c in run.hyperpod.calls)
        settled = time.perf_counter()
        _settle(run)
        settle_seconds = time.perf_counter() - settled
        result = _count(run, settings, nodes, len(stream), failed, seconds, settle_seconds)
        result.aws_calls = burst_calls
        result.hyperpod_calls = burst_hyperpod
        result.each = each
    return result


_partition = threading.local()


@contextmanager
def _partition_queries() -> Iterator[None]:
    """moto's Query of a base table walks the whole table sorted; give it the partition only."""
    query, all_items = Table.query, Table.all_items

    def partition_query(self: Table, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
        index_name = args[6] if len(args) > 6 else kwargs.get("index_name")
        if index_name is not None or hash_key is None:
            return query(self, hash_key, *args, **kwargs)
        _partition.scope = (self, hash_key)
        try:
            return query(self, hash_key, *args, **kwargs)
        finally:
            _partition.scope = None

    def partition_items(self: Table) -> list[Any]:
        table, hash_key = getattr(_partition, "scope", None) or (None, None)
        if table is not self:
            return all_items(self)
        found = self.items.get(hash_key)
        if found is None:
            return []
        return list(found.values()) if self.range_key_attr else [found]

    Table.query = partition_query  # type: ignore[method-assign]
    Table.all_items = partition_items  # type: ignore[method-assign]
    try:
        yield
    finally:
        Table.query, Table.all_items = query, all_items  # type: ignore[method-assign]


@contextmanager
def _quiet_functions() -> Iterator[None]:
    """The functions' own log lines (a storm hold is a warning) would land in the bench table:
    errors only while the burst runs."""
    functions = logging.getLogger(SERVICE)
    level = functions.level
    functions.setLevel(logging.ERROR)
    try:
        yield
    finally:
        functions.setLevel(level)


_transaction = threading.local()


@contextmanager
def _partition_backups() -> Iterator[None]:
    """moto's TransactWriteItems deep-copies each table it names before writing, to roll back
    on a failed condition. Back up only the partitions (hash keys) the transaction writes: a
    transaction changes nothing else, so the rollback restores exactly the same state. Other
    threads (the interpreter's) keep moto's own full copy."""
    import moto.dynamodb.models as dynamodb_models
    from moto.dynamodb.models.dynamo_type import DynamoType

    backend = dynamodb_models.DynamoDBBackend
    transact, real_copy = backend.transact_write_items, dynamodb_models.copy

    class PartitionCopy:
        def __getattr__(self, name: str) -> Any:
            return getattr(real_copy, name)

        def deepcopy(self, value: Any, memo: Any = None) -> Any:
            keys = (getattr(_transaction, "keys", None) or {}).get(id(value))
            if not isinstance(value, Table) or keys is None:
                return real_copy.deepcopy(value, memo)
            backup = real_copy.copy(value)
            backup.items = real_copy.copy(value.items)
            for key in keys:
                if key in value.items:
                    backup.items[key] = real_copy.deepcopy(value.items[key])
            return backup

    def partition_transact(self: Any, transact_items: list[dict[str, Any]]) -> None:
        keys: dict[int, list[Any]] = {}
        for item in transact_items:
            _, op = next(iter(item.items()))
            table = self.tables.get(op.get("TableName"))
            attributes = op.get("Key") or op.get("Item") or {}
            if table is not None and table.hash_key_attr in attributes:
                keys.setdefault(id(table), []).append(DynamoType(attributes[table.hash_key_attr]))
        _transaction.keys = keys
        try:
            return transact(self, transact_items)
        finally:
            _transaction.keys = None

    dynamodb_models.copy = PartitionCopy()  # type: ignore[assignment]
    backend.transact_write_items = partition_transact  # type: ignore[method-assign]
    try:
        yield
    finally:
        dynamodb_models.copy = real_copy
        backend.transact_write_items = transact  # type: ignore[method-assign]


def _settle(run: LocalRun) -> None:
    """Until every remediation execution has ended or waits for a person: what it notifies and
    calls by then is part of the burst's outcome."""
    client = run.session.client("stepfunctions")
    deadline = time.monotonic() + SETTLE_SECONDS
    while time.monotonic() < deadline:
        running = [
            e["name"]
            for e in _executions(client, run.stack.state_machine("Remediation").arn)
            if e["status"] == "RUNNING"
        ]
        waiting = [
            name
            for name in running
            if (incident := run.incident(name)) is None
            or incident.state.value not in ("awaiting_approval", *TERMINAL)
        ]
        if not waiting:
            return
        time.sleep(0.1)


def _count(
    run: LocalRun,
    settings: Settings,
    nodes: int,
    deliveries: int,
    failed: int,
    seconds: float,
    settle_seconds: float,
) -> Burst:
    incidents = _incidents(run, settings.incidents_table)
    chains = DynamoAuditChains(settings.audit_table, lambda: run.session.client("dynamodb"))
    chains_by_subject = chains.all_chains()
    intake: dict[str, str] = {}
    events: Counter[str] = Counter()
    for incident in incidents:
        entries = chains_by_subject.get(incident.incident_id, [])
        first = next((e for e in entries if e.action in ("incident_opened", "incident_held")), None)
        if first is None:
            continue
        intake[incident.incident_id] = first.action
        events[str(first.details.get("event_id"))] += 1
    opened = [i for i in incidents if intake.get(i.incident_id) == "incident_opened"]
    held = [i for i in incidents if intake.get(i.incident_id) == "incident_held"]
    per_instance = Counter(i.instance_id for i in incidents)
    covered = {i.instance_id for i in opened + held}
    client = run.session.client("stepfunctions")
    executions = _executions(client, run.stack.state_machine("Remediation").arn)
    notifications = Counter(
        n["attributes"].get("kind") or n["subject"] or "?" for n in run.notifications()
    )
    return Burst(
        nodes=nodes,
        limit=open_limit(nodes, settings),
        settings=settings,
        deliveries=deliveries,
        failed_deliveries=failed,
        seconds=seconds,
        settle_seconds=settle_seconds,
        incidents=incidents,
        opened=len(opened),
        held_at_intake=len(held),
        hold_kinds=Counter(str(i.hold_kind) for i in incidents if i.hold),
        held_in_flight=sum(1 for i in opened if i.hold),
        instances_covered=len(covered),
        instances_other=len(set(per_instance) - covered),
        instances_with_several=sum(1 for n in per_instance.values() if n > 1),
        events_with_several=sum(1 for n in events.values() if n > 1),
        executions=len(executions),
        execution_statuses=Counter(e["status"] for e in executions),
        notifications=notifications,
        replace_calls=len(run.hyperpod.calls_to("BatchReplaceClusterNodes")),
        audit_entries=sum(len(entries) for entries in chains_by_subject.values()),
    )


def _incidents(run: LocalRun, table: str) -> list[Incident]:
    """Every incident record (a Scan: the figures must not depend on an index)."""
    pages = run.session.client("dynamodb").get_paginator("scan")
    found = []
    for page in pages.paginate(TableName=table, ConsistentRead=True):
        for item in page["Items"]:
            record = from_item(item)
            if str(record.get("pk", "")).startswith("INCIDENT#"):
                found.append(Incident.from_record(record))
    return found


def _executions(client: Any, machine_arn: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for page in client.get_paginator("list_executions").paginate(stateMachineArn=machine_arn):
        found.extend(page["executions"])
    return found


def _counter(calls: Counter[str]) -> Any:
    def count(model: Any, **_: Any) -> None:
        calls[f"{model.service_model.service_name}.{model.name}"] += 1

    return count


def run() -> list[dict[str, Any]]:
    result = burst(NODES)
    return rows(result)


def rows(result: Burst) -> list[dict[str, Any]]:
    settings = result.settings
    events = result.nodes
    storm = f"storm threshold {settings.storm_threshold} in {settings.storm_window_seconds} s"

    def row(name: str, value: Any, unit: str, goal: str, ratio: float | None = None) -> Any:
        return {"name": name, "value": value, "unit": unit, "ratio": ratio, "goal": goal}

    found = [
        row(
            f"burst: {events} events + {result.deliveries - events} redeliveries, wall time",
            result.seconds,
            "s",
            f"ratio ≤ 1 ({GOAL_SECONDS:.0f} s)",
            result.seconds / GOAL_SECONDS,
        ),
        row(
            "  per delivery",
            result.seconds / max(result.deliveries, 1) * 1000,
            "ms",
            "in-process handler + moto",
        ),
        *[
            row(
                f"  per delivery, {which} 100",
                sum(part) / len(part) * 1000,
                "ms",
                "flat: no growth",
            )
            for which, part in (("first", result.each[:100]), ("last", result.each[-100:]))
            if part
        ],
        row("  failed deliveries (dead-lettered)", result.failed_deliveries, "count", "0"),
        row(
            "incidents opened",
            result.opened,
            "count",
            f"= guard limit {result.limit} for {result.nodes} nodes",
            result.opened / result.limit,
        ),
        row("incidents held at intake", result.held_at_intake, "count", "the rest"),
        *[
            row(f"  held: {kind}", n, "count", storm if kind == "storm" else "guard / paused")
            for kind, n in sorted(result.hold_kinds.items())
        ],
        row("  opened, then held in flight", result.held_in_flight, "count", storm),
        row(
            "instances opened or held",
            result.instances_covered,
            "count",
            f"= {events} distinct instances",
            result.instances_covered / events,
        ),
        row("  instances ending otherwise", result.instances_other, "count", "0"),
        row("duplicates: instances with > 1 incident", result.instances_with_several, "count", "0"),
        row("duplicates: events with > 1 incident", result.events_with_several, "count", "0"),
        row("remediation executions started", result.executions, "count", "= incidents opened"),
        *[
            row(f"  executions {status.lower()}", n, "count", "after settling")
            for status, n in sorted(result.execution_statuses.items())
        ],
        row(
            "notifications published",
            sum(result.notifications.values()),
            "count",
            "1 storm notice when the storm hold kicks in",
        ),
        *[
            row(f"  notifications: {kind}", n, "count", "by kind")
            for kind, n in sorted(result.notifications.items())
        ],
        row("HyperPod BatchReplaceClusterNodes calls", result.replace_calls, "count", "0"),
        row("settling after the burst", result.settle_seconds, "s", "executions at rest"),
    ]
    per_event = [
        (
            "DynamoDB calls",
            sum(n for k, n in result.aws_calls.items() if k.startswith("dynamodb.")),
        ),
        ("HyperPod (fake) calls", sum(result.hyperpod_calls.values())),
        ("audit entries", result.audit_entries),
        ("SNS publishes", result.aws_calls["sns.Publish"]),
        ("SSM reads (pause switch)", result.aws_calls["ssm.GetParameter"]),
    ]
    found += [
        row(f"per delivery: {name}", n / max(result.deliveries, 1), "count", "cost drivers")
        for name, n in per_event
    ]
    found += [
        row(f"  {operation}", n / max(result.deliveries, 1), "count", "per delivery")
        for operation, n in sorted(result.aws_calls.items())
        if operation.startswith("dynamodb.")
    ]
    return found


def main() -> None:
    print(json.dumps(run(), indent=1, default=str))


if __name__ == "__main__":
    main()
