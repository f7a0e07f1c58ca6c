// Settings from the environment (CHORUS_*), read the same way everywhere.
#pragma once

namespace chorus {

// A non-negative whole number from environment variable `name`, or
// `fallback` where it is unset or empty; a value that is not one is
// ignored with a warning naming it.
long envLong(const char* name, long fallback);

}  // namespace chorus
