// Sends and receives between ranks in different processes (chorusSend /
// chorusRecv): one rank's operations of a group, moved over a fabric that
// connects every ordered pair of ranks (channel 0) and advanced together by
// runRankLoop, so that a pair exchanging both ways, or a ring of ranks each
// sending to the next, never waits on itself.
//
// On a connection a message is a header (8 bytes: its length) and then its
// bytes in pieces of at most the connection's slot size; a message that
// fits in one slot with its header travels inside it. Messages on one
// connection are matched in order; a receive whose length differs from the
// header fails, naming both lengths (the ranks' counts or types disagree).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "runtime/exec/executor.h"
#include "runtime/transport/transport.h"

namespace chorus::runtime {

class Fabric;

class P2pExchange final : public Steppable {
 public:
  // Rank `me`'s side; `pieceBytes` is the fabric's slot size.
  P2pExchange(Fabric& fabric, int me, size_t pieceBytes);
  // Adds a send of `bytes` at `data` to `peer` (kept unchanged until done)
  // or a receive of `bytes` into `data` from `peer`. Errors: no connection.
  Status addSend(int peer, const void* data, size_t bytes);
  Status addRecv(int peer, void* data, size_t bytes);

  Progress advance() override;
  bool done() const override { return finished_ == ops_.size(); }
  void reset() override;
  const Status& failure() const override { return failure_; }
  bool sendsDrained() const override;
  std::vector<std::string> waiting() const override;
  void abandon() override;

 private:
  struct Op {
    bool send = false;
    int peer = -1;
    unsigned char* data = nullptr;
    size_t bytes = 0;
    size_t moved = 0;     // payload bytes sent or received
    bool header = false;  // its header has gone (send) or arrived (recv)
    bool finished = false;
    SendPort* out = nullptr;
    RecvPort* in = nullptr;
  };
  Status add(bool send, int peer, void* data, size_t bytes);
  bool step(Op& op);  // moves what it can; true if anything moved
  // The first unfinished op of each (direction, peer) goes first.
  bool first(size_t i) const;

  Fabric& fabric_;
  const int me_;
  const size_t pieceBytes_;
  std::vector<Op> ops_;
  size_t finished_ = 0;
  Status failure_;
};

}  // namespace chorus::runtime
