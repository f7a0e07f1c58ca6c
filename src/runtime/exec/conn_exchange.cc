#include "runtime/exec/conn_exchange.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>

#include "runtime/transport/shm.h"

namespace chorus::runtime {

std::string ConnKey::describe() const {
  return "rank " + std::to_string(from) + " -> rank " + std::to_string(to) + ", channel " +
         std::to_string(channel) + ", instance " + std::to_string(instance);
}

ConnKey keyOf(const PlanConn& c) { return ConnKey{c.instance, c.channel, c.from, c.to}; }

namespace {

std::string hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) {
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

bool unhex(const std::string& text, std::string* out) {
  if (text.size() % 2 != 0) return false;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  out->clear();
  for (size_t i = 0; i < text.size(); i += 2) {
    int hi = nibble(text[i]), lo = nibble(text[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<char>(hi * 16 + lo));
  }
  return true;
}

}  // namespace

std::string hexHandle(const std::string& bytes) { return hex(bytes); }
bool unhexHandle(const std::string& text, std::string* bytes) { return unhex(text, bytes); }

namespace {

Status badBlob(int rank, const std::string& why) {
  return Status(StatusCode::kInvalidArgument,
                "rank " + std::to_string(rank) + "'s connection offers: " + why);
}

}  // namespace

std::string encodeOffers(int rank, const RankOffers& all) {
  nlohmann::json j;
  j["rank"] = rank;
  j["instances"] = all.instances;
  j["protocol"] = all.protocol;
  j["offers"] = nlohmann::json::array();
  for (const ConnOffer& o : all.offers)
    j["offers"].push_back({{"instance", o.key.instance},
                           {"channel", o.key.channel},
                           {"from", o.key.from},
                           {"to", o.key.to},
                           {"slot_bytes", o.slotBytes},
                           {"slots", o.slots},
                           {"handle", hex(o.handle)}});
  return j.dump();
}

Result<RankOffers> decodeOffers(int rank, const std::string& blob) {
  nlohmann::json j = nlohmann::json::parse(blob, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return badBlob(rank, "not a JSON object");
  if (!j.contains("rank") || !j["rank"].is_number_integer() || j["rank"].get<int>() != rank)
    return badBlob(rank, "its \"rank\" is not " + std::to_string(rank));
  for (const char* f : {"instances", "protocol"})
    if (!j.contains(f) || !j[f].is_number_integer())
      return badBlob(rank, std::string("no integer \"") + f + "\"");
  if (!j.contains("offers") || !j["offers"].is_array()) return badBlob(rank, "no \"offers\" array");
  RankOffers all;
  all.instances = j["instances"].get<int>();
  all.protocol = j["protocol"].get<int>();
  std::vector<ConnOffer>& out = all.offers;
  for (size_t i = 0; i < j["offers"].size(); ++i) {
    const nlohmann::json& e = j["offers"][i];
    std::string at = "offer " + std::to_string(i);
    for (const char* f : {"instance", "channel", "from", "to", "slots"})
      if (!e.is_object() || !e.contains(f) || !e[f].is_number_integer())
        return badBlob(rank, at + ": no integer \"" + f + "\"");
    if (!e.contains("slot_bytes") || !e["slot_bytes"].is_number_unsigned())
      return badBlob(rank, at + ": no unsigned \"slot_bytes\"");
    if (!e.contains("handle") || !e["handle"].is_string())
      return badBlob(rank, at + ": no \"handle\" string");
    ConnOffer o;
    o.key = ConnKey{e["instance"].get<int32_t>(), e["channel"].get<int32_t>(),
                    e["from"].get<int32_t>(), e["to"].get<int32_t>()};
    o.slotBytes = e["slot_bytes"].get<uint64_t>();
    o.slots = e["slots"].get<int>();
    if (!unhex(e["handle"].get<std::string>(), &o.handle))
      return badBlob(rank, at + ": its handle is not hexadecimal");
    if (o.key.to != rank)
      return badBlob(rank, at + " is for " + o.key.describe() + ", not a connection into it");
    out.push_back(std::move(o));
  }
  return all;
}

uint64_t connSlotBytes(const PlanConn& c, ir::Protocol protocol, size_t sliceBytes) {
  const size_t msgBytes = static_cast<size_t>(std::max(c.maxCount, 1)) * sliceBytes;
  return (engine::slotBytesFor(protocol, msgBytes) + 15) / 16 * 16;
}

Result<std::vector<engine::ConnView>> exchangeConnections(const FlatPlan& plan, int focus,
                                                          ir::Protocol protocol, size_t sliceBytes,
                                                          int slots, ConnectionExchange& ex) {
  std::vector<engine::ConnView> views(plan.conns.size());
  RankOffers mine;
  mine.instances = plan.instances;
  mine.protocol = static_cast<int>(protocol);
  for (size_t c = 0; c < plan.conns.size(); ++c) {
    if (plan.conns[c].to != focus) continue;
    const uint64_t slotBytes = connSlotBytes(plan.conns[c], protocol, sliceBytes);
    auto region = ex.allocate(connRegionBytes(slotBytes, slots));
    if (!region.isOk()) return region.status();
    unsigned char* p = region.value().data;
    views[c] = engine::ConnView{reinterpret_cast<engine::ConnCounters*>(p),
                                p + sizeof(engine::ConnCounters), slotBytes};
    mine.offers.push_back(ConnOffer{keyOf(plan.conns[c]), slotBytes, slots, region.value().handle});
  }
  auto blobs = ex.allGather(encodeOffers(focus, mine));
  if (!blobs.isOk())
    return Status(blobs.status().code(), "exchanging connections: " + blobs.status().message());
  if (blobs.value().size() != static_cast<size_t>(plan.nranks))
    return Status(StatusCode::kInternal, "the connection exchange returned " +
                                             std::to_string(blobs.value().size()) + " blobs for " +
                                             std::to_string(plan.nranks) + " ranks");
  // Each peer's offers, by key; only the peers this rank sends to matter.
  std::map<int, std::map<ConnKey, ConnOffer>> offered;
  for (const PlanConn& pc : plan.conns) {
    if (pc.from != focus || pc.to == focus || offered.count(pc.to) != 0) continue;
    auto offers = decodeOffers(pc.to, blobs.value()[static_cast<size_t>(pc.to)]);
    if (!offers.isOk()) return offers.status();
    if (offers.value().instances != plan.instances)
      return Status(StatusCode::kInvalidArgument,
                    "rank " + std::to_string(pc.to) + " runs each threadblock as " +
                        std::to_string(offers.value().instances) + " instance(s), rank " +
                        std::to_string(focus) + " as " + std::to_string(plan.instances) +
                        ": every rank must run the same (set the instances, e.g. "
                        "CHORUS_INSTANCES, alike)");
    if (offers.value().protocol != static_cast<int>(protocol))
      return Status(StatusCode::kInvalidArgument, "rank " + std::to_string(pc.to) +
                                                      " lays its slots out for protocol " +
                                                      std::to_string(offers.value().protocol) +
                                                      ", rank " + std::to_string(focus) + " for " +
                                                      std::to_string(static_cast<int>(protocol)) +
                                                      ": every rank must run the same protocol");
    auto& byKey = offered[pc.to];
    for (ConnOffer& o : offers.value().offers) {
      ConnKey k = o.key;
      if (!byKey.emplace(k, std::move(o)).second)
        return badBlob(pc.to, "it offers " + k.describe() + " twice");
    }
  }
  for (size_t c = 0; c < plan.conns.size(); ++c) {
    const PlanConn& pc = plan.conns[c];
    if (pc.from != focus || pc.to == focus) continue;
    ConnKey k = keyOf(pc);
    auto& byKey = offered[pc.to];
    auto it = byKey.find(k);
    if (it == byKey.end())
      return Status(StatusCode::kInvalidArgument,
                    "rank " + std::to_string(pc.to) + " offers no memory for " + k.describe() +
                        ": do all ranks run the same algorithm with the same instances?");
    const ConnOffer& o = it->second;
    if (o.slots != slots)
      return Status(StatusCode::kInvalidArgument,
                    "rank " + std::to_string(pc.to) + " has " + std::to_string(o.slots) +
                        " slots per connection, rank " + std::to_string(focus) + " " +
                        std::to_string(slots) + " (" + k.describe() + ")");
    // The sender writes messages of up to its own slot size: the
    // receiver's slots must hold them (ranks that slice alike agree).
    const uint64_t slotBytes = connSlotBytes(pc, protocol, sliceBytes);
    if (o.slotBytes < slotBytes)
      return Status(StatusCode::kInvalidArgument,
                    "rank " + std::to_string(pc.to) + "'s slots hold " +
                        std::to_string(o.slotBytes) + " bytes, rank " + std::to_string(focus) +
                        " sends up to " + std::to_string(slotBytes) + " (" + k.describe() +
                        "): do all ranks pass the same count and slice size?");
    auto p = ex.open(pc.to, o.handle, connRegionBytes(o.slotBytes, o.slots));
    if (!p.isOk()) return p.status();
    views[c] = engine::ConnView{reinterpret_cast<engine::ConnCounters*>(p.value()),
                                p.value() + sizeof(engine::ConnCounters), o.slotBytes};
  }
  // Nothing is let go (an old region freed, a name removed) before every
  // rank has mapped what it needs.
  if (auto mapped = ex.allGather("mapped"); !mapped.isOk())
    return Status(mapped.status().code(),
                  "exchanging connections (after mapping them): " + mapped.status().message());
  ex.retire();
  return views;
}

namespace {

// What the ranks of one in-process exchange share: the gather's rounds and
// every region (kept until all ranks' exchanges are gone).
struct Shared {
  Shared(int n, int ms) : nranks(n), timeoutMs(ms) {}
  int nranks, timeoutMs;
  std::mutex mu;
  std::condition_variable cv;
  uint64_t round = 0;  // gathers completed
  int arrived = 0;
  std::vector<std::string> blobs, done;
  Status failed;  // a rank abandoned, or a gather timed out: every later one fails
  std::vector<std::unique_ptr<uint64_t[]>> regions;
};

class InProcess final : public ConnectionExchange {
 public:
  InProcess(std::shared_ptr<Shared> s, int rank) : s_(std::move(s)), rank_(rank) {}
  Result<Region> allocate(size_t bytes) override {
    std::lock_guard<std::mutex> lock(s_->mu);
    // Aligned as ConnCounters are (128 bytes), as cudaMalloc's are.
    constexpr size_t kAlign = alignof(engine::ConnCounters);
    auto& mem = s_->regions.emplace_back(new uint64_t[(bytes + kAlign) / 8 + 1]());
    auto at = reinterpret_cast<uintptr_t>(mem.get());
    Region r;
    r.data = reinterpret_cast<unsigned char*>(mem.get()) + (kAlign - at % kAlign) % kAlign;
    r.handle.assign(reinterpret_cast<const char*>(&r.data), sizeof r.data);
    return r;
  }
  Result<unsigned char*> open(int peer, const std::string& handle, size_t) override {
    unsigned char* p = nullptr;
    if (handle.size() != sizeof p)
      return Status(StatusCode::kInvalidArgument,
                    "rank " + std::to_string(peer) + "'s handle is not an address");
    std::memcpy(&p, handle.data(), sizeof p);
    return p;
  }
  Result<std::vector<std::string>> allGather(const std::string& mine) override {
    std::unique_lock<std::mutex> lock(s_->mu);
    if (!s_->failed.isOk()) return s_->failed;
    if (s_->arrived == 0) s_->blobs.assign(static_cast<size_t>(s_->nranks), std::string());
    s_->blobs[static_cast<size_t>(rank_)] = mine;
    const uint64_t round = s_->round;
    if (++s_->arrived == s_->nranks) {
      s_->done = s_->blobs;
      s_->arrived = 0;
      ++s_->round;
      s_->cv.notify_all();
      return s_->done;
    }
    bool met = s_->cv.wait_for(lock, std::chrono::milliseconds(s_->timeoutMs),
                               [&] { return s_->round != round || !s_->failed.isOk(); });
    if (met && s_->round != round) return s_->done;
    if (s_->failed.isOk())
      s_->failed = Status(StatusCode::kTimeout, "rank " + std::to_string(rank_) + " waited " +
                                                    std::to_string(s_->timeoutMs) +
                                                    " ms for its peers at the connection exchange");
    s_->cv.notify_all();
    return s_->failed;
  }
  void abandon(const Status& why) override {
    std::lock_guard<std::mutex> lock(s_->mu);
    if (s_->failed.isOk())
      s_->failed = Status(why.code(), "rank " + std::to_string(rank_) +
                                          " left the connection exchange: " + why.message());
    s_->cv.notify_all();
  }

 private:
  std::shared_ptr<Shared> s_;
  int rank_;
};

}  // namespace

std::vector<std::shared_ptr<ConnectionExchange>> inProcessExchanges(int nranks, int timeoutMs) {
  auto shared = std::make_shared<Shared>(nranks, timeoutMs);
  std::vector<std::shared_ptr<ConnectionExchange>> out;
  for (int r = 0; r < nranks; ++r) out.push_back(std::make_shared<InProcess>(shared, r));
  return out;
}

namespace {

class SharedMemory final : public ConnectionExchange {
 public:
  SharedMemory(std::string label, BlobAllGather allGather)
      : label_(std::move(label)), allGather_(std::move(allGather)) {}
  Result<Region> allocate(size_t bytes) override {
    auto seg = Segment::create(label_ + "-" + std::to_string(made_++), bytes);
    if (!seg.isOk()) return seg.status();
    Region r;
    r.data = static_cast<unsigned char*>(seg.value()->data());
    r.handle = seg.value()->name();
    pending_.push_back(std::move(seg).value());
    return r;
  }
  Result<unsigned char*> open(int peer, const std::string& handle, size_t bytes) override {
    auto seg = Segment::open(handle, bytes);
    if (!seg.isOk())
      return Status(seg.status().code(), "rank " + std::to_string(peer) +
                                             "'s connection memory: " + seg.status().message());
    auto* p = static_cast<unsigned char*>(seg.value()->data());
    pending_.push_back(std::move(seg).value());
    return p;
  }
  void retire() override {
    current_ = std::move(pending_);  // the regions before are unmapped
    pending_.clear();
    for (auto& seg : current_) seg->unlink();
  }
  Result<std::vector<std::string>> allGather(const std::string& mine) override {
    return allGather_(mine);
  }

 private:
  std::string label_;
  BlobAllGather allGather_;
  uint64_t made_ = 0;
  std::vector<std::unique_ptr<Segment>> current_, pending_;
};

}  // namespace

std::shared_ptr<ConnectionExchange> sharedMemoryExchange(std::string label,
                                                         BlobAllGather allGather) {
  return std::make_shared<SharedMemory>(std::move(label), std::move(allGather));
}

}  // namespace chorus::runtime
