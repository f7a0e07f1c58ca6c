// Internal invariant checks. A failed CHORUS_CHECK is a bug in Chorus, never a
// user error: it prints where and why, then aborts. User errors are
// Diagnostics (diagnostic.h) or Status values (status.h).
#pragma once

#include <cstdio>
#include <cstdlib>

#define CHORUS_CHECK(cond, msg)                                                                 \
  do {                                                                                          \
    if (!(cond)) {                                                                              \
      std::fprintf(stderr, "chorus internal error at %s:%d: check '%s' failed: %s\n", __FILE__, \
                   __LINE__, #cond, msg);                                                       \
      std::abort();                                                                             \
    }                                                                                           \
  } while (0)
