#include "runtime/transport/shm_transport.h"

#include <utility>
#include <vector>

#include "runtime/transport/bells.h"
#include "runtime/transport/local_transport.h"
#include "runtime/transport/shm.h"

namespace chorus::runtime {
namespace {

class ShmFabricLinks final : public FabricLinks {
 public:
  ShmFabricLinks(RankBells& bells) : bells_(bells) {}

  Result<std::unique_ptr<Connection>> open(int round, const ConnectionSpec& c) override {
    const int me = bells_.me();
    // Round 0: the receiver creates the ring (a rank's connection to
    // itself, too); round 1: the sender maps it.
    const bool create = round == 0 && c.to == me;
    if (!create && !(round == 1 && c.from == me && c.to != me)) return {nullptr};
    const size_t bytes = LocalConnection::ringBytes(c.slots, c.slotBytes);
    auto s = create ? Segment::create(c.name, bytes) : Segment::open(c.name, bytes);
    if (!s.isOk()) return s.status();
    auto conn =
        std::make_unique<LocalConnection>(s.value()->data(), create, c.slots, c.slotBytes,
                                          bells_.crossMemoryAttach(), RankBells::kMinRefBytes);
    conn->setDoorbells(&bells_.bell(c.from), &bells_.bell(c.to));
    if (create) created_.push_back(s.value().get());
    segments_.push_back(std::move(s).value());
    return std::unique_ptr<Connection>(std::move(conn));
  }

  // Once every sender has mapped its ring, no name is needed any more.
  void opened() override {
    for (Segment* s : created_) s->unlink();
    created_.clear();
  }

 private:
  RankBells& bells_;
  std::vector<std::unique_ptr<Segment>> segments_;
  std::vector<Segment*> created_;
};

class ShmTransport final : public PeerTransport {
 public:
  explicit ShmTransport(RankBells& bells) : bells_(bells) {}
  std::unique_ptr<FabricLinks> beginFabric() override {
    return std::make_unique<ShmFabricLinks>(bells_);
  }

 private:
  RankBells& bells_;
};

}  // namespace

bool shmReaches(const PeerPlace& peer) { return peer.sameHost; }

Result<std::unique_ptr<PeerTransport>> createShmTransport(TransportContext& context) {
  return std::unique_ptr<PeerTransport>(std::make_unique<ShmTransport>(context.bells));
}

}  // namespace chorus::runtime
