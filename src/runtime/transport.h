// The transport boundary: how an executor moves one step's message to the
// peer threadblock on a (channel, sender, receiver) connection. The executor
// only sees these two ports: the in-process, shared-memory and TCP transports
// implement them.
//
// Both ports are non-blocking so the executor stays a steppable state
// machine: a port that cannot make progress says so and the executor reports
// "blocked". Slots are bounded: a sender that runs ahead of its receiver by
// `slots` messages is blocked until the receiver releases one (backpressure).
#pragma once

#include <cstddef>

namespace chorus::runtime {

class SendPort {
 public:
  virtual ~SendPort() = default;
  // A slot of at least `bytes` to write the next message into, or nullptr if
  // all slots are full. The message is not visible until commit().
  virtual void* tryAcquire(size_t bytes) = 0;
  // Publishes the acquired slot with `bytes` of payload.
  virtual void commit(size_t bytes) = 0;
  // One-copy path: publishes a reference to `bytes` at `data` instead of a
  // copy; the receiver reads (or reduces from) the sender's memory directly.
  // The caller guarantees the memory stays unchanged until drained(). False
  // if all slots are full or the transport cannot read the sender's memory.
  virtual bool tryPostRef(const void* data, size_t bytes) = 0;
  // Whether tryPostRef can ever succeed: the peer shares this address space,
  // or the transport sends straight from the sender's memory (TCP).
  virtual bool supportsRefs() const = 0;
  // True when no message sent so far needs the sender's memory any more (the
  // receiver released it, or the kernel holds a copy).
  virtual bool drained() const = 0;
};

class RecvPort {
 public:
  virtual ~RecvPort() = default;
  // The oldest unreleased message, or nullptr if none has arrived. `bytes`
  // receives its size. The memory (a slot, or the sender's buffer for a
  // message posted by reference) stays valid until release().
  virtual const void* tryPeek(size_t* bytes) = 0;
  // Frees the message returned by tryPeek() for the sender to reuse.
  virtual void release() = 0;
};

// One (channel, sender, receiver) link. A process uses the port of the side
// its rank is on (both, when sender and receiver live in it).
class Connection {
 public:
  virtual ~Connection() = default;
  virtual SendPort& sender() = 0;
  virtual RecvPort& receiver() = 0;
};

}  // namespace chorus::runtime
