"""The DSL's machinery: what user code does not name."""
