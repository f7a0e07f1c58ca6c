"""The program being written (the innermost ``with CollectiveProgram``)."""

_program = None


def set_program(p):
    global _program
    _program = p


def get_program():
    if _program is None:
        raise RuntimeError("No Program in context")
    return _program
