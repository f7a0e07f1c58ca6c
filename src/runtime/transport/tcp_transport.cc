#include "runtime/transport/tcp_transport.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>
#include <new>

#include "core/check.h"
#include "core/failpoint.h"
#include "core/log.h"
#include "runtime/transport/bells.h"
#include "runtime/transport/socket.h"

namespace chorus::runtime {

namespace tcpwire {

namespace {
void put32(unsigned char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
void put64(unsigned char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
uint32_t get32(const unsigned char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}
uint64_t get64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}
constexpr uint32_t kHelloMagic = 0x48524843;  // "CHRH"
constexpr uint32_t kVersion = 3;              // 2: frames carry a mark; 3: withdrawals
}  // namespace

void encode(const Header& h, unsigned char out[kHeaderBytes]) {
  put32(out, h.magic);
  put32(out + 4, h.kind);
  put32(out + 8, h.fabric);
  put32(out + 12, h.channel);
  put64(out + 16, h.seq);
  put64(out + 24, h.offset);
  put64(out + 32, h.length);
  put64(out + 40, h.total);
  put32(out + 48, h.mark);
  put32(out + 52, 0);
}

Header decode(const unsigned char in[kHeaderBytes]) {
  Header h;
  h.magic = get32(in);
  h.kind = get32(in + 4);
  h.fabric = get32(in + 8);
  h.channel = get32(in + 12);
  h.seq = get64(in + 16);
  h.offset = get64(in + 24);
  h.length = get64(in + 32);
  h.total = get64(in + 40);
  h.mark = get32(in + 48);
  return h;
}

std::string encodeHello(const Hello& h) {
  std::string out;
  net::putU32(out, kHelloMagic);
  net::putU32(out, kVersion);
  net::putString(out, h.secret);
  net::putU32(out, h.rank);
  net::putU32(out, h.nranks);
  net::putU32(out, h.index);
  return out;
}

Result<Hello> decodeHello(std::string_view bytes) {
  net::Reader r(bytes);
  uint32_t magic = 0, version = 0;
  Hello h;
  if (!r.u32(&magic) || magic != kHelloMagic)
    return Status(StatusCode::kInvalidArgument, "not a Chorus TCP transport hello");
  if (!r.u32(&version) || version != kVersion)
    return Status(StatusCode::kInvalidArgument, "TCP transport protocol version " +
                                                    std::to_string(version) + ", expected " +
                                                    std::to_string(kVersion));
  if (!r.string(&h.secret, 256) || !r.u32(&h.rank) || !r.u32(&h.nranks) || !r.u32(&h.index) ||
      !r.done())
    return Status(StatusCode::kInvalidArgument, "malformed TCP transport hello");
  return h;
}

}  // namespace tcpwire

using tcpwire::Header;
using tcpwire::kHeaderBytes;
using tcpwire::Kind;

namespace {
constexpr size_t kStageBytes = 64 << 10;
constexpr size_t kDirectReadBytes = 16 << 10;  // payload left at least this: read straight in
constexpr uint64_t kUnset = std::numeric_limits<uint64_t>::max();
constexpr int kMaxIov = 64;
}  // namespace

// One end of a (fabric, channel, from, to) link over TCP. The executor's
// thread uses the port of its side; the progress thread does the rest.
class TcpConnection final : public Connection {
 public:
  TcpConnection(TcpLinks& links, uint32_t fabric, uint32_t channel, int peer, bool outbound,
                int slots, size_t slotBytes)
      : links_(links),
        fabric_(fabric),
        channel_(channel),
        peer_(peer),
        outbound_(outbound),
        slots_(static_cast<uint64_t>(slots)),
        slotBytes_(slotBytes),
        stride_((std::max<size_t>(slotBytes, 1) + 63) / 64 * 64),
        storage_(new (std::align_val_t(64)) unsigned char[static_cast<size_t>(slots) * stride_]),
        sizes_(static_cast<size_t>(slots), 0),
        marks_(static_cast<size_t>(slots), 0),
        refs_(static_cast<size_t>(slots), nullptr),
        target_(static_cast<size_t>(slots), nullptr),
        partsIn_(static_cast<size_t>(slots)),
        partsLeft_(static_cast<size_t>(slots), 0),
        got_(static_cast<size_t>(slots), 0),
        expect_(static_cast<size_t>(slots), kUnset),
        slotSeq_(static_cast<size_t>(slots), kUnset) {
    // First touch now, not on a collective's critical path.
    std::memset(storage_, 0, static_cast<size_t>(slots) * stride_);
  }
  ~TcpConnection() override {
    links_.withdraw(this);
    ::operator delete[](storage_, std::align_val_t(64));
  }
  SendPort& sender() override {
    CHORUS_CHECK(outbound_, "the receiving end of a TCP connection has no send port");
    return sender_;
  }
  RecvPort& receiver() override {
    CHORUS_CHECK(!outbound_, "the sending end of a TCP connection has no receive port");
    return receiver_;
  }

 private:
  friend class TcpLinks;
  class Sender final : public SendPort {
   public:
    explicit Sender(TcpConnection& c) : c_(c) {}
    void* tryAcquire(size_t bytes) override {
      CHORUS_CHECK(bytes <= c_.slotBytes_, "message larger than the connection's slots");
      uint64_t head = c_.head_.load(std::memory_order_relaxed);
      if (head - c_.tail_.load(std::memory_order_acquire) >= c_.slots_) return nullptr;
      return c_.storage_ + (head % c_.slots_) * c_.stride_;
    }
    void commit(size_t bytes, uint32_t mark) override { c_.publish(bytes, mark, nullptr); }
    bool tryPostRef(const void* data, size_t bytes, uint32_t mark, const SharedRegion*) override {
      uint64_t head = c_.head_.load(std::memory_order_relaxed);
      if (head - c_.tail_.load(std::memory_order_acquire) >= c_.slots_) return false;
      c_.publish(bytes, mark, data);
      return true;
    }
    bool supportsRefs() const override { return true; }
    size_t maxRefBytes() const override { return c_.slotBytes_; }
    bool drained() const override {
      return c_.tail_.load(std::memory_order_acquire) == c_.head_.load(std::memory_order_relaxed);
    }

