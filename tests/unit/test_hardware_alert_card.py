"""The approval card lists the hardware alerts attached to the incident in a section of their
own (rule, GPU, severity, start, what the rule means, resolved or still firing), worded from the
incident record alone; an incident without one has no such section, and a card cut to fit cuts
it like the other evidence."""

from __future__ import annotations

from sdc_remediation.lambdas.wording import cards
from sdc_remediation.lambdas.wording.card_lines import HARDWARE_ALERTS_HEADING, hardware_alert_lines
from tests.unit.test_hardware_intake import NODE, alert, deliver, sns_event
from tests.unit.world import World

UUID = "GPU-f3f3f3f3-5a1e-4c1d-9e7b-000000000003"


def section(world: World, incident_id: str) -> list[str]:
    """The section's lines as worded, before the card wraps the long ones."""
    card = cards.approval_card(world.incident(incident_id), world.settings)
    assert HARDWARE_ALERTS_HEADING in [s.heading for s in card.sections]
    return hardware_alert_lines(world.incident(incident_id))


def test_a_firing_alert_is_listed_with_rule_gpu_severity_start_meaning_and_still_firing(world):
    (opened,) = deliver(world, sns_event(alert()))

    lines = section(world, opened["incident_id"])

    assert lines == [
        f'  hardware_throttling on GPU "3" ("{UUID}") of node "{NODE}": warning, '
        "started 2026-12-05 11:02:00 UTC, still firing",
        "    the alert's summary: \"The hardware held the GPU's clocks down.\"",
    ]


def test_a_resolved_alert_is_listed_once_and_says_when_its_resolution_arrived(world):
    (opened,) = deliver(world, sns_event(alert()))
    deliver(world, sns_event(alert(status="resolved"), message_id="m-2"))

    (line, _meaning) = section(world, opened["incident_id"])

    assert line.startswith('  hardware_throttling on GPU "3"')
    assert ", resolved (received " in line and "still firing" not in line


def test_each_alert_of_the_node_has_its_line_with_its_xid_or_its_severity(world):
    opened, _attached = deliver(
        world,
        sns_event(
            alert(rule="critical_xid", xid="79", fingerprint="aa01"),
            alert(rule="row_remap_failure", severity="critical", fingerprint="aa02"),
        ),
    )

    lines = section(world, opened["incident_id"])

    heads = [line for line in lines if not line.startswith("    ")]
    assert len(heads) == 2
    assert 'critical_xid on GPU "3"' in heads[0] and ', XID "79": warning' in heads[0]
    assert heads[1].startswith('  row_remap_failure on GPU "3"') and ": critical," in heads[1]


def test_a_network_ports_alert_names_the_node_for_it_has_no_gpu(world):
    port = alert(rule="link_downtime")
    del port["labels"]["gpu"], port["labels"]["gpu_uuid"]
    (opened,) = deliver(world, sns_event(port))

    (line, _meaning) = section(world, opened["incident_id"])

    assert line.startswith(f'  link_downtime on node "{NODE}": warning')


def test_the_section_is_the_evidence_of_an_alert_alone_and_comes_before_the_health_check(world):
    (opened,) = deliver(world, sns_event(alert()))

    text = cards.approval_card(world.incident(opened["incident_id"]), world.settings).text

    assert "\nEVIDENCE\n" not in text  # no metric, no report: nothing to say there
    assert text.index("\nISOLATION\n") < text.index(HARDWARE_ALERTS_HEADING)
    assert text.index(HARDWARE_ALERTS_HEADING) < text.index("\nDEEP HEALTH CHECK\n")


def test_an_incident_without_a_hardware_alert_has_no_such_section(world):
    world.store_fixture_report()
    incident_id = world.awaiting_approval()

    card = cards.approval_card(world.incident(incident_id), world.settings)

    assert card.hardware_alerts is None
    assert HARDWARE_ALERTS_HEADING not in card.text


def test_a_card_too_large_cuts_the_alerts_like_other_evidence_and_keeps_the_summary(world):
    many = [alert(fingerprint=f"f{n:03d}", gpu=str(n)) for n in range(40)]
    for alarm in many:
        alarm["annotations"]["summary"] = "x" * 200
    opened, *_ = deliver(world, sns_event(*many))
    incident = world.incident(opened["incident_id"])
    full = cards.approval_card(incident, world.settings, max_bytes=None)
    assert len(hardware_alert_lines(incident)) == 80  # every alert and its meaning

    card = cards.approval_card(incident, world.settings, max_bytes=4_000)

    assert len(card.text.encode()) <= 4_000
    assert card.summary == full.summary
    assert card.text.splitlines()[:5] == full.text.splitlines()[:5]
    shown = card.hardware_alerts.lines if card.hardware_alerts else ()
    assert len(shown) < len(full.hardware_alerts.lines)
    assert f"`sdc show {incident.incident_id}`" in card.text


def test_an_incident_opened_by_hardware_alerts_alone_says_failing_hardware_first(world):
    (opened,) = deliver(world, sns_event(alert()))

    card = cards.approval_card(world.incident(opened["incident_id"]), world.settings)

    (what,) = [line for line in card.text.splitlines() if line.startswith("WHAT: ")]
    assert what.startswith("WHAT: failing hardware suspected on ")
    assert what.endswith("(hardware_throttling)")
