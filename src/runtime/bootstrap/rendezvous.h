// The root behind chorusGetUniqueId (issue 4), as NCCL's bootstrap root: a
// thread of the process that made the id listens at an address the id
// carries, with a random secret. Every rank of the communicator — threads of
// one process, processes, hosts — connects, proves it holds the secret and
// says which process it lives in. Once all have come, the root answers each:
// "threads" when every rank lives in one process (they then share an
// in-process world), else "processes" with the address where rank 0's
// bootstrap listens (rank 0 opened it before it came). Then the root closes
// everything and its thread ends; it also ends at its deadline.
//
// The id's text is "chorus-id:HOST:PORT:SECRET". The root binds the first
// IPv4 address of an interface that is up and not loopback, else 127.0.0.1;
// CHORUS_SOCKET_IFNAME=PREFIX picks the first interface whose name starts
// with PREFIX instead (as NCCL_SOCKET_IFNAME; "lo" for loopback).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"
#include "runtime/bootstrap/bootstrap.h"

namespace chorus::runtime {

inline constexpr std::string_view kRendezvousTag = "chorus-id:";

// Starts a root that waits `timeoutMs` for the ranks; returns the id text.
Result<std::string> startRendezvousRoot(int timeoutMs);

// What the root told a rank.
struct Meeting {
  bool threads = false;  // every rank lives in this process
  // Otherwise rank 0 gets its listening bootstrap (accept() next); the other
  // ranks get where to connect.
  std::unique_ptr<Bootstrap> listening;
  BootstrapConfig config;
};

// Rank `rank` of `nranks` meets the others at the root of `id`. Errors:
// kInvalidArgument (a malformed id; the root refused us, with its reason),
// kTimeout, kIoError.
Result<Meeting> meetAtRoot(std::string_view id, int rank, int nranks, int timeoutMs);

namespace wire {
// The root's answer: a verdict ("threads", "processes", "refused") and its
// text (rank 0's address, or why).
struct Verdict {
  std::string kind;
  std::string text;
};
std::string encodeVerdict(const Verdict& v);
Result<Verdict> decodeVerdict(std::string_view bytes);
}  // namespace wire

}  // namespace chorus::runtime
