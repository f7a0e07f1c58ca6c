// TCP transport between ranks on different hosts (or forced between any two
// processes): each pair of ranks shares a few sockets (TCP_NODELAY,
// non-blocking) over one epoll set per process. A rank in a call drives
// them itself while it waits (Poller: no hand-off between threads per
// message); one progress thread per process drives them otherwise (between
// calls, and while the rank sleeps).
//
// Flow control is by credit: a receiver has `slots` slots per connection and
// the sender transmits message m only once the receiver has released message
// m - slots, so every byte that arrives has a slot waiting for it and the
// sockets are never left unread (connections that share a
// socket cannot block each other). Payloads go from the sender's memory to
// the kernel (a message posted by reference is sent straight from the user's
// buffer) and from the kernel into the receiver's slot, or straight into
// the destination its step posted (RecvPort::expect: one copy, the
// kernel's). Large messages are split across the pair's sockets and
// reassembled there.
//
// Frames: a 48-byte little-endian header (magic, kind, fabric, channel, seq,
// offset, length, total) and, for data, `length` payload bytes. Every header
// is checked against the connection it names before a byte of payload is
// placed; anything malformed ends the link with an error (fuzzed).
#pragma once

#include <sys/epoll.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "core/status.h"
#include "runtime/bootstrap/bootstrap.h"
#include "runtime/transport/local_transport.h"
#include "runtime/transport/peer_transport.h"
#include "runtime/transport/transport.h"

namespace chorus::runtime {

struct TcpOptions {
  int socketsPerPeer = 2;
  size_t stripeBytes = 256 << 10;  // messages this long or longer use every socket
  int timeoutMs = 300000;          // connection setup
};

namespace tcpwire {

// kWithdrawn: the receiver withdrew its end of (fabric, channel), after
// every credit it sent for it.
enum class Kind : uint32_t { kData = 1, kCredit = 2, kBye = 3, kWithdrawn = 4 };

struct Header {
  uint32_t magic = 0;
  uint32_t kind = 0;
  uint32_t fabric = 0;
  uint32_t channel = 0;
  uint64_t seq = 0;     // data: message number; credit: messages released
  uint64_t offset = 0;  // data: where this part goes in the message
  uint64_t length = 0;  // data: payload bytes after the header
  uint64_t total = 0;   // data: the whole message's bytes
  uint32_t mark = 0;    // data: the sender's mark (SendPort::commit), in every part
};
inline constexpr size_t kHeaderBytes = 56;      // the fields above, then 4 bytes of zeros
inline constexpr uint32_t kMagic = 0x54524843;  // "CHRT"

void encode(const Header& h, unsigned char out[kHeaderBytes]);
Header decode(const unsigned char in[kHeaderBytes]);

// The hello that opens each data socket: secret, rank, world size, index of
// the socket within the pair.
struct Hello {
  std::string secret;
  uint32_t rank = 0;
  uint32_t nranks = 0;
  uint32_t index = 0;
};
std::string encodeHello(const Hello& h);
Result<Hello> decodeHello(std::string_view bytes);

}  // namespace tcpwire

class TcpConnection;

class TcpLinks final : public Poller {
 public:
  using LostFn = std::function<void(int rank, const std::string& why)>;
  // Collective over every rank of `boot` (ranks without TCP peers take part
  // too). `tcpPeer[r]`: rank r is reached over TCP (the same answer on both
  // sides). `wake`: the doorbell this rank's executor sleeps on; the
  // progress thread rings it when a message arrives or a send completes.
  // `onLost` is called once per peer whose link breaks (closed without
  // goodbye, socket error, malformed frame), from the progress thread.
  static Result<std::unique_ptr<TcpLinks>> create(Bootstrap& boot, const std::string& secret,
                                                  const std::vector<bool>& tcpPeer, Doorbell& wake,
                                                  const TcpOptions& options, LostFn onLost);
  ~TcpLinks();
  TcpLinks(const TcpLinks&) = delete;
  TcpLinks& operator=(const TcpLinks&) = delete;

