"""Stand-in for AWS's ``test/utils/scripts/remote_lock_scripts.py``: the NeuronCore lock protocol's result types.

AWS's harness copies that script to each Trainium host and runs it there to lock, drain and release cores;
the client (``test/utils/core_lock_client.py``) and manager read its outcome as a ``LockStatus`` (from the
script's exit code) and a ``LockResult`` (its JSON). Both are plain data and are defined here. The script
itself (locking cores on a host) has no meaning without a host: running this module says so.

The exit codes are this stand-in's own (the real script's are not public). The client compares a remote
exit code with ``LockStatus.<X>.exit_code``, so they only have to agree with a script that never runs here.
"""
from __future__ import annotations

import dataclasses
import enum
import json
import sys
from typing import Any, Optional

from . import HardwarePathUnavailable

__all__ = ["LockStatus", "LockResult", "main"]

_EXIT_CODE_BASE = 100  # above the shell's own codes (1, 2, 126, 127, 128+signal)


class LockStatus(enum.Enum):
    """The outcome of one lock-helper command on a host."""

    ALLOCATED = "allocated"
    NO_CORES = "no_cores"
    DRAINING = "draining"
    DRAINED = "drained"
    UNDRAINED = "undrained"
    RELEASED = "released"
    ERROR = "error"
    FLOCK_TIMEOUT = "flock_timeout"

    @property
    def exit_code(self) -> int:
        return _EXIT_CODE_BASE + list(LockStatus).index(self)

    @classmethod
    def from_exit_code(cls, code: int) -> "LockStatus":
        """The status an exit code stands for; ERROR for any code that is none of them."""
        for status in cls:
            if status.exit_code == code:
                return status
        return cls.ERROR


@dataclasses.dataclass
class LockResult:
    """What the lock helper reports: the status, the cores it allocated, when the longest lock expires."""

    status: LockStatus
    cores: list = dataclasses.field(default_factory=list)
    max_lock_expiry: int = 0
    message: str = ""

    def to_json(self) -> str:
        return json.dumps({"status": self.status.value, "cores": list(self.cores),
                           "max_lock_expiry": self.max_lock_expiry, "message": self.message})

    @classmethod
    def from_json(cls, text: str) -> "LockResult":
        data: dict[str, Any] = json.loads(text)
        return cls(status=LockStatus(data["status"]), cores=list(data.get("cores", [])),
                   max_lock_expiry=int(data.get("max_lock_expiry", 0)), message=str(data.get("message", "")))


def main(argv: Optional[list] = None) -> int:
    raise HardwarePathUnavailable(
        "remote_lock_scripts locks NeuronCores on a Trainium host; torchneuron_ext's stand-in has no host to "
        "lock (AWS's script is not in the public NKI Library). Run the suite with --test-mode simulation")


if __name__ == "__main__":
    sys.exit(main())
