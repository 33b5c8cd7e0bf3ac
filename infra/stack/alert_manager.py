"""The alert manager definition the stack puts on each telemetry cluster's Amazon Managed Service
for Prometheus workspace: every alert of the hardware rules (`sdc_remediation.infra.stack.alert_rules`) goes to
the stack's hardware alert topic, as a JSON message the intake reads.

    alert_manager_definition(cluster="ml-cluster-1", topic_arn=..., region="us-west-2")

The service's only receiver is SNS (`sns_configs`, a `sigv4` region required, no `api_url`, no
`http_config`). The definition is AMP's wrapper: `alertmanager_config` (an alertmanager
configuration, as a string) and `template_files` (name → Go template), the configuration's
`templates` naming the files by those names.

The message is JSON written by a template: every value is cut of `"`, `\\` and control
characters first, so a label value (a claim of whoever writes series to the workspace) cannot
close its string and add keys. The cluster is not taken from the message at all: it is the SNS
message attribute `cluster`, fixed in this definition per workspace.
"""

from __future__ import annotations

from typing import Any, Final

import yaml

from sdc_remediation.lambdas.models.hardware_alert import (
    CLUSTER_ATTRIBUTE,
    MESSAGE_VERSION,
    AlertLabel,
)

RECEIVER: Final = "sdc-hardware-intake"
TEMPLATE_FILE: Final = "sdc_hardware"
MESSAGE_TEMPLATE: Final = "sdc.hardware.message"
SUBJECT_TEMPLATE: Final = "sdc.hardware.subject"
GROUP_BY: Final = (
    AlertLabel.CLUSTER,
    AlertLabel.NODE,
    AlertLabel.RULE,
    AlertLabel.GPU_UUID,
    AlertLabel.XID,
    AlertLabel.COUNTER,
)
"""One notification per node, rule and GPU (and XID or NVLink counter): the intake sees each
fault once per group, deduplicates per (cluster, instance) itself."""
GROUP_WAIT: Final = "30s"
GROUP_INTERVAL: Final = "5m"
REPEAT_INTERVAL: Final = "4h"
"""A fault still firing is said again every 4 hours: the intake attaches it to the open incident
(or opens one if the first was closed)."""

CLEAN: Final = r'reReplaceAll "[\"\\\\[:cntrl:]]" ""'
"""Go template: drop `"`, `\\` and control characters from a value before it goes into JSON."""


def _filled(text: str, **values: str) -> str:
    """`text` with each `<NAME>` replaced (Go templates are all braces: no str.format)."""
    for name, value in values.items():
        text = text.replace(f"<{name}>", value)
    return text


_PAIRS: Final = (
    "{ {{- range $j, $p := $a.<FIELD>.SortedPairs }}{{ if $j }}, {{ end }}"
    '"{{ $p.Name | <CLEAN> }}": "{{ $p.Value | <CLEAN> }}"{{ end -}} }'
)
TEMPLATE: Final = _filled(
    '{{ define "<SUBJECT>" }}SDC hardware alert: {{ .Status }} ({{ len .Alerts }}){{ end }}\n'
    '{{ define "<MESSAGE>" }}{"version": "<VERSION>", "status": "{{ .Status | <CLEAN> }}", '
    '"alerts": [{{ range $i, $a := .Alerts }}{{ if $i }}, {{ end }}'
    '{"status": "{{ $a.Status | <CLEAN> }}", "labels": <LABELS>, "annotations": <ANNOTATIONS>, '
    '"startsAt": "{{ $a.StartsAt.UTC.Format "2006-01-02T15:04:05Z07:00" }}", '
    '"fingerprint": "{{ $a.Fingerprint | <CLEAN> }}"}'
    "{{ end }}]}{{ end }}\n",
    LABELS=_filled(_PAIRS, FIELD="Labels"),
    ANNOTATIONS=_filled(_PAIRS, FIELD="Annotations"),
    SUBJECT=SUBJECT_TEMPLATE,
    MESSAGE=MESSAGE_TEMPLATE,
    VERSION=MESSAGE_VERSION,
    CLEAN=CLEAN,
)


def _use(template: str) -> str:
    return '{{ template "' + template + '" . }}'


def alertmanager_config(cluster: str, topic_arn: str, region: str) -> dict[str, Any]:
    """The alertmanager configuration proper (what `amtool check-config` reads)."""
    return {
        "templates": [TEMPLATE_FILE],
        "route": {
            "receiver": RECEIVER,
            "group_by": [str(label) for label in GROUP_BY],
            "group_wait": GROUP_WAIT,
            "group_interval": GROUP_INTERVAL,
            "repeat_interval": REPEAT_INTERVAL,
        },
        "receivers": [
            {
                "name": RECEIVER,
                "sns_configs": [
                    {
                        "topic_arn": topic_arn,
                        "sigv4": {"region": region},
                        "subject": _use(SUBJECT_TEMPLATE),
                        "message": _use(MESSAGE_TEMPLATE),
                        "attributes": {CLUSTER_ATTRIBUTE: cluster},
                        "send_resolved": True,
                    }
                ],
            }
        ],
    }


class _Blocks(yaml.SafeDumper):
    """Writes a string of several lines as a literal block (`|`), as AMP's examples do."""


def _string(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Blocks.add_representer(str, _string)


def alert_manager_definition(cluster: str, topic_arn: str, region: str) -> str:
    """AMP's alert manager definition (YAML) for one cluster's workspace."""
    config = yaml.dump(
        alertmanager_config(cluster, topic_arn, region), Dumper=_Blocks, sort_keys=False
    )
    return yaml.dump(
        {"template_files": {TEMPLATE_FILE: TEMPLATE}, "alertmanager_config": config},
        Dumper=_Blocks,
        sort_keys=False,
        width=1000,
    )