   private:
    TcpConnection& c_;
  };
  class Receiver final : public RecvPort {
   public:
    explicit Receiver(TcpConnection& c) : c_(c) {}
    const void* tryPeek(size_t* bytes) override {
      uint64_t tail = c_.tail_.load(std::memory_order_relaxed);
      if (c_.head_.load(std::memory_order_acquire) == tail) return nullptr;
      size_t slot = tail % c_.slots_;
      *bytes = static_cast<size_t>(c_.sizes_[slot]);
      mark_ = c_.marks_[slot];
      return c_.target_[slot] != nullptr ? c_.target_[slot] : c_.storage_ + slot * c_.stride_;
    }
    void release() override {
      c_.tail_.store(c_.tail_.load(std::memory_order_relaxed) + 1,
                     std::memory_order_seq_cst);  // see poke()
      c_.links_.poke();
    }
    void expect(void* dst, size_t maxBytes) override {
      // The next message is `tail`; only this thread moves tail, and the
      // progress side reads an expectation only for the message it starts
      // (never one after tail), so the three stores cannot be seen torn.
      uint64_t tail = c_.tail_.load(std::memory_order_relaxed);
      if (c_.expectSeq_.load(std::memory_order_relaxed) == tail) return;
      c_.expectDst_.store(static_cast<unsigned char*>(dst), std::memory_order_relaxed);
      c_.expectBytes_.store(maxBytes, std::memory_order_relaxed);
      c_.expectSeq_.store(tail, std::memory_order_release);
      c_.links_.claim(c_, tail, static_cast<unsigned char*>(dst), maxBytes);
    }
    void abandon() override { c_.links_.abandon(c_); }
    uint32_t peekedMark() const override { return mark_; }

   private:
    TcpConnection& c_;
    uint32_t mark_ = 0;  // the peeked message's
  };

  // The header of a frame of `kind` on this connection, message `seq`.
  Header frame(Kind kind, uint64_t seq) const {
    Header h;
    h.magic = tcpwire::kMagic;
    h.kind = static_cast<uint32_t>(kind);
    h.fabric = fabric_;
    h.channel = channel_;
    h.seq = seq;
    return h;
  }

  void publish(size_t bytes, uint32_t mark, const void* ref) {
    uint64_t head = head_.load(std::memory_order_relaxed);
    size_t slot = head % slots_;
    sizes_[slot] = bytes;
    marks_[slot] = mark;
    refs_[slot] = static_cast<const unsigned char*>(ref);
    head_.store(head + 1, std::memory_order_seq_cst);  // see poke()
    links_.poke();
  }

