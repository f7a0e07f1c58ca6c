"""chorus.Error: what every failing Chorus call raises."""


class Error(Exception):
    """A Chorus call failed: bad input, an algorithm that is wrong, a failed run.

    ``str(error)`` says what went wrong; ``error.diagnostics`` lists the
    findings (chorus.Diagnostic: code, file, line, rank, tb, step, message)
    when there are any, e.g. the verifier's or the compiler's.
    """

    def __init__(self, message, diagnostics=()):
        super().__init__(message)
        self.message = message
        self.diagnostics = list(diagnostics)

    def __str__(self):
        if len(self.diagnostics) <= 1:
            return self.message
        rest = "\n".join("  " + str(d) for d in self.diagnostics[:20])
        more = len(self.diagnostics) - 20
        return self.message + "\n" + rest + (f"\n  ... ({more} more)" if more > 0 else "")
