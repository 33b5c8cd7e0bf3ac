"""The pause switch on moto's SSM.

The guard slots, storm flags and holds, held locks and history on the incidents table are
checked on the DynamoDB adapter and the in-memory fake alike by tests/contract."""

from __future__ import annotations

import pytest

from sdc_remediation.lambdas.adapters.ssm import SsmPauseSwitch
from sdc_remediation.lambdas.models.errors import DependencyFailed
from tests.integration.conftest import SESSION


def test_the_pause_switch_reads_the_parameter_value(aws_env):
    ssm = SESSION.client("ssm")
    ssm.put_parameter(Name="/SdcRemediation/paused", Value="true", Type="String")

    assert SsmPauseSwitch("/SdcRemediation/paused", lambda: ssm).read() == "true"


def test_a_missing_pause_parameter_raises_a_domain_error(aws_env):
    switch = SsmPauseSwitch("/SdcRemediation/paused", lambda: SESSION.client("ssm"))

    with pytest.raises(DependencyFailed, match="GetParameter"):
        switch.read()
