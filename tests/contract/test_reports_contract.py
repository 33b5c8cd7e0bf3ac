"""ReportStore: SDC reports kept under (cluster, instance), the first copy of each one kept."""

from __future__ import annotations

import pytest

from sdc_remediation.lambdas.logic.ports import ReportStore
from sdc_remediation.lambdas.models.report import SdcReport
from tests.contract.records import OTHER_CLUSTER, REPORTED_INSTANCE, instance, report

EXPIRES = 1_767_000_000


def latest(reports: ReportStore, cluster_name: str, instance_id: str) -> SdcReport | None:
    found = reports.recent_reports(cluster_name, instance_id, 1)
    return found[0] if found else None


def involved(report_id: str, received_at: str) -> SdcReport:
    """A report naming REPORTED_INSTANCE involved only (it points at nobody)."""
    return report(
        report_id=report_id,
        received_at=received_at,
        ambiguous=True,
        culprits=[],
        instances=[
            {
                "instance_id": REPORTED_INSTANCE,
                "metrics": ["sdc_divergent_tensors"],
                "ranks": [0],
                "role": "involved",
            }
        ],
    )


def test_a_first_report_is_stored_and_reads_back_equal(reports: ReportStore):
    sent = report()

    assert reports.put_report(sent, REPORTED_INSTANCE, EXPIRES, pointing=True) is True
    assert latest(reports, sent.cluster_name, REPORTED_INSTANCE) == sent


def test_the_same_report_again_is_not_stored_twice_and_the_first_copy_stays(reports: ReportStore):
    first = report()
    reports.put_report(first, REPORTED_INSTANCE, EXPIRES, pointing=True)
    redelivered = report(job_name="another-job")

    assert reports.put_report(redelivered, REPORTED_INSTANCE, EXPIRES, pointing=True) is False
    assert latest(reports, first.cluster_name, REPORTED_INSTANCE) == first


@pytest.mark.parametrize(
    "newest_first", [True, False], ids=["newest-put-first", "oldest-put-first"]
)
def test_the_latest_report_is_the_one_received_last_whatever_the_order_they_were_put(
    reports: ReportStore, newest_first: bool
):
    older = report(report_id="r-older-000001", received_at="2026-11-30T08:00:00+00:00")
    newer = report(report_id="r-newer-000002", received_at="2026-11-30T08:14:31.207+00:00")
    for sent in [newer, older] if newest_first else [older, newer]:
        assert reports.put_report(sent, REPORTED_INSTANCE, EXPIRES, pointing=True) is True

    assert latest(reports, newer.cluster_name, REPORTED_INSTANCE) == newer


def test_a_report_claiming_a_later_emission_is_not_the_latest_when_received_earlier(
    reports: ReportStore,
):
    dated_ahead = report(
        report_id="r-dated-2099",
        emitted_at="2099-01-01T00:00:00Z",
        received_at="2026-11-30T08:00:00+00:00",
    )
    received_last = report(report_id="r-received-last", received_at="2026-11-30T08:20:00+00:00")
    reports.put_report(dated_ahead, REPORTED_INSTANCE, EXPIRES, pointing=True)
    reports.put_report(received_last, REPORTED_INSTANCE, EXPIRES, pointing=True)

    assert latest(reports, received_last.cluster_name, REPORTED_INSTANCE) == received_last


def test_reports_received_at_the_same_time_are_ordered_by_report_id(reports: ReportStore):
    a = report(report_id="r-aaaaaaaa")
    b = report(report_id="r-bbbbbbbb")
    reports.put_report(b, REPORTED_INSTANCE, EXPIRES, pointing=True)
    reports.put_report(a, REPORTED_INSTANCE, EXPIRES, pointing=True)

    assert latest(reports, a.cluster_name, REPORTED_INSTANCE) == b


def test_the_same_report_received_again_later_is_not_stored_twice(reports: ReportStore):
    first = report()
    reports.put_report(first, REPORTED_INSTANCE, EXPIRES, pointing=True)

    again = report(received_at="2026-11-30T09:00:00+00:00")

    assert reports.put_report(again, REPORTED_INSTANCE, EXPIRES, pointing=True) is False
    assert latest(reports, first.cluster_name, REPORTED_INSTANCE) == first


def test_reports_are_kept_per_cluster_and_instance(reports: ReportStore):
    sent = report()
    reports.put_report(sent, REPORTED_INSTANCE, EXPIRES, pointing=True)

    assert reports.put_report(sent, instance(2), EXPIRES, pointing=True) is True
    assert latest(reports, sent.cluster_name, instance(3)) is None
    assert latest(reports, OTHER_CLUSTER, REPORTED_INSTANCE) is None
    assert latest(reports, sent.cluster_name, instance(2)) == sent


def test_no_report_reads_as_none(reports: ReportStore):
    assert latest(reports, OTHER_CLUSTER, instance(1)) is None


