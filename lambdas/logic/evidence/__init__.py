"""What an approver weighs, gathered and judged: the alarm and report summaries kept on an
incident (`summaries`), HyperPod's own view of the node (`hyperpod_view`), the GPUs' hardware
telemetry (dcgm-exporter series, XIDs), the node's earlier incidents (`history`), the checkpoint
to resume from, and the recommended recovery tier (`recommendation.judge`, the one place an
incident is judged; the incident stores what it returns). How it is worded for people is
`sdc_remediation.lambdas.wording`'s, from the record; nothing here words a card."""