  TcpLinks& links_;
  const uint32_t fabric_, channel_;
  const int peer_;
  const bool outbound_;
  const uint64_t slots_;
  const size_t slotBytes_;
  const size_t stride_;  // slots start on cache lines: every type is aligned in them
  unsigned char* storage_;
  std::vector<uint64_t> sizes_;
  // Each slot's mark: outbound, the sender's (SendPort::commit); inbound,
  // what its frames carried (the progress side writes it before the
  // message is complete, the executor reads it after).
  std::vector<uint32_t> marks_;
  std::vector<const unsigned char*> refs_;
  // Inbound: where each slot's message is placed (the progress side sets it
  // when its first part arrives): an expected destination, or nullptr for
  // the slot itself.
  std::vector<unsigned char*> target_;
  // Inbound: the parts of each slot's message already complete (offset,
  // length), for a late claim (TcpLinks::claim). At most one per socket.
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> partsIn_;
  // Inbound: the posted receive (Receiver::expect): message expectSeq_, if
  // at most expectBytes_ long, goes to expectDst_.
  std::atomic<uint64_t> expectSeq_{kUnset};
  std::atomic<unsigned char*> expectDst_{nullptr};
  std::atomic<size_t> expectBytes_{0};
  // Outbound: head = messages committed (executor), tail = messages the
  // kernel holds (progress). Inbound: head = messages complete (progress),
  // tail = messages released (executor).
  alignas(64) std::atomic<uint64_t> head_{0};
  alignas(64) std::atomic<uint64_t> tail_{0};
  // Progress thread only.
  alignas(64) uint64_t next_ = 0;                 // outbound: messages handed to sockets
  uint64_t credit_ = 0;                           // outbound: messages the peer has released
  std::vector<uint32_t> partsLeft_;               // outbound: parts not yet in the kernel, by slot
  uint64_t done_ = 0;                             // inbound: messages complete
  uint64_t creditSent_ = 0;                       // inbound: releases told to the peer
  bool peerWithdrew_ = false;                     // outbound: the receiver said it withdrew
  std::vector<uint64_t> got_, expect_, slotSeq_;  // inbound: reassembly, by slot
  Sender sender_{*this};
  Receiver receiver_{*this};
};

struct TcpLinks::Sock {
  int fd = -1;
  int peer = -1;
  bool byeSeen = false;
  bool closed = false;
  bool watchingOut = false;
  struct Out {
    unsigned char head[kHeaderBytes];
    const unsigned char* data = nullptr;
    size_t len = 0;   // payload bytes
    size_t done = 0;  // of kHeaderBytes + len
    TcpConnection* conn = nullptr;
    uint64_t seq = 0;
  };
  std::deque<Out> out;
  // Input: a header being read, then its payload going to `dst`.
  unsigned char hdr[kHeaderBytes];
  size_t hdrGot = 0;
  bool inPayload = false;
  unsigned char* dst = nullptr;
  size_t left = 0;
  TcpConnection* rc = nullptr;
  uint64_t rseq = 0, rlen = 0, roff = 0;
  std::vector<unsigned char> stage = std::vector<unsigned char>(kStageBytes);
};

TcpLinks::TcpLinks(int me, int nranks, Doorbell& wake, TcpOptions o, LostFn onLost)
    : me_(me),
      n_(nranks),
      wake_(wake),
      options_(o),
      onLost_(std::move(onLost)),
      byPeer_(static_cast<size_t>(nranks)),
      lost_(static_cast<size_t>(nranks), false) {}

std::unique_ptr<TcpLinks> TcpLinks::forTesting(int me, int nranks, Doorbell& wake) {
  return std::unique_ptr<TcpLinks>(new TcpLinks(me, nranks, wake, TcpOptions{}, nullptr));
}

Result<std::unique_ptr<TcpLinks>> TcpLinks::create(Bootstrap& boot, const std::string& secret,
                                                   const std::vector<bool>& tcpPeer, Doorbell& wake,
                                                   const TcpOptions& options, LostFn onLost) {
  const int me = boot.rank(), n = boot.nranks();
  const int k = std::max(1, options.socketsPerPeer);
  std::unique_ptr<TcpLinks> l(new TcpLinks(me, n, wake, options, std::move(onLost)));
  auto deadline = net::Clock::now() + std::chrono::milliseconds(options.timeoutMs);
  int expected = 0;
  bool any = false;
  l->onlyTcp_ = true;
  for (int r = 0; r < n; ++r) {
    if (r != me && !tcpPeer[static_cast<size_t>(r)]) l->onlyTcp_ = false;
    if (!tcpPeer[static_cast<size_t>(r)]) continue;
    any = true;
    if (r > me) expected += k;
  }
  // Listen where the bootstrap reached us; tell everyone where.
  int listenFd = -1;
  std::string where;
  if (any) {
    auto addr = net::resolve(boot.localAddress(), 0);
    if (!addr.isOk()) return addr.status();
    listenFd = net::tcpSocket();
    if (listenFd < 0) return net::ioError("socket");
    sockaddr_in a = addr.value();
    socklen_t len = sizeof a;
    if (::bind(listenFd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(listenFd, 128) != 0 ||
        ::getsockname(listenFd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      Status st = net::ioError("TCP transport: listening on " + boot.localAddress());
      ::close(listenFd);
      return st;
    }
    where = net::addressText(a);
  }
  auto all = boot.allGather(where);
  if (!all.isOk()) {
    if (listenFd >= 0) ::close(listenFd);
    return all.status();
  }
  auto keep = [&](int fd, int peer) {
    auto s = std::make_unique<Sock>();
    s->fd = fd;
    s->peer = peer;
    l->byPeer_[static_cast<size_t>(peer)].push_back(s.get());
    l->socks_.push_back(std::move(s));
  };
  Status st = Status::ok();
  // Connect to lower ranks (their listeners queue us even while they are
  // still connecting themselves), then accept the higher ones.
  for (int r = 0; r < me && st.isOk(); ++r) {
    if (!tcpPeer[static_cast<size_t>(r)]) continue;
    const std::string& hp = all.value()[static_cast<size_t>(r)];
    size_t colon = hp.rfind(':');
    if (colon == std::string::npos) {
      st = Status(StatusCode::kInternal, "rank " + std::to_string(r) + " has no TCP listener");
      break;
    }
    auto to = net::resolve(hp.substr(0, colon), std::atoi(hp.c_str() + colon + 1));
    if (!to.isOk()) {
      st = to.status();
      break;
    }
    for (int i = 0; i < k && st.isOk(); ++i) {
      auto fd = net::connectRetrying(
          to.value(), deadline,
          "TCP transport: rank " + std::to_string(me) + " to rank " + std::to_string(r));
      if (!fd.isOk()) {
        st = fd.status();
        break;
      }
      keep(fd.value(), r);
      tcpwire::Hello h{secret, static_cast<uint32_t>(me), static_cast<uint32_t>(n),
                       static_cast<uint32_t>(i)};
      st = net::sendFrame(fd.value(), tcpwire::encodeHello(h), deadline);
    }
  }
  std::vector<int> accepted(static_cast<size_t>(n), 0);
  if (st.isOk() && expected > 0) {
    const std::string me_s = std::to_string(me);
    st = net::acceptHellos(
        listenFd, 1, deadline, "TCP transport: rank " + me_s,
        [&](net::Arrival& a) -> std::string {
          auto hello = tcpwire::decodeHello(a.frames[0]);
          if (!hello.isOk()) return hello.status().message();
          const tcpwire::Hello& h = hello.value();
          if (!net::sameSecret(h.secret, secret)) return "wrong secret";
          if (h.nranks != static_cast<uint32_t>(n) || h.rank >= static_cast<uint32_t>(n) ||
              static_cast<int>(h.rank) <= me || !tcpPeer[h.rank] ||
              h.index >= static_cast<uint32_t>(k) || accepted[h.rank] >= k)
            return "unexpected rank " + std::to_string(h.rank) + " (link " +
                   std::to_string(h.index) + ")";
          ++accepted[h.rank];
          --expected;
          keep(a.fd, static_cast<int>(h.rank));
          return "";
        },
        [&] { return expected == 0; });
    if (st.code() == StatusCode::kTimeout) {
      std::string missing;
      for (int r = me + 1; r < n; ++r)
        if (tcpPeer[static_cast<size_t>(r)] && accepted[static_cast<size_t>(r)] < k)
          (missing += ' ') += std::to_string(r);
      st = Status(StatusCode::kTimeout,
                  "TCP transport: rank " + me_s + " heard from no link of ranks" + missing);
    }
  }
  if (listenFd >= 0) ::close(listenFd);
  if (st.isOk()) {
    l->epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
    l->event_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (l->epoll_ < 0 || l->event_ < 0) st = net::ioError("TCP transport: epoll");
  }
  if (st.isOk()) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = nullptr;
    ::epoll_ctl(l->epoll_, EPOLL_CTL_ADD, l->event_, &ev);
    for (auto& s : l->socks_) {
      ::fcntl(s->fd, F_SETFL, ::fcntl(s->fd, F_GETFL) | O_NONBLOCK);
      ev.events = EPOLLIN;
      ev.data.ptr = s.get();
      if (::epoll_ctl(l->epoll_, EPOLL_CTL_ADD, s->fd, &ev) != 0) {
        st = net::ioError("TCP transport: epoll_ctl");
        break;
      }
    }
  }
  // Everyone's links are up (or someone failed) before any data flows.
  Status b = boot.barrier();
  if (st.isOk()) st = b;
  if (!st.isOk()) return st;
  if (any) l->thread_ = std::thread([raw = l.get()] { raw->progressMain(); });
  return l;
}

TcpLinks::~TcpLinks() {
  shutdown();
  for (auto& s : socks_)
    if (s->fd >= 0) ::close(s->fd);
  if (epoll_ >= 0) ::close(epoll_);
  if (event_ >= 0) ::close(event_);
}

void TcpLinks::shutdown() {
  if (shutDown_) return;
  shutDown_ = true;
  if (thread_.joinable()) {
    stop_.store(true, std::memory_order_release);
    uint64_t one = 1;
    (void)!::write(event_, &one, sizeof one);
    park_.ring();
    thread_.join();
  }
  // Goodbye on every live socket, so peers take the close that follows as
  // leaving, not dying. Pending output is dropped: the calls are over.
  unsigned char bye[kHeaderBytes];
  Header h;
  h.magic = tcpwire::kMagic;
  h.kind = static_cast<uint32_t>(Kind::kBye);
  tcpwire::encode(h, bye);
  auto deadline = net::Clock::now() + std::chrono::seconds(1);
  for (auto& s : socks_)
    if (!s->closed && s->out.empty())
      (void)net::sendAll(s->fd, std::string_view(reinterpret_cast<char*>(bye), kHeaderBytes),
                         deadline);
}

std::unique_ptr<Connection> TcpLinks::connect(uint32_t fabric, int channel, int from, int to,
                                              int slots, size_t slotBytes) {
  CHORUS_CHECK((from == me_) != (to == me_), "a TCP connection has exactly one end here");
  bool outbound = from == me_;
  auto c = std::make_unique<TcpConnection>(*this, fabric, static_cast<uint32_t>(channel),
                                           outbound ? to : from, outbound, slots, slotBytes);
  enroll(c.get());
  return c;
}

void TcpLinks::enroll(TcpConnection* c) {
  std::lock_guard<std::mutex> lock(mu_);
  byKey_[{c->fabric_, c->channel_, c->peer_, c->outbound_}] = c;
  (c->outbound_ ? outbound_ : inbound_).push_back(c);
}

size_t TcpLinks::controlIndex(const TcpConnection& c) const {
  const size_t k = byPeer_[static_cast<size_t>(c.peer_)].size();
  return (c.fabric_ * 31u + c.channel_) % std::max<size_t>(k, 1);
}

TcpLinks::Sock& TcpLinks::controlSock(const TcpConnection& c) {
  return *byPeer_[static_cast<size_t>(c.peer_)][controlIndex(c)];
}

void TcpLinks::withdraw(TcpConnection* c) {
  std::lock_guard<std::mutex> lock(mu_);
  byKey_.erase({c->fabric_, c->channel_, c->peer_, c->outbound_});
  const bool talking =
      !lost_[static_cast<size_t>(c->peer_)] && !byPeer_[static_cast<size_t>(c->peer_)].empty();
  if (!c->outbound_ && talking) {
    // Tell the sender, behind every credit for this connection (the same
    // socket): then it need not remember the fabric for credits to come.
    Sock& s = controlSock(*c);
    if (!s.closed) {
      Sock::Out o;
      tcpwire::encode(c->frame(Kind::kWithdrawn, c->creditSent_), o.head);
      s.out.push_back(o);
    }
  } else if (c->outbound_ && !c->peerWithdrew_ && talking) {
    ++withdrawnFabrics_[c->fabric_];  // credits may still come until the peer says it withdrew
  }
  auto& v = c->outbound_ ? outbound_ : inbound_;
  v.erase(std::remove(v.begin(), v.end(), c), v.end());
  for (auto& s : socks_) {
    // Nothing may point into the connection any more. A frame half in the
    // kernel cannot be taken back: that socket's stream is lost.
    bool broken = s->rc == c && s->inPayload;
    for (auto it = s->out.begin(); it != s->out.end();) {
      if (it->conn != c) {
        ++it;
      } else if (it->done == 0) {
        it = s->out.erase(it);
      } else {
        broken = true;
        it->conn = nullptr;
        ++it;
      }
    }
    if (broken && !s->closed) {
      s->closed = true;
      ::shutdown(s->fd, SHUT_RDWR);
    }
  }
  if (!c->outbound_ && talking && thread_.joinable()) flush(controlSock(*c));
}

void TcpLinks::poke() {
  // The caller's thread sends what it just committed (or the credit it just
  // freed) itself when no one else is at the sockets: one system call
  // instead of waking the progress thread. Otherwise the progress thread
  // will see the change: it is awake, or this wakes it.
  // Sequentially consistent with the store that published the change (a
  // head or tail) and with the progress thread's "sleeping" store and
  // loads: one of the two sides sees the other's (no lost wake-up).
  if (thread_.joinable() && mu_.try_lock()) {
    pump();
    mu_.unlock();
    return;
  }
  if (sleeping_.load(std::memory_order_seq_cst)) {
    uint64_t one = 1;
    (void)!::write(event_, &one, sizeof one);
  }
}

void TcpLinks::abandon(TcpConnection& c) {
  std::lock_guard<std::mutex> lock(mu_);
  c.expectSeq_.store(kUnset, std::memory_order_relaxed);
  // A message that began arriving at the expected place (not in a slot) and
  // is not complete would go on being written there: end the link instead.
  for (size_t slot = 0; slot < c.slots_; ++slot)
    if (c.target_[slot] != nullptr && c.slotSeq_[slot] != kUnset) {
      c.target_[slot] = nullptr;
      lose(c.peer_, "a call failed while a message from it was arriving");
    }
}

void TcpLinks::claim(TcpConnection& c, uint64_t seq, unsigned char* dst, size_t maxBytes) {
  // Only if no one is at the sockets now (this thread is about to poll).
  if (!mu_.try_lock()) return;
  const size_t slot = seq % c.slots_;
  // Begun (not complete) in the slot, and fits: what is in moves over once,
  // the rest arrives at `dst` (nothing is copied twice).
  if (c.slotSeq_[slot] == seq && c.target_[slot] == nullptr && c.expect_[slot] <= maxBytes) {
    unsigned char* base = c.storage_ + slot * c.stride_;
    for (const auto& [off, len] : c.partsIn_[slot]) std::memcpy(dst + off, base + off, len);
    for (auto& s : socks_) {
      if (!s->inPayload || s->rc != &c || s->rseq != seq) continue;
      auto at = static_cast<size_t>(s->dst - base);
      std::memcpy(dst + s->roff, base + s->roff, at - s->roff);
      s->dst = dst + at;
    }
    c.target_[slot] = dst;
  }
  mu_.unlock();
}

void TcpLinks::enter() { drivers_.fetch_add(1, std::memory_order_seq_cst); }

bool TcpLinks::poll() {
  if (!thread_.joinable() || !mu_.try_lock()) return false;
  bool did = pump();
  epoll_event evs[64];
  int n = ::epoll_wait(epoll_, evs, 64, 0);
  if (n > 0 && handle(evs, n)) did = true;
  mu_.unlock();
  return did;
}

bool TcpLinks::sleep(int timeoutMs) {
  if (!onlyTcp_ || !thread_.joinable()) return false;
  // The progress thread is parked (this thread has not left); were it still
  // in its own epoll_wait and took the message, it kicks this one awake
  // (progressMain).
  epoll_event evs[64];
  int n = ::epoll_wait(epoll_, evs, 64, timeoutMs);
  if (n > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    handle(evs, n);
  }
  return true;
}

void TcpLinks::interrupt() {
  uint64_t one = 1;
  if (event_ >= 0) (void)!::write(event_, &one, sizeof one);
}

void TcpLinks::leave(bool sleeping) {
  // Output the kernel had no room for yet needs the progress thread now.
  bool pending = sleeping;
  if (!pending && mu_.try_lock()) {
    pump();
    for (auto& s : socks_) pending = pending || (!s->out.empty() && !s->closed);
    mu_.unlock();
  } else {
    pending = true;
  }
  if (drivers_.fetch_sub(1, std::memory_order_seq_cst) == 1 && pending) park_.ring();
}

void TcpLinks::lose(int peer, const std::string& why) {
  if (lost_[static_cast<size_t>(peer)]) return;
  lost_[static_cast<size_t>(peer)] = true;
  for (Sock* s : byPeer_[static_cast<size_t>(peer)]) {
    if (epoll_ >= 0) ::epoll_ctl(epoll_, EPOLL_CTL_DEL, s->fd, nullptr);
    s->closed = true;
    s->out.clear();
  }
  std::string msg = "rank " + std::to_string(peer) + ": " + why;
  logLine(LogLevel::kWarn,
          "TCP transport: rank " + std::to_string(me_) + " lost its link to " + msg);
  if (onLost_) onLost_(peer, msg);
  wake_.ring();
}

void TcpLinks::closeLeft(Sock& s) {
  s.closed = true;
  s.out.clear();
  if (epoll_ >= 0) ::epoll_ctl(epoll_, EPOLL_CTL_DEL, s.fd, nullptr);
}

void TcpLinks::watchOut(Sock& s, bool on) {
  if (s.watchingOut == on || s.closed) return;
  s.watchingOut = on;
  epoll_event ev{};
  ev.events = EPOLLIN | (on ? EPOLLOUT : 0u);
  ev.data.ptr = &s;
  ::epoll_ctl(epoll_, EPOLL_CTL_MOD, s.fd, &ev);
}

bool TcpLinks::pump() {
  bool did = false;
  for (TcpConnection* c : outbound_) {
    if (lost_[static_cast<size_t>(c->peer_)]) continue;
    const uint64_t head = c->head_.load(std::memory_order_seq_cst);  // see poke()
    auto& socks = byPeer_[static_cast<size_t>(c->peer_)];
    const size_t k = socks.size();
    while (c->next_ < head && c->next_ < c->credit_ + c->slots_) {
      const size_t slot = c->next_ % c->slots_;
      const size_t bytes = c->sizes_[slot];
      const unsigned char* data =
          c->refs_[slot] != nullptr ? c->refs_[slot] : c->storage_ + slot * c->stride_;
      size_t per = bytes;
      if (k > 1 && bytes >= options_.stripeBytes) per = ((bytes + k - 1) / k + 4095) / 4096 * 4096;
      const size_t first = controlIndex(*c);
      uint32_t parts = 0;
      size_t off = 0;
      do {
        size_t len = std::min(per, bytes - off);
        Header h = c->frame(Kind::kData, c->next_);
        h.mark = c->marks_[slot];
        h.offset = off;
        h.length = len;
        h.total = bytes;
        Sock::Out o;
        tcpwire::encode(h, o.head);
        o.data = data + off;
        o.len = len;
        o.conn = c;
        o.seq = c->next_;
        socks[(first + parts) % k]->out.push_back(o);
        ++parts;
        off += len;
      } while (off < bytes);
      c->partsLeft_[slot] = parts;
      ++c->next_;
      did = true;
    }
  }
  for (TcpConnection* c : inbound_) {
    if (lost_[static_cast<size_t>(c->peer_)]) continue;
    // Credit when half the window is free, or when the sender has used all
    // the credit it was given (it may be waiting): one credit frame per
    // half window instead of one per message. Or with data going to the
    // sender anyway: then it costs no system call of its own (collectives
    // send both ways, so the credit frames of their own all but vanish).
    uint64_t released = c->tail_.load(std::memory_order_seq_cst);  // see poke()
    if (released == c->creditSent_) continue;
    Sock* s = &controlSock(*c);
    if ((s->out.empty() || s->closed) && released - c->creditSent_ < (c->slots_ + 1) / 2 &&
        c->done_ < c->creditSent_ + c->slots_)
      continue;
    Sock::Out o;
    tcpwire::encode(c->frame(Kind::kCredit, released), o.head);
    s->out.push_back(o);
    c->creditSent_ = released;
    did = true;
  }
  for (auto& s : socks_)
    if (!s->out.empty() && !s->watchingOut && flush(*s)) did = true;
  return did;
}

bool TcpLinks::flush(Sock& s) {
  bool did = false;
  if (!s.out.empty() && !s.closed) {
    switch (failpoint("tcp.send")) {  // fault injection (core/failpoint.h)
      case FailAction::kReset: {
        // Linger 0: closing sends the peer an RST, not a FIN.
        linger l{1, 0};
        for (Sock* o : byPeer_[static_cast<size_t>(s.peer)]) {
          ::setsockopt(o->fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
          if (epoll_ >= 0) ::epoll_ctl(epoll_, EPOLL_CTL_DEL, o->fd, nullptr);
          ::close(o->fd);
          o->fd = -1;
        }
        lose(s.peer, "connection reset (CHORUS_FAILPOINT)");
        return true;
      }
      case FailAction::kDrop:
        return did;  // nothing leaves; the peer hears nothing more
      case FailAction::kNone:
        break;
    }
  }
  while (!s.out.empty() && !s.closed) {
    iovec iov[kMaxIov];
    int n = 0;
    for (auto it = s.out.begin(); it != s.out.end() && n + 2 <= kMaxIov; ++it) {
      if (it->done < kHeaderBytes) iov[n++] = {it->head + it->done, kHeaderBytes - it->done};
      size_t pdone = it->done > kHeaderBytes ? it->done - kHeaderBytes : 0;
      if (it->len > pdone)
        iov[n++] = {const_cast<unsigned char*>(it->data) + pdone, it->len - pdone};
    }
    msghdr m{};
    m.msg_iov = iov;
    m.msg_iovlen = static_cast<size_t>(n);
    ssize_t w = ::sendmsg(s.fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        watchOut(s, true);
        return did;
      }
      const int err = errno;
      // A peer that left (its goodbye came) closed its sockets: what is
      // queued for it is owed to no one, unless it is data. Its goodbye may
      // still wait to be read.
      if (!s.byeSeen) (void)readable(s);
      if (s.byeSeen && std::none_of(s.out.begin(), s.out.end(),
                                    [](const Sock::Out& o) { return o.conn != nullptr; })) {
        closeLeft(s);
        return true;
      }
      lose(s.peer, std::string("sending failed: ") + std::strerror(err));
      return true;
    }
    did = true;
    auto left = static_cast<size_t>(w);
    while (left > 0 || (!s.out.empty() && s.out.front().done == kHeaderBytes + s.out.front().len)) {
      Sock::Out& o = s.out.front();
      size_t take = std::min(left, kHeaderBytes + o.len - o.done);
      o.done += take;
      left -= take;
      if (o.done < kHeaderBytes + o.len) break;
      if (TcpConnection* c = o.conn) {
        size_t slot = o.seq % c->slots_;
        if (--c->partsLeft_[slot] == 0) {
          uint64_t tail = c->tail_.load(std::memory_order_relaxed);
          while (tail < c->next_ && c->partsLeft_[tail % c->slots_] == 0) ++tail;
          c->tail_.store(tail, std::memory_order_release);
          wake_.ring();
        }
      }
      s.out.pop_front();
    }
  }
  watchOut(s, false);
  return did;
}

Status TcpLinks::startFrame(Sock& s) {
  Header h = tcpwire::decode(s.hdr);
  s.hdrGot = 0;
  auto bad = [&](const std::string& what) {
    return Status(StatusCode::kIoError, "malformed frame (" + what + ")");
  };
  if (h.magic != tcpwire::kMagic) return bad("bad magic");
  switch (static_cast<Kind>(h.kind)) {
    case Kind::kBye:
      s.byeSeen = true;
      return Status::ok();
    case Kind::kCredit: {
      auto it = byKey_.find({h.fabric, h.channel, s.peer, true});
      // The peer consumed the last messages of a fabric this rank has
      // since released (both release it at the same call; the peer may
      // still have been reading): nothing waits for that credit.
      if (it == byKey_.end() && withdrawnFabrics_.count(h.fabric) != 0) return Status::ok();
      if (it == byKey_.end()) return bad("credit for an unknown connection");
      TcpConnection* c = it->second;
      if (h.seq > c->next_) return bad("credit for messages never sent");
      c->credit_ = std::max(c->credit_, h.seq);
      return Status::ok();
    }
    case Kind::kWithdrawn: {
      // The peer withdrew its end of a connection from this rank: no credit
      // for it follows (they travel on one socket, in order).
      auto it = byKey_.find({h.fabric, h.channel, s.peer, true});
      if (it != byKey_.end()) {
        it->second->peerWithdrew_ = true;
        return Status::ok();
      }
      auto f = withdrawnFabrics_.find(h.fabric);
      if (f == withdrawnFabrics_.end()) return bad("withdrawal of an unknown connection");
      if (--f->second == 0) withdrawnFabrics_.erase(f);
      return Status::ok();
    }
    case Kind::kData: {
      auto it = byKey_.find({h.fabric, h.channel, s.peer, false});
      if (it == byKey_.end())
        return bad("data for unknown connection fabric " + std::to_string(h.fabric) + " channel " +
                   std::to_string(h.channel));
      TcpConnection* c = it->second;
      if (h.total > c->slotBytes_ || h.length > h.total || h.offset > h.total - h.length)
        return bad("message part out of bounds");
      uint64_t released = c->tail_.load(std::memory_order_acquire);
      if (h.seq < c->done_ || h.seq >= released + c->slots_)
        return bad("message " + std::to_string(h.seq) + " outside the credit window");
      size_t slot = h.seq % c->slots_;
      if (c->slotSeq_[slot] != h.seq) {
        // Its first part: the message goes where its receiver expects it,
        // if it posted a place for it in time, else to the slot.
        c->slotSeq_[slot] = h.seq;
        c->got_[slot] = 0;
        c->expect_[slot] = h.total;
        c->marks_[slot] = h.mark;
        c->target_[slot] = nullptr;
        c->partsIn_[slot].clear();
        if (c->expectSeq_.load(std::memory_order_acquire) == h.seq &&
            h.total <= c->expectBytes_.load(std::memory_order_relaxed))
          c->target_[slot] = c->expectDst_.load(std::memory_order_relaxed);
      } else if (c->expect_[slot] != h.total || c->marks_[slot] != h.mark ||
                 c->got_[slot] + h.length > h.total) {
        return bad("parts of one message disagree");
      }
      s.inPayload = true;
      s.rc = c;
      s.rseq = h.seq;
      s.rlen = h.length;
      s.roff = h.offset;
      s.dst = (c->target_[slot] != nullptr ? c->target_[slot] : c->storage_ + slot * c->stride_) +
              h.offset;
      s.left = h.length;
      return Status::ok();
    }
  }
  return bad("unknown kind " + std::to_string(h.kind));
}

Status TcpLinks::consume(Sock& s, const unsigned char* data, size_t len) {
  while (len > 0 || (s.inPayload && s.left == 0)) {
    if (!s.inPayload) {
      size_t take = std::min(len, kHeaderBytes - s.hdrGot);
      std::memcpy(s.hdr + s.hdrGot, data, take);
      s.hdrGot += take;
      data += take;
      len -= take;
      if (s.hdrGot == kHeaderBytes) CHORUS_RETURN_IF_ERROR(startFrame(s));
      continue;
    }
    size_t take = std::min(len, s.left);
    if (take > 0) std::memcpy(s.dst, data, take);
    s.dst += take;
    s.left -= take;
    data += take;
    len -= take;
    if (s.left > 0) continue;
    // The part is in: complete messages in order.
    TcpConnection* c = s.rc;
    s.inPayload = false;
    s.rc = nullptr;
    size_t slot = s.rseq % c->slots_;
    c->got_[slot] += s.rlen;
    c->partsIn_[slot].emplace_back(s.roff, s.rlen);
    bool advanced = false;
    for (;;) {
      size_t at = c->done_ % c->slots_;
      if (c->slotSeq_[at] != c->done_ || c->got_[at] != c->expect_[at]) break;
      c->sizes_[at] = c->expect_[at];
      c->slotSeq_[at] = kUnset;
      ++c->done_;
      advanced = true;
    }
    if (advanced) {
      c->head_.store(c->done_, std::memory_order_release);
      wake_.ring();
    }
  }
  return Status::ok();
}

Status TcpLinks::readable(Sock& s) {
  for (int round = 0; round < 64 && !s.closed; ++round) {
    ssize_t got;
    if (s.inPayload && s.left >= kDirectReadBytes) {
      const size_t want = s.left;
      got = ::recv(s.fd, s.dst, want, MSG_DONTWAIT);
      if (got > 0) {
        // Straight into the slot (or destination): account as consumed payload.
        s.dst += got;
        s.left -= static_cast<size_t>(got);
        if (s.left == 0) CHORUS_RETURN_IF_ERROR(consume(s, nullptr, 0));
        // A short read emptied the socket: no second call to hear EAGAIN
        // (epoll reports it again when more comes).
        if (static_cast<size_t>(got) < want) return Status::ok();
        continue;
      }
    } else {
      got = ::recv(s.fd, s.stage.data(), s.stage.size(), MSG_DONTWAIT);
      if (got > 0) {
        CHORUS_RETURN_IF_ERROR(consume(s, s.stage.data(), static_cast<size_t>(got)));
        if (static_cast<size_t>(got) < s.stage.size()) return Status::ok();
        continue;
      }
    }
    // After its goodbye a peer's close may reset the connection (what we
    // sent it meanwhile, credits, went unread): it left all the same.
    if (got == 0 || (s.byeSeen && (errno == ECONNRESET || errno == EPIPE))) {
      if (s.byeSeen) {
        closeLeft(s);
        return Status::ok();
      }
      return Status(StatusCode::kIoError,
                    "closed its connection without leaving (it died or was killed)");
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::ok();
    if (errno == EINTR) continue;
    return net::ioError("receiving");
  }
  return Status::ok();
}

std::vector<tcpwire::Header> TcpLinks::queuedForTesting(int peer) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<tcpwire::Header> out;
  for (Sock* s : byPeer_[static_cast<size_t>(peer)])
    for (const Sock::Out& o : s->out) out.push_back(tcpwire::decode(o.head));
  return out;
}

size_t TcpLinks::fabricsAwaitedForTesting() {
  std::lock_guard<std::mutex> lock(mu_);
  return withdrawnFabrics_.size();
}

Status TcpLinks::feedForTesting(int peer, const unsigned char* data, size_t len) {
  std::lock_guard<std::mutex> lock(mu_);
  if (byPeer_[static_cast<size_t>(peer)].empty()) {
    auto s = std::make_unique<Sock>();
    s->peer = peer;
    byPeer_[static_cast<size_t>(peer)].push_back(s.get());
    socks_.push_back(std::move(s));
  }
  Sock& s = *byPeer_[static_cast<size_t>(peer)].front();
  if (s.closed) return Status(StatusCode::kIoError, "the link is closed");  // never read again
  return consume(s, data, len);
}

void TcpLinks::progressMain() {
  // While a rank drives the sockets (enter .. leave) this thread parks. It
  // looks again every few milliseconds rather than being woken by every
  // call's end: between back-to-back calls it stays parked, and a rank that
  // goes to sleep, or leaves output behind, wakes it (leave).
  constexpr int kParkMs = 2;
  epoll_event evs[64];
  while (!stop_.load(std::memory_order_acquire)) {
    uint32_t seen = park_.value();
    if (drivers_.load(std::memory_order_seq_cst) > 0) {
      {
        // A driver may have committed while this thread held the sockets.
        std::lock_guard<std::mutex> lock(mu_);
        pump();
      }
      park_.wait(seen, kParkMs);
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (pump()) continue;
    }
    sleeping_.store(true, std::memory_order_seq_cst);
    bool did;
    {
      std::lock_guard<std::mutex> lock(mu_);
      did = pump();
    }
    int n = did ? 0 : ::epoll_wait(epoll_, evs, 64, 1000);
    sleeping_.store(false, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(mu_);
    // A rank that began driving meanwhile may be asleep in sleep(): what
    // this thread takes from the sockets now would not wake it.
    if (handle(evs, n) && drivers_.load(std::memory_order_seq_cst) > 0) interrupt();
  }
}

bool TcpLinks::handle(const epoll_event* evs, int n) {
  bool did = false;
  for (int i = 0; i < n; ++i) {
    if (evs[i].data.ptr == nullptr) {
      uint64_t v;
      (void)!::read(event_, &v, sizeof v);
      continue;
    }
    Sock& s = *static_cast<Sock*>(evs[i].data.ptr);
    if (s.closed) continue;
    did = true;
    if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
      Status st = readable(s);
      if (!st.isOk()) {
        lose(s.peer, st.message());
        continue;
      }
    }
    if ((evs[i].events & EPOLLOUT) && !s.closed) {
      s.watchingOut = false;  // flush re-arms it if the kernel is still full
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.ptr = &s;
      ::epoll_ctl(epoll_, EPOLL_CTL_MOD, s.fd, &ev);
      flush(s);
    }
  }
  return did;
}

namespace {

class TcpFabricLinks final : public FabricLinks {
 public:
  explicit TcpFabricLinks(TcpLinks& links) : links_(links) {}
  // Both ends make their side in round 0; the meeting after it is what
  // connect() asks for.
  Result<std::unique_ptr<Connection>> open(int round, const ConnectionSpec& c) override {
    if (round != 0) return {nullptr};
    return links_.connect(c.fabric, c.channel, c.from, c.to, c.slots, c.slotBytes);
  }

 private:
  TcpLinks& links_;
};

class TcpTransport final : public PeerTransport {
 public:
  explicit TcpTransport(std::unique_ptr<TcpLinks> links) : links_(std::move(links)) {}
  std::unique_ptr<FabricLinks> beginFabric() override {
    return std::make_unique<TcpFabricLinks>(*links_);
  }
  Poller* poller() override { return links_.get(); }
  void interrupt() override { links_->interrupt(); }
  void shutdown() override { links_->shutdown(); }

 private:
  std::unique_ptr<TcpLinks> links_;
};

}  // namespace

bool tcpReaches(const PeerPlace&) { return true; }

Result<std::unique_ptr<PeerTransport>> createTcpTransport(TransportContext& context) {
  TcpOptions to;
  to.timeoutMs = context.options.timeoutMs;
  if (const std::string& k = context.options.tcpSockets; !k.empty()) {
    char* end = nullptr;
    long v = std::strtol(k.c_str(), &end, 10);
    if (end == k.c_str() || *end != '\0' || v < 1 || v > 16)
      return Status(StatusCode::kInvalidArgument,
                    "CHORUS_TCP_SOCKETS='" + k + "' is not a number in [1, 16]");
    to.socketsPerPeer = static_cast<int>(v);
  }
  Bootstrap& boot = context.boot;
  auto links = TcpLinks::create(boot, boot.secret(), context.linked,
                                context.bells.bell(boot.rank()), to, context.onLoss);
  if (!links.isOk()) return links.status();
  return std::unique_ptr<PeerTransport>(std::make_unique<TcpTransport>(std::move(links).value()));
}

}  // namespace chorus::runtime
