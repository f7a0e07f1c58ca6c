"""A pipeline: the operations written inside run iteration by iteration."""

from .internal.globals import get_program
from .internal.plan import Op


class LoopIterationContext:
    """``with LoopIterationContext(unit, num_chunks):`` -- each (rank,
    threadblock)'s operations inside become one ``pipeline`` op that runs
    them over ``unit`` bytes at a time."""

    def __init__(self, unit, num_chunks):
        self.unit = unit
        self.num_chunks = num_chunks
        self._ops = {}

    def add_operation(self, rank, tb, op):
        self._ops.setdefault((rank, tb), []).append(op)

    def __enter__(self):
        get_program().set_loop_context(self)
        return self

    def __exit__(self, *exc):
        prog = get_program()
        prog.set_loop_context(None)
        for (rank, tb), ops in self._ops.items():
            prog.add_operation(rank, tb, Op("pipeline", ops[0].where, ops=ops,
                                            iter_context=(self.unit, self.num_chunks)))
        return False
