"""Number formatting shared by the timing table and the trace report."""
from __future__ import annotations


def format_us(us: float) -> str:
    """Microseconds as us, ms or s with a readable precision."""
    if us >= 1e6:
        return f"{us / 1e6:.2f} s"
    if us >= 1e3:
        return f"{us / 1e3:.2f} ms"
    return f"{us:.1f} us"


def format_bytes(n: float) -> str:
    """Bytes in binary units (B, KiB, MiB, GiB)."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{int(n)} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"
