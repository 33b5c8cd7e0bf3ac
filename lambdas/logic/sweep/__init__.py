"""Idle sweeps: HyperPod's deep health checks on idle nodes between jobs, on a schedule.

`run.sweep` is the one entry (the `sweep_idle` function, one schedule per swept cluster): it
reads back the checks its last run started and takes their results (`results`: a failed one is
a trigger like any other, through `claim.open_failed_check`, the intake's opening), then looks
at every node (`looks`: HyperPod, and the cluster's orchestrator for jobs, cordons, drains and
reservations), chooses within the batch, the share of idle nodes, the floor of idle nodes and
the blast-radius guard (`choose`), looks again just before the call, starts the checks, and
audits the run (which nodes, and why each other node was not checked).
"""

from sdc_remediation.lambdas.logic.sweep.run import sweep

__all__ = ["sweep"]
