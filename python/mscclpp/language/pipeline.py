"""The older name of mscclpp.language.loop."""

from .loop import LoopIterationContext  # noqa: F401
