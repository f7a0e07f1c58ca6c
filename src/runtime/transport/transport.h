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
#include <cstdint>

#include "core/status.h"

namespace chorus::runtime {

struct SharedRegion;  // runtime/transport/shared_buffers.h

class SendPort {
 public:
  virtual ~SendPort() = default;
  // A slot of at least `bytes` to write the next message into, or nullptr if
  // all slots are full. The message is not visible until commit().
  virtual void* tryAcquire(size_t bytes) = 0;
  // Publishes the acquired slot with `bytes` of payload and the sender's
  // `mark`, which the receiver reads back (RecvPort::peekedMark): a word the
  // transport carries but never reads. The executor marks each message with
  // its call's signature and the slices left in it, so ranks whose calls
  // disagree fail at the first message that shows it (exec/executor.h).
  virtual void commit(size_t bytes, uint32_t mark) = 0;
  // One-copy path: publishes a reference to `bytes` at `data` instead of a
  // copy; the receiver reads (or reduces from) the sender's memory directly.
  // The caller guarantees the memory stays unchanged until drained(). False
  // if all slots are full or the transport cannot read the sender's memory.
  // `region`: the memory lies in a buffer peers can map
  // (runtime/transport/shared_buffers.h), which a receiver in another process reads
  // with plain loads once it has mapped it.
  virtual bool tryPostRef(const void* data, size_t bytes, uint32_t mark,
                          const SharedRegion* region = nullptr) = 0;
  // Whether references to mappable memory (shared_buffers.h) reach the
  // receiver as memory it reads in place: then any message in such memory
  // may travel by reference, at any size, whatever the steps do with it.
  virtual bool supportsSharedRefs() const { return false; }
  // Whether tryPostRef can ever succeed: the peer shares this address space,
  // or the transport sends straight from the sender's memory (TCP).
  virtual bool supportsRefs() const = 0;
  // The sizes of message worth posting by reference: below minRefBytes() a
  // copy is cheaper (a system call per reference across processes); above
  // maxRefBytes() the peer has no room for it, or a copy is cheaper again.
  virtual size_t minRefBytes() const { return 0; }
  virtual size_t maxRefBytes() const { return SIZE_MAX; }
  // Whether references pay only for a plain send's message (not one the
  // step has just reduced or received) to a receiver that copies it to its
  // destination (once, from the sender's memory). A receiver that reduces
  // would copy it into a slot first, on its own thread, instead of the
  // sender doing so in parallel; and across processes, reading what the
  // sender has just written measured slower than two copies (2-process
  // 1 MiB allreduce: 154 vs 88 us).
  virtual bool refsForCopiesOnly() const { return false; }
  // True when no message sent so far needs the sender's memory any more (the
  // receiver released it, or the kernel holds a copy).
  virtual bool drained() const = 0;
};

// Whether any of `ports` takes references to mappable memory.
template <class Ports>
bool anyTakesSharedRefs(const Ports& ports) {
  for (const SendPort* p : ports)
    if (p != nullptr && p->supportsSharedRefs()) return true;
  return false;
}

class RecvPort {
 public:
  virtual ~RecvPort() = default;
  // The oldest unreleased message, or nullptr if none has arrived. `bytes`
  // receives its size. The memory (a slot, or the sender's buffer for a
  // message posted by reference) stays valid until release().
  virtual const void* tryPeek(size_t* bytes) = 0;
  // Whether the message tryPeek() returned was posted by reference from
  // another process: its bytes are not in the returned memory (a slot of
  // this side's, free to fetch into) until fetch() copies them there or
  // anywhere else.
  virtual bool peekedRemote() const { return false; }
  // The mark its sender committed the message tryPeek() returned with.
  virtual uint32_t peekedMark() const = 0;
  // Copies `bytes` at `offset` of that message to `dst` (one copy, from the
  // sender's memory). kAborted if the sender's memory cannot be read
  // (its process is gone, or the reference is bad).
  virtual Status fetch(void* dst, size_t offset, size_t bytes) {
    (void)dst, (void)offset, (void)bytes;
    return Status(StatusCode::kInternal, "this transport has no remote messages");
  }
  // Frees the message returned by tryPeek() for the sender to reuse.
  virtual void release() = 0;
  // A posted receive: the next message (the one tryPeek() will return), if
  // it is at most `maxBytes` long and has not begun to arrive, is placed at
  // `dst` instead of a slot, and tryPeek() then returns `dst`. A hint that
  // transports may ignore (only TCP, where the kernel copies into the
  // destination instead of into a slot, takes it). The caller must accept
  // writes to `dst` from now on, until tryPeek() returns the message or
  // abandon() returns. Calling it again for the same message changes
  // nothing.
  virtual void expect(void* dst, size_t maxBytes) { (void)dst, (void)maxBytes; }
  // Withdraws a posted receive (the call failed): once this returns nothing
  // writes to its memory. A message already partly placed there cannot be
  // taken back: the link to the sender ends.
  virtual void abandon() {}
};

// A transport whose progress a waiting rank can make on its own thread (the
// TCP transport's sockets), instead of sleeping while another thread makes
// it and wakes the rank: no hand-off between threads per message.
class Poller {
 public:
  virtual ~Poller() = default;
  // The calling thread polls from now on (a call starts, or its rank wakes):
  // the transport's own thread may stand back.
  virtual void enter() = 0;
  // Moves what can move without blocking; true if anything did.
  virtual bool poll() = 0;
  // Blocks until something arrives for this rank (and moves it) or
  // `timeoutMs` passes (< 0: no limit), staying the thread that drives:
  // one wake-up per message. False, at once, where it cannot: the rank has
  // peers this transport does not serve, so it must sleep on its doorbell
  // (after leave(true)).
  virtual bool sleep(int timeoutMs) {
    (void)timeoutMs;
    return false;
  }
  // The calling thread stops polling. `sleeping`: its rank is about to
  // sleep until the transport wakes it, so the transport's thread takes
  // over at once; otherwise (the call ended: the next one likely follows
  // soon) it may take over a little later, unless something is pending.
  virtual void leave(bool sleeping) = 0;
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