def test_a_report_detail_round_trips_with_fractions_unicode_and_nesting(reports: ReportStore):
    sent = report(
        job_name="llama-prétrain-7b",
        alarm={
            "ratio": 0.1,
            "loss": 2.5,
            "big": 12345678901234,
            "nested": [[1, 2.25], {"a": None}],
        },
    )

    reports.put_report(sent, REPORTED_INSTANCE, EXPIRES, pointing=True)

    stored = latest(reports, sent.cluster_name, REPORTED_INSTANCE)
    assert stored is not None
    assert stored.detail == sent.detail


def test_the_store_keeps_what_was_put_not_the_callers_object(reports: ReportStore):
    sent = report()
    reports.put_report(sent, REPORTED_INSTANCE, EXPIRES, pointing=True)
    sent.detail["alarm"]["step"] = 999

    stored = latest(reports, sent.cluster_name, REPORTED_INSTANCE)

    assert stored is not None
    assert stored.detail["alarm"]["step"] == 30


def test_recent_reports_are_the_newest_received_first_at_most_the_limit(reports: ReportStore):
    sent = [
        report(report_id=f"r-recent-{n:06d}", received_at=f"2026-11-30T08:0{n}:00+00:00")
        for n in range(4)
    ]
    for each in sent:
        reports.put_report(each, REPORTED_INSTANCE, EXPIRES, pointing=True)

    assert reports.recent_reports(sent[0].cluster_name, REPORTED_INSTANCE, 3) == sent[:0:-1]
    assert reports.recent_reports(OTHER_CLUSTER, REPORTED_INSTANCE, 3) == []


def test_a_report_is_found_by_its_receipt_however_many_came_for_the_instance_since(
    reports: ReportStore,
):
    first = report(report_id="r-first-000001", received_at="2026-11-30T08:00:00+00:00")
    reports.put_report(first, REPORTED_INSTANCE, EXPIRES, pointing=True)
    for n in range(8):
        later = report(report_id=f"r-later-{n:06d}", received_at=f"2026-11-30T08:0{n + 1}:00+00:00")
        reports.put_report(later, REPORTED_INSTANCE, EXPIRES, pointing=True)

    found = reports.stored_report(
        first.cluster_name, REPORTED_INSTANCE, "2026-11-30T08:00:00+00:00", "r-first-000001"
    )

    assert found == first
    assert (
        reports.stored_report(
            first.cluster_name, REPORTED_INSTANCE, "2026-11-30T08:00:00+00:00", "r-other"
        )
        is None
    )


def test_reports_naming_the_instance_involved_never_push_those_pointing_at_it_out_of_reach(
    reports: ReportStore,
):
    pointing = report(report_id="r-culprit-000001", received_at="2026-11-30T08:00:00+00:00")
    reports.put_report(pointing, REPORTED_INSTANCE, EXPIRES, pointing=True)
    later = [involved(f"r-involved-{n:06d}", f"2026-11-30T08:0{n + 1}:00+00:00") for n in range(6)]
    for each in later:
        reports.put_report(each, REPORTED_INSTANCE, EXPIRES, pointing=False)

    found = reports.recent_reports(pointing.cluster_name, REPORTED_INSTANCE, 3)

    assert found == [pointing, *later[:2:-1]]
    assert (
        reports.stored_report(
            pointing.cluster_name, REPORTED_INSTANCE, later[0].received_at or "", later[0].report_id
        )
        == later[0]
    )


def test_a_report_put_as_not_pointing_is_read_with_the_others_whatever_role_it_gives(
    reports: ReportStore,
):
    """The intake decides what points at a node (a culprit role on evidence that proposes no
    more than a health check does not): the store keeps each report where it was put."""
    strong = report(report_id="r-strong-000001", received_at="2026-11-30T08:00:00+00:00")
    weak = report(report_id="r-weak-000002", received_at="2026-11-30T08:05:00+00:00")
    reports.put_report(strong, REPORTED_INSTANCE, EXPIRES, pointing=True)
    reports.put_report(weak, REPORTED_INSTANCE, EXPIRES, pointing=False)

    assert reports.recent_reports(strong.cluster_name, REPORTED_INSTANCE, 1) == [strong, weak]


def test_a_report_is_found_by_its_id_when_asked_with_the_receipt_of_a_later_delivery(
    reports: ReportStore,
):
    """A redelivery (the first invocation died after storing it) is received later and not
    stored again: the evidence it leaves names its own receipt."""
    first = report(report_id="r-redelivered-01", received_at="2026-11-30T08:00:00+00:00")
    reports.put_report(first, REPORTED_INSTANCE, EXPIRES, pointing=True)
    again = report(report_id="r-redelivered-01", received_at="2026-11-30T08:00:07+00:00")
    assert reports.put_report(again, REPORTED_INSTANCE, EXPIRES, pointing=True) is False

    found = reports.stored_report(
        first.cluster_name, REPORTED_INSTANCE, again.received_at or "", again.report_id
    )

    assert found == first