  // Connection (channel, from, to) of fabric `fabric`: one end is this
  // rank, the other a TCP peer. The peer must create its side in the same
  // fabric before either uses it (fabric creation ends with a barrier).
  std::unique_ptr<Connection> connect(uint32_t fabric, int channel, int from, int to, int slots,
                                      size_t slotBytes);
  // Says goodbye on every socket and stops the progress thread; idempotent.
  void shutdown();
  // A rank in a call drives the sockets itself while it waits (Poller): the
  // progress thread parks meanwhile, so a message costs no hand-off between
  // threads, and the rank's thread receives it (into its destination where
  // the step posted one: RecvPort::expect).
  void enter() override;
  bool poll() override;
  void leave(bool sleeping) override;
  // Where every peer of this rank is a TCP peer, a waiting rank sleeps in
  // epoll_wait itself: a message wakes it directly.
  bool sleep(int timeoutMs) override;
  // Wakes a rank asleep in sleep() (an abort: it must look at once).
  void interrupt();
  int rank() const { return me_; }

  // Exposed for the fuzz target: feeds raw bytes to the frame decoder of a
  // link from `peer`, as if they had arrived on its socket. Returns the
  // error that ended the link, or ok.
  Status feedForTesting(int peer, const unsigned char* data, size_t len);
  // A link set with no sockets or thread, for feedForTesting.
  static std::unique_ptr<TcpLinks> forTesting(int me, int nranks, Doorbell& wake);
  // The frames queued for `peer` and not yet sent (the testing link set
  // sends none), and the fabrics whose credits may still come.
  std::vector<tcpwire::Header> queuedForTesting(int peer);
  size_t fabricsAwaitedForTesting();

 private:
  friend class TcpConnection;
  struct Sock;
  TcpLinks(int me, int nranks, Doorbell& wake, TcpOptions o, LostFn onLost);
  void poke();
  void abandon(TcpConnection& c);
  // A posted receive for message `seq` that has begun arriving in its slot:
  // moves what is in to `dst` and sends the rest there.
  void claim(TcpConnection& c, uint64_t seq, unsigned char* dst, size_t maxBytes);
  void enroll(TcpConnection* c);
  void withdraw(TcpConnection* c);
  // The socket a connection's credits and withdrawal travel on (its data's
  // first part too, so a credit can ride with data the other way).
  size_t controlIndex(const TcpConnection& c) const;
  Sock& controlSock(const TcpConnection& c);
  void progressMain();
  bool pump();
  bool handle(const epoll_event* evs, int n);
  bool flush(Sock& s);
  // A socket whose peer said goodbye and closed: no more to send or read.
  void closeLeft(Sock& s);
  Status readable(Sock& s);
  Status consume(Sock& s, const unsigned char* data, size_t len);
  Status startFrame(Sock& s);
  void lose(int peer, const std::string& why);
  void watchOut(Sock& s, bool on);

  const int me_, n_;
  Doorbell& wake_;
  const TcpOptions options_;
  LostFn onLost_;
  int epoll_ = -1, event_ = -1;
  std::vector<std::unique_ptr<Sock>> socks_;  // all sockets
  std::vector<std::vector<Sock*>> byPeer_;    // rank -> its sockets
  std::vector<bool> lost_;                    // progress thread only
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> sleeping_{false};
  std::atomic<int> drivers_{0};  // threads polling (enter .. leave)
  bool onlyTcp_ = false;         // every peer of this rank is a TCP peer
  Doorbell park_;                // the progress thread waits here while they do
  bool shutDown_ = false;

  std::mutex mu_;  // the connection tables (enroll/withdraw vs. the progress thread)
  std::vector<TcpConnection*> outbound_, inbound_;
  std::map<std::tuple<uint32_t, uint32_t, int, bool>, TcpConnection*> byKey_;
  // Fabrics with outbound connections withdrawn here (released or remade
  // larger) whose receivers have not yet said they withdrew theirs: a peer
  // may still return credits for the last messages sent on them. Counts of
  // such connections; a fabric is forgotten when its count reaches 0.
  std::map<uint32_t, int> withdrawnFabrics_;
};

// The TCP row of the transport table (runtime/transport/registry.cc): any
// peer; made on every rank when any pair of the job talks TCP.
bool tcpReaches(const PeerPlace& peer);
Result<std::unique_ptr<PeerTransport>> createTcpTransport(TransportContext& context);

}  // namespace chorus::runtime
