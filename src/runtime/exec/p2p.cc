#include "runtime/exec/p2p.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "runtime/transport/local_transport.h"

namespace chorus::runtime {

namespace {
constexpr size_t kHeaderBytes = 8;

void putLength(unsigned char* out, uint64_t v) {
  for (size_t i = 0; i < kHeaderBytes; ++i) out[i] = static_cast<unsigned char>(v >> (8 * i));
}

uint64_t getLength(const unsigned char* in) {
  uint64_t v = 0;
  for (size_t i = 0; i < kHeaderBytes; ++i) v |= static_cast<uint64_t>(in[i]) << (8 * i);
  return v;
}
}  // namespace

P2pExchange::P2pExchange(Fabric& fabric, int me, size_t pieceBytes)
    : fabric_(fabric), me_(me), pieceBytes_(pieceBytes) {
  CHORUS_CHECK(pieceBytes_ >= kHeaderBytes, "point-to-point slots must hold a header");
}

Status P2pExchange::addSend(int peer, const void* data, size_t bytes) {
  return add(true, peer, const_cast<void*>(data), bytes);
}

Status P2pExchange::addRecv(int peer, void* data, size_t bytes) {
  return add(false, peer, data, bytes);
}

Status P2pExchange::add(bool send, int peer, void* data, size_t bytes) {
  Connection* c = send ? fabric_.find(0, me_, peer) : fabric_.find(0, peer, me_);
  if (c == nullptr)
    return Status(StatusCode::kInvalidArgument, "rank " + std::to_string(me_) +
                                                    " has no connection " + (send ? "to" : "from") +
                                                    " rank " + std::to_string(peer));
  Op op;
  op.send = send;
  op.peer = peer;
  op.data = static_cast<unsigned char*>(data);
  op.bytes = bytes;
  if (send)
    op.out = &c->sender();
  else
    op.in = &c->receiver();
  ops_.push_back(op);
  return Status::ok();
}

bool P2pExchange::first(size_t i) const {
  for (size_t j = 0; j < i; ++j)
    if (!ops_[j].finished && ops_[j].send == ops_[i].send && ops_[j].peer == ops_[i].peer)
      return false;
  return true;
}

bool P2pExchange::step(Op& op) {
  bool moved = false;
  if (op.send) {
    if (!op.header) {
      // A message that fits in one slot with its header travels with it:
      // one message instead of two (over TCP, one frame and one system call).
      bool inline_ = op.bytes <= pieceBytes_ - kHeaderBytes;
      size_t n = kHeaderBytes + (inline_ ? op.bytes : 0);
      auto* slot = static_cast<unsigned char*>(op.out->tryAcquire(n));
      if (slot == nullptr) return false;
      putLength(slot, op.bytes);
      if (inline_ && op.bytes > 0) std::memcpy(slot + kHeaderBytes, op.data, op.bytes);
      op.out->commit(n, 0);
      op.header = moved = true;
      if (inline_) op.moved = op.bytes;
    }
    while (op.moved < op.bytes) {
      size_t left = op.bytes - op.moved;
      if (op.out->supportsRefs() && op.bytes >= op.out->minRefBytes() &&
          op.bytes <= op.out->maxRefBytes()) {
        // By reference, whole: the receiver copies it from here (or the
        // kernel does).
        if (!op.out->tryPostRef(op.data + op.moved, left, 0)) return moved;
        op.moved += left;
        moved = true;
        continue;
      }
      size_t n = std::min(pieceBytes_, left);
      void* slot = op.out->tryAcquire(n);
      if (slot == nullptr) return moved;
      std::memcpy(slot, op.data + op.moved, n);
      op.out->commit(n, 0);
      op.moved += n;
      moved = true;
    }
  } else {
    size_t got = 0;
    if (!op.header) {
      const void* msg = op.in->tryPeek(&got);
      if (msg == nullptr) return false;
      const auto* m = static_cast<const unsigned char*>(msg);
      bool header = got >= kHeaderBytes;
      uint64_t length = header ? getLength(m) : 0;
      // The header alone, or with the whole message after it.
      bool inline_ = header && got - kHeaderBytes == length && got > kHeaderBytes;
      if ((got != kHeaderBytes && !inline_) || length != op.bytes) {
        op.in->release();
        failure_ =
            Status(StatusCode::kInvalidArgument,
                   "rank " + std::to_string(me_) + ": a receive of " + std::to_string(op.bytes) +
                       " bytes from rank " + std::to_string(op.peer) + " met a send of " +
                       (got == kHeaderBytes || inline_ ? std::to_string(length) + " bytes"
                                                       : "something else") +
                       "; do both sides pass the same count and type?");
        return false;
      }
      if (inline_) {
        std::memcpy(op.data, m + kHeaderBytes, op.bytes);
        op.moved = op.bytes;
      }
      op.in->release();
      op.header = moved = true;
    }
    while (op.moved < op.bytes) {
      const void* msg = op.in->tryPeek(&got);
      if (msg == nullptr) {
        op.in->expect(op.data + op.moved, op.bytes - op.moved);  // received in place if it can
        return moved;
      }
      if (got == 0 || got > op.bytes - op.moved) {
        failure_ = Status(StatusCode::kInternal,
                          "rank " + std::to_string(me_) + ": a piece of " + std::to_string(got) +
                              " bytes from rank " + std::to_string(op.peer) + " where " +
                              std::to_string(op.bytes - op.moved) + " bytes are left");
        return false;
      }
      if (op.in->peekedRemote()) {
        Status st = op.in->fetch(op.data + op.moved, 0, got);
        if (!st.isOk()) {
          failure_ = Status(st.code(), "rank " + std::to_string(me_) + ": receive from rank " +
                                           std::to_string(op.peer) + ": " + st.message());
          return false;
        }
      } else if (msg != op.data + op.moved) {
        std::memcpy(op.data + op.moved, msg, got);
      }
      op.in->release();
      op.moved += got;
      moved = true;
    }
  }
  op.finished = true;
  ++finished_;
  return true;
}

Progress P2pExchange::advance() {
  if (done()) return Progress::kDone;
  bool moved = false;
  for (size_t i = 0; i < ops_.size() && failure_.isOk(); ++i)
    if (!ops_[i].finished && first(i) && step(ops_[i])) moved = true;
  return moved ? Progress::kProgress : Progress::kBlocked;
}

void P2pExchange::reset() {
  for (Op& op : ops_) {
    op.moved = 0;
    op.header = op.finished = false;
  }
  finished_ = 0;
}

bool P2pExchange::sendsDrained() const {
  return std::all_of(ops_.begin(), ops_.end(),
                     [](const Op& op) { return !op.send || op.out->drained(); });
}

void P2pExchange::abandon() {
  for (Op& op : ops_)
    if (!op.send) op.in->abandon();
}

std::vector<std::string> P2pExchange::waiting() const {
  std::vector<std::string> lines;
  for (const Op& op : ops_)
    if (!op.finished)
      lines.push_back((op.send ? "send to rank " : "receive from rank ") + std::to_string(op.peer) +
                      ": " + std::to_string(op.moved) + " of " + std::to_string(op.bytes) +
                      " bytes moved");
  return lines;
}

}  // namespace chorus::runtime
