"""What dcgm-exporter exports about a GPU's hardware health, and how a `query_range` answer of
its series reads.

Each family is one kind of fault counter or flag, under the names dcgm-exporter gives it: up to
4.8 it exports DCGM's legacy field names (`DCGM_FI_DEV_ROW_REMAP_FAILURE`); 4.9 renamed them to
DCGM 4.7's (`DCGM_FI_DEV_ROW_REMAP_FAILED`; DCGM's dcgm_fields.h lists each old name as an alias
of its new one): both are asked for.

Where the series are stored changes the names once more: the HyperPod observability add-on
scrapes the exporter with an OpenTelemetry collector, whose Prometheus remote-write appends
`_total` to every counter-type family (AWS's HyperPod dashboards query
`DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS_total`); gauges keep their names. So every name is asked
for with and without `_total` (`Family.stored_names`), whatever type a cluster's exporter
configuration gives it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from sdc_remediation.lambdas.models.errors import TelemetryBadAnswer

NODE_LABELS: Final = ("Hostname", "hostname")
"""dcgm-exporter's node label: `Hostname` up to 4.8.2, `hostname` since 4.8.3."""
TOTAL_SUFFIX: Final = "_total"
"""What the add-on's collector appends to a counter-type family's name."""
GPU_LABELS: Final = ("UUID", "uuid")
"""dcgm-exporter's GPU UUID label (`uuid` with its `--use-old-namespace` option)."""
DCGM_BLANK: Final = float(0x7FFFFFFFFFFFFFF0)
"""DCGM_INT64_BLANK: DCGM's "no value" (and the values above it); never a reading."""


class SeriesKind(StrEnum):
    """How a counter family's series read: what one value means."""

    XID = "xid"
    XID_COUNT = "xid_count"
    """dcgm-exporter's own count of each XID (label `xid`) over its recent window."""
    FLAG = "flag"
    COUNT = "count"
    CLOCKS = "clocks"
    TEMPERATURE = "temperature"


@dataclass(frozen=True, slots=True)
class Family:
    key: str
    names: tuple[str, ...]
    """As dcgm-exporter exports it: its legacy name first (up to 4.8), DCGM 4.7's (4.9 on)."""
    kind: SeriesKind
    words: str
    short: str
    """A name for lists ("not exported: ...")."""
    history: bool = False
    """A non-zero lifetime count is worth showing even when it did not change in the window."""

    @property
    def counter(self) -> bool:
        """Whether it is stored as a counter (the add-on's collector then stores it under its
        name with `_total`; AWS's sample queries read `DCGM_EXP_XID_ERRORS_COUNT_total`)."""
        return self.kind in (SeriesKind.COUNT, SeriesKind.XID_COUNT)

    @property
    def stored_names(self) -> tuple[str, ...]:
        """Every name its series can have in a workspace: each exported name as is and with
        `_total`."""
        return tuple(n for name in self.names for n in (name, name + TOTAL_SUFFIX))


