"""The fault suite: bad input, AWS faults, crashes and duplicates, through the real handlers on
moto with HyperPod played by the project's fake (the `aws` account of tests/integration), and
through the synthesized stack (`LocalRun`) where routing, dead-lettering or the state machine
matter."""

from __future__ import annotations

import os

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from tests.integration.conftest import aws  # noqa: F401  (the moto account fixture)
