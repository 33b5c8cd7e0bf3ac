"""What an approver weighs, and how it is put to people: the alarms and reports attached to an
incident, HyperPod's own view of the node, the GPUs' hardware telemetry (dcgm-exporter series,
XIDs), the recommended recovery tier, the checkpoint to resume from, and the approval card and
notices (plain text and chat) that word it all. It reads records and ports, and writes
nothing of its own."""
