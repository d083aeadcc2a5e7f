"""What the resilience figures record: their ``FIGURE`` lines and memory readings."""

from __future__ import annotations

import gc
import os
import sys

__all__ = ["figure", "rss_bytes"]


def figure(n: int, **values: object) -> str:
    """Print (and return) the one line ``FIGURE <n>: key=value ...`` a figure test records."""

    def fmt(v: object) -> str:
        if isinstance(v, float):
            return f"{v:.3f}"
        if isinstance(v, (list, tuple)):
            return "[" + ",".join(fmt(x) for x in v) + "]"
        return str(v)

    line = f"FIGURE {n}: " + " ".join(f"{k}={fmt(v)}" for k, v in values.items())
    sys.stdout.write("\n" + line + "\n")
    sys.stdout.flush()
    return line


def rss_bytes() -> int:
    """The resident set size of this process now (``/proc/self/statm``), after a full GC."""
    gc.collect()
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE")
