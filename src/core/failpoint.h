// Fault injection for tests (docs/testing.md "Fault injection"): named
// points in the runtime where a process can be made to fail on purpose,
// armed by the environment:
//
//   CHORUS_FAILPOINT=NAME[@N]=ACTION[;NAME[@N]=ACTION...]
//
// fires the N-th time (default the first) this process passes NAME, then
// every later time for the actions that last (delay, drop). Actions:
//   kill      SIGKILL this process (a crash: nothing is cleaned up)
//   stop      SIGSTOP this process (a hang: sockets stay open)
//   exit      _exit(7) (leaves without destroying anything)
//   delay:MS  sleep MS milliseconds, here and at every later pass
//   reset     the caller aborts its connection (TCP: an RST to the peer)
//   drop      the caller silently stops sending, here and at every later pass
// The points: bootstrap.connect, bootstrap.allgather, fabric.create,
// step (every executor step), peer.read (a direct read of a peer's
// memory), tcp.send (the TCP transport's sends), shutdown (communicator
// destruction), staged.ready (a staged GPU call just made visible to its
// stream). A malformed setting is reported once and ignored.
// Unarmed, a point costs one relaxed atomic load.
#pragma once

#include <atomic>
#include <string_view>

namespace chorus {

// What the caller of a point must do itself; the other actions happen inside.
enum class FailAction { kNone, kReset, kDrop };

namespace failpoint_detail {
extern std::atomic<bool> armed;
FailAction hit(std::string_view name);
}  // namespace failpoint_detail

inline FailAction failpoint(std::string_view name) {
  if (!failpoint_detail::armed.load(std::memory_order_relaxed)) return FailAction::kNone;
  return failpoint_detail::hit(name);
}

}  // namespace chorus
