"""Communicators of the C API over numpy arrays (chorus.Comm), and groups:
calls between group_start() and group_end() are issued together at the end
(their arrays are kept alive until then)."""

from chorus._chorus import Comm, group_end, group_start, unique_id

__all__ = ["Comm", "unique_id", "group_start", "group_end"]