FAMILIES: Final = (
    Family(
        "xid",
        ("DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_XID_ERROR"),
        SeriesKind.XID,
        "XID errors",
        "XID",
    ),
    Family(
        "xid_count",
        ("DCGM_EXP_XID_ERRORS_COUNT",),
        SeriesKind.XID_COUNT,
        "XIDs counted by dcgm-exporter",
        "XID count",
    ),
    Family(
        "row_remap_failed",
        ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "DCGM_FI_DEV_ROW_REMAP_FAILED"),
        SeriesKind.FLAG,
        "row remap FAILED (no spare row left to repair its memory)",
        "row remap failure",
    ),
    Family(
        "row_remap_pending",
        ("DCGM_FI_DEV_ROW_REMAP_PENDING",),
        SeriesKind.FLAG,
        "row remap pending (a GPU reset applies it)",
        "row remap pending",
    ),
    Family(
        "retired_pending",
        ("DCGM_FI_DEV_RETIRED_PENDING", "DCGM_FI_DEV_PAGE_RETIRED_PENDING"),
        SeriesKind.FLAG,
        "page retirement pending (a GPU reset applies it)",
        "retirement pending",
    ),
    Family(
        "uncorrectable_remapped_rows",
        ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_ROW_REMAP_UNCORRECTABLE_TOTAL"),
        SeriesKind.COUNT,
        "rows remapped for uncorrectable errors",
        "uncorrectable remapped rows",
        history=True,
    ),
    Family(
        "correctable_remapped_rows",
        ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_ROW_REMAP_CORRECTABLE_TOTAL"),
        SeriesKind.COUNT,
        "rows remapped for correctable errors",
        "correctable remapped rows",
    ),
    Family(
        "retired_dbe",
        ("DCGM_FI_DEV_RETIRED_DBE", "DCGM_FI_DEV_PAGE_RETIRED_DBE_TOTAL"),
        SeriesKind.COUNT,
        "pages retired for double-bit errors",
        "retired pages (DBE)",
        history=True,
    ),
    Family(
        "retired_sbe",
        ("DCGM_FI_DEV_RETIRED_SBE", "DCGM_FI_DEV_PAGE_RETIRED_SBE_TOTAL"),
        SeriesKind.COUNT,
        "pages retired for single-bit errors",
        "retired pages (SBE)",
    ),
    Family(
        "ecc_dbe",
        ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",),
        SeriesKind.COUNT,
        "uncorrectable (double-bit) ECC errors since the driver loaded",
        "ECC DBE total",
        history=True,
    ),
    Family(
        "ecc_sbe",
        ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",),
        SeriesKind.COUNT,
        "correctable (single-bit) ECC errors",
        "ECC SBE total",
    ),
    Family(
        "pcie_replay",
        ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "DCGM_FI_DEV_PCIE_REPLAY_TOTAL"),
        SeriesKind.COUNT,
        "PCIe replays",
        "PCIe replays",
    ),
    Family(
        "nvlink_crc_flit",
        (
            "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
            "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_TOTAL",
        ),
        SeriesKind.COUNT,
        "NVLink flow-control CRC errors",
        "NVLink CRC flit errors",
    ),
    Family(
        "nvlink_crc_data",
        (
            "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
            "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_TOTAL",
        ),
        SeriesKind.COUNT,
        "NVLink data CRC errors",
        "NVLink CRC data errors",
    ),
    Family(
        "nvlink_replay",
        ("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_TOTAL"),
        SeriesKind.COUNT,
        "NVLink replays",
        "NVLink replays",
    ),
    Family(
        "nvlink_recovery",
        (
            "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
            "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_TOTAL",
        ),
        SeriesKind.COUNT,
        "NVLink recoveries",
        "NVLink recoveries",
    ),
    Family(
        "clocks",
        ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"),
        SeriesKind.CLOCKS,
        "clock throttle reasons",
        "clock throttle reasons",
    ),
    Family(
        "temperature",
        ("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_GPU_TEMP_CELSIUS"),
        SeriesKind.TEMPERATURE,
        "GPU temperature",
        "GPU temperature",
    ),
)
FAMILY_OF: Final = {name: family for family in FAMILIES for name in family.stored_names}
"""Each name a series can have in the workspace (`Family.stored_names`), to its family."""


def stored_name(name: str) -> str:
    """The name an exported series gets in the add-on's workspace: `_total` appended to a
    counter-type family's."""
    return name + TOTAL_SUFFIX if FAMILY_OF[name].counter else name


HARDWARE_THROTTLING: Final[dict[int, str]] = {
    0x08: "HW slowdown",
    0x20: "SW thermal slowdown",
    0x40: "HW thermal slowdown",
    0x80: "HW power brake",
}
"""DCGM_CLOCKS_EVENT_REASON_* bits that mean the hardware protected itself. Left out: GPU idle
(0x1), application clocks (0x2), SW power cap (0x4: normal under load), sync boost (0x10),
display clocks (0x100)."""
THROTTLING_MASK: Final = sum(HARDWARE_THROTTLING)


@dataclass(frozen=True, slots=True)
class Series:
    labels: Mapping[str, str]
    points: tuple[tuple[float, float], ...]
    """(epoch seconds, value), oldest first; DCGM's blank values and NaN left out."""

    @property
    def name(self) -> str:
        return self.labels.get("__name__", "")

    @property
    def gpu_uuid(self) -> str | None:
        return next((self.labels[k] for k in GPU_LABELS if self.labels.get(k)), None)


def parse_matrix(data: Mapping[str, Any]) -> list[Series]:
    """The `data` of a `query_range` answer as series. Raises TelemetryBadAnswer on anything
    that is not a matrix of [time, "value"] points."""
    if data.get("resultType") != "matrix" or not isinstance(data.get("result"), list):
        raise TelemetryBadAnswer(
            f"the answer is not a matrix (resultType {data.get('resultType')!r})"
        )
    found = []
    for item in data["result"]:
        labels = item.get("metric") if isinstance(item, dict) else None
        values = item.get("values") if isinstance(item, dict) else None
        if not isinstance(labels, dict) or not isinstance(values, list):
            raise TelemetryBadAnswer("a series of the answer has no metric or values")
        points = []
        for point in values:
            try:
                at, raw = float(point[0]), float(point[1])
            except (TypeError, ValueError, IndexError) as err:
                raise TelemetryBadAnswer(
                    f"a point of the answer is not [time, value]: {point!r}"
                ) from err
            if math.isfinite(raw) and raw < DCGM_BLANK:
                points.append((at, raw))
        found.append(Series({str(k): str(v) for k, v in labels.items()}, tuple(points)))
    return found
