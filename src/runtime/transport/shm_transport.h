// The shared-memory transport: peers on this host. Each connection is a ring
// in a segment its receiver creates and its sender maps (two rounds), with
// both ranks' doorbells (runtime/transport/bells.h); where the ranks may
// read one another's memory (CHORUS_CMA), large messages travel by
// reference and are copied once.
#pragma once

#include <memory>

#include "runtime/transport/peer_transport.h"

namespace chorus::runtime {

bool shmReaches(const PeerPlace& peer);
Result<std::unique_ptr<PeerTransport>> createShmTransport(TransportContext& context);

}  // namespace chorus::runtime
