"""What an approver weighs, and how it is put to people: the alarms and reports attached to an
incident, the node's history, HyperPod's own view, the GPUs' hardware telemetry (dcgm-exporter
series, XIDs), the recommended recovery tier, the checkpoint to resume from, and the approval
card and notices (plain text and chat) that word it all."""
