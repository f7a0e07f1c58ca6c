"""JSON(): the program's execution plan, proven by Chorus."""

import sys as _sys

from .internal.globals import get_program
from .internal.plan import caller


def JSON():
    """The plan as MSCCL++'s DSL writes it, once Chorus has proven it: a
    wrong program prints its findings at the lines of the .py that made the
    operations (file:line: error[E705]: rank 1 tb 0 op 3: ...) on stderr
    and exits with status 1. Warnings (MSCCL++'s executor limits) are
    printed and the plan is returned."""
    import chorus._chorus as native

    prog = get_program()
    where = caller()
    text = prog.to_json()
    res = native.verify_plan(text, prog.name + ".json")
    for d in res["diagnostics"]:
        if d.severity == "note":
            continue
        f, line = prog._origin(d.rank, d.tb, d.step, d.message) or where
        site = " ".join(f"{k} {v}" for k, v in (("rank", d.rank), ("tb", d.tb), ("op", d.step))
                        if v >= 0)
        print(f"{f}:{line}: {d.severity}[{d.code}]: {site + ': ' if site else ''}{d.message}",
              file=_sys.stderr)
    if not res["correct"]:
        print(f"{prog.name}: the plan is wrong; Chorus does not print it", file=_sys.stderr)
        _sys.stdout.flush()
        _sys.exit(1)
    return res["text"]


