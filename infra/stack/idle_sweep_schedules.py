"""The idle sweeps' schedules (`sdc:idleSweep`, read by `idle_sweep`): one EventBridge Scheduler
schedule per swept cluster, invoking the `sweep_idle` function with that cluster's sweep request."""

from __future__ import annotations

import json
from dataclasses import dataclass

from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_scheduler as scheduler
from constructs import Construct

from sdc_remediation.infra.stack.idle_sweep import IdleSweep


@dataclass(frozen=True)
class IdleSweepsProps:
    sweep: IdleSweep
    function: lambda_.IFunction


class IdleSweeps(Construct):
    """One schedule per swept cluster (`AWS::Scheduler::Schedule`), each invoking the sweep
    function with the cluster's request, through a role that may invoke only that function."""

    def __init__(self, scope: Construct, construct_id: str, *, props: IdleSweepsProps) -> None:
        super().__init__(scope, construct_id)
        self.role = iam.Role(
            self,
            "SchedulerRole",
            assumed_by=iam.ServicePrincipal("scheduler.amazonaws.com"),
            description="EventBridge Scheduler: invokes the idle sweep function only",
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="InvokeIdleSweep",
                actions=["lambda:InvokeFunction"],
                resources=[props.function.function_arn],
            )
        )
        self.schedules: list[scheduler.CfnSchedule] = []
        for cluster in props.sweep.clusters:
            self.schedules.append(
                scheduler.CfnSchedule(
                    self,
                    f"Sweep{_id(cluster)}",
                    description=f"Idle sweep of HyperPod cluster {cluster}"[:512],
                    schedule_expression=f"rate({props.sweep.every_minutes} minutes)",
                    flexible_time_window=scheduler.CfnSchedule.FlexibleTimeWindowProperty(
                        mode="OFF"
                    ),
                    state="ENABLED",
                    target=scheduler.CfnSchedule.TargetProperty(
                        arn=props.function.function_arn,
                        role_arn=self.role.role_arn,
                        input=json.dumps(props.sweep.request(cluster).to_input(), sort_keys=True),
                        retry_policy=scheduler.CfnSchedule.RetryPolicyProperty(
                            maximum_retry_attempts=0
                        ),
                    ),
                )
            )


def _id(cluster: str) -> str:
    return "".join(part.title() for part in cluster.replace("_", "-").split("-"))
