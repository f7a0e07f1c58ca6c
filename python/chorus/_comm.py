"""Communicators of the C API over numpy arrays (chorus.Comm)."""

from chorus._chorus import Comm, group_end, group_start, unique_id

__all__ = ["Comm", "unique_id", "group_start", "group_end"]
