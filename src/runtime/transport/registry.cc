// The transport table: one row per transport (runtime/transport/
// peer_transport.h says what a row holds). Adding a transport is its own
// files plus one row here.
#include "runtime/transport/network.h"
#include "runtime/transport/shm_transport.h"
#include "runtime/transport/tcp_transport.h"

namespace chorus::runtime {
namespace {

constexpr TransportChoice kTransports[] = {
    {"shm", "shared memory with ranks", 1, true, &shmReaches, &createShmTransport},
    {"tcp", "TCP to ranks", 10, false, &tcpReaches, &createTcpTransport},
};

}  // namespace

std::span<const TransportChoice> transports() { return kTransports; }

}  // namespace chorus::runtime
