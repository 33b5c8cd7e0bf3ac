"""docs/operate.md, "Idle sweeps": its tables are the code's (the sweep's defaults and the reasons
a node is not checked)."""

from __future__ import annotations

import json

from sdc_remediation.infra.stack.idle_sweep import FIELDS, IdleSweep
from sdc_remediation.lambdas.models.sweep import SkipReason
from tests.conftest import REPO
from tests.docs.tables import table_after, ticked

OPERATE = (REPO / "docs" / "operate.md").read_text()


def test_the_sweep_settings_table_gives_each_key_and_its_default():
    rows = {
        ticked(row[0])[0]: json.loads(ticked(row[1])[0])
        for row in table_after(OPERATE, "The bounds, all at once")
    }
    defaults = IdleSweep()

    assert set(rows) == set(FIELDS) - {"clusters"}
    for key, value in rows.items():
        shown = getattr(defaults, FIELDS[key])
        assert (list(shown) if isinstance(shown, tuple) else shown) == value, key


def test_the_reasons_table_names_every_reason_a_node_is_not_checked():
    reasons = [ticked(row[0])[0] for row in table_after(OPERATE, "A node is never checked, and")]

    assert reasons == [r.value for r in SkipReason]
