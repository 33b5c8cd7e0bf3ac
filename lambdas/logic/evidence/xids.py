"""What an XID means, and whether it usually means the hardware: the common ones of NVIDIA's
published XID catalog (the driver's numbered error events, logged as `NVRM: Xid`), in plain
words for the approval card.

An XID in the window is always shown as a signal; its meaning tells the approver how much it
says about the GPU. An application fault (13, 31, 43) says little about the hardware; a memory
or bus fault (48, 63, 64, 74, 79, 92, 94, 95) says a lot. The catalog is not exhaustive: an XID
it does not hold is named as such, never guessed at.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final


class XidCause(StrEnum):
    """What usually lies behind an XID, in the catalog's own terms."""

    HARDWARE = "hardware"
    """A fault of the GPU, its memory, its links or its bus: the node is the suspect."""
    APPLICATION = "application"
    """Usually the program on the GPU (an illegal address, a bad instruction), not the hardware;
    hardware only if it repeats across programs."""
    DRIVER_OR_HARDWARE = "driver_or_hardware"
    """The driver, the GPU's firmware or the hardware: a GPU reset or a reboot clears the first
    two; a repeat points at the hardware."""
    FOLLOW_ON = "follow_on"
    """Reported because of an earlier error or to say what a recovery needs: not a fault in
    itself; look at the XID before it."""

    @property
    def words(self) -> str:
        return _CAUSE_WORDS[self]


_CAUSE_WORDS: Final = {
    XidCause.HARDWARE: "usually hardware",
    XidCause.APPLICATION: "usually the application, not the hardware",
    XidCause.DRIVER_OR_HARDWARE: "driver, firmware or hardware",
    XidCause.FOLLOW_ON: "follows an earlier error",
}


@dataclass(frozen=True, slots=True)
class Xid:
    code: int
    meaning: str
    cause: XidCause

    @property
    def hardware(self) -> bool:
        """Whether it usually means the hardware is at fault."""
        return self.cause is XidCause.HARDWARE

    @property
    def text(self) -> str:
        return f"{self.meaning} ({self.cause.words})"


CATALOG: Final[dict[int, Xid]] = {
    xid.code: xid
    for xid in (
        Xid(8, "GPU stopped processing (a channel idle timeout)", XidCause.DRIVER_OR_HARDWARE),
        Xid(13, "graphics engine exception", XidCause.APPLICATION),
        Xid(31, "GPU memory page fault (an illegal address)", XidCause.APPLICATION),
        Xid(32, "invalid or corrupted push buffer stream", XidCause.DRIVER_OR_HARDWARE),
        Xid(43, "GPU stopped processing (the faulting channel was reset)", XidCause.APPLICATION),
        Xid(45, "preemptive cleanup after an earlier error", XidCause.FOLLOW_ON),
        Xid(48, "double-bit (uncorrectable) ECC error", XidCause.HARDWARE),
        Xid(61, "internal micro-controller breakpoint or warning", XidCause.DRIVER_OR_HARDWARE),
        Xid(62, "internal micro-controller halt", XidCause.DRIVER_OR_HARDWARE),
        Xid(
            63,
            "ECC page retirement or row remap recorded (a GPU reset applies it)",
            XidCause.HARDWARE,
        ),
        Xid(64, "ECC page retirement or row remap failed", XidCause.HARDWARE),
        Xid(69, "graphics engine class error", XidCause.APPLICATION),
        Xid(74, "NVLink error", XidCause.HARDWARE),
        Xid(79, "GPU has fallen off the bus", XidCause.HARDWARE),
        Xid(92, "high single-bit ECC error rate", XidCause.HARDWARE),
        Xid(
            94,
            "contained uncorrectable ECC error (only the program using that memory was hit)",
            XidCause.HARDWARE,
        ),
        Xid(
            95,
            "uncontained uncorrectable ECC error (every program on the GPU was hit)",
            XidCause.HARDWARE,
        ),
        Xid(109, "context switch timeout", XidCause.DRIVER_OR_HARDWARE),
        Xid(
            119,
            "GSP RPC timeout (the GPU's system processor did not answer)",
            XidCause.DRIVER_OR_HARDWARE,
        ),
        Xid(120, "GSP error (the GPU's system processor failed)", XidCause.DRIVER_OR_HARDWARE),
        Xid(121, "C2C (chip-to-chip) link error", XidCause.HARDWARE),
        Xid(
            154,
            "GPU recovery action changed (the driver says what recovery needs)",
            XidCause.FOLLOW_ON,
        ),
    )
}


def describe(code: int) -> str:
    """The XID's meaning and usual cause, or that the catalog here does not hold it."""
    known = CATALOG.get(code)
    if known is None:
        return "not in the catalog the card knows: look it up in NVIDIA's XID catalog"
    return known.text
