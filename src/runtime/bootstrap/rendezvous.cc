#include "runtime/bootstrap/rendezvous.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "core/log.h"
#include "runtime/transport/socket.h"

namespace chorus::runtime {

using net::Clock;

namespace {

constexpr uint32_t kVerdictMagic = 0x56524843;  // "CHRV"
constexpr uint32_t kMaxText = 4096;

// Which process a rank lives in: ranks with equal texts share one.
std::string processIdentity() {
  return hostIdentity().append("/pid ").append(std::to_string(::getpid()));
}

// Every root thread, so that they can be stopped and joined when the
// process exits (a root nobody came to waits for its deadline).
class Roots {
 public:
  ~Roots() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& r : roots_) {
      char c = 'q';
      (void)!::write(r.stop[1], &c, 1);
    }
    for (auto& r : roots_) finish(r);
  }
  // Runs `main(stopFd)` on a thread of its own.
  Status start(std::function<void(int)> main) {
    std::lock_guard<std::mutex> lock(mu_);
    // Reap the roots that ended.
    for (auto it = roots_.begin(); it != roots_.end();) {
      if (it->done->load()) {
        finish(*it);
        it = roots_.erase(it);
      } else {
        ++it;
      }
    }
    Root r;
    if (::pipe2(r.stop, O_CLOEXEC) != 0) return net::ioError("pipe");
    r.done = std::make_shared<std::atomic<bool>>(false);
    r.thread = std::thread([main = std::move(main), stop = r.stop[0], done = r.done] {
      main(stop);
      done->store(true);
    });
    roots_.push_back(std::move(r));
    return Status::ok();
  }

 private:
  struct Root {
    std::thread thread;
    int stop[2] = {-1, -1};
    std::shared_ptr<std::atomic<bool>> done;
  };
  static void finish(Root& r) {
    if (r.thread.joinable()) r.thread.join();
    for (int fd : r.stop) ::close(fd);
  }
  std::mutex mu_;
  std::vector<Root> roots_;
};

Roots& roots() {
  static Roots r;
  return r;
}

// The root's work: admit ranks until all came (or the deadline, or stop),
// then answer each and close.
void rootMain(int listenFd, const std::string& secret, Clock::time_point deadline, int stopFd) {
  struct Arrival {
    int fd = -1;
    wire::Hello hello;
    std::string address;  // rank 0: where its bootstrap listens
  };
  std::vector<Arrival> came;
  uint32_t nranks = 0;
  auto answer = [](int fd, const wire::Verdict& v) {
    (void)net::sendFrame(fd, wire::encodeVerdict(v), Clock::now() + std::chrono::seconds(5));
  };
  bool complete = false;
  Status st = net::acceptHellos(
      listenFd, 2, deadline, "unique id root",
      [&](net::Arrival& in) -> std::string {
        auto hello = wire::decodeHello(in.frames[0]);
        if (!hello.isOk()) return hello.status().message();
        if (!net::sameSecret(hello.value().secret, secret)) return "wrong secret";
        Arrival a;
        a.fd = in.fd;
        a.hello = hello.value();
        a.address = in.frames[1];
        if (nranks != 0 && a.hello.nranks != nranks)
          return "rank " + std::to_string(a.hello.rank) + " says the communicator has " +
                 std::to_string(a.hello.nranks) + " ranks, rank " +
                 std::to_string(came.front().hello.rank) + " said " + std::to_string(nranks);
        if (std::any_of(came.begin(), came.end(),
                        [&](const Arrival& b) { return b.hello.rank == a.hello.rank; }))
          return "rank " + std::to_string(a.hello.rank) + " joined this communicator twice";
        if (a.hello.rank == 0 && a.address.size() > kMaxText)
          return "rank 0 sent a malformed address";
        nranks = a.hello.nranks;
        came.push_back(std::move(a));
        complete = came.size() == nranks;
        return "";
      },
      [&] { return complete; },
      [&](int fd, const std::string& why) {
        answer(fd, {"refused", why});
      },
      stopFd);
  if (st.code() == StatusCode::kTimeout) {
    std::string missing;
    for (uint32_t r = 0; r < std::max<uint32_t>(nranks, 1); ++r)
      if (std::none_of(came.begin(), came.end(),
                       [r](const Arrival& a) { return a.hello.rank == r; }))
        (missing += ' ') += std::to_string(r);
    logLine(LogLevel::kWarn, "unique id root: ranks" + missing +
                                 " did not come before the deadline; the id is spent");
    for (const Arrival& a : came)
      answer(a.fd, {"refused", "ranks" + missing + " did not come to the unique id's root"});
  } else if (st.isOk()) {
    const Arrival& rank0 =
        *std::find_if(came.begin(), came.end(), [](const Arrival& b) { return b.hello.rank == 0; });
    bool oneProcess = std::all_of(came.begin(), came.end(), [&](const Arrival& b) {
      return b.hello.host == came.front().hello.host;
    });
    wire::Verdict v =
        oneProcess ? wire::Verdict{"threads", ""} : wire::Verdict{"processes", rank0.address};
    for (const Arrival& b : came) answer(b.fd, v);
  }
  for (const Arrival& a : came) ::close(a.fd);
  ::close(listenFd);
}

}  // namespace

namespace wire {

std::string encodeVerdict(const Verdict& v) {
  std::string out;
  net::putU32(out, kVerdictMagic);
  net::putString(out, v.kind);
  net::putString(out, v.text);
  return out;
}

Result<Verdict> decodeVerdict(std::string_view bytes) {
  net::Reader r(bytes);
  uint32_t magic = 0;
  Verdict v;
  if (!r.u32(&magic) || magic != kVerdictMagic || !r.string(&v.kind, 16) ||
      !r.string(&v.text, kMaxText) || !r.done())
    return invalidArgument("malformed answer from the unique id's root");
  if (v.kind != "threads" && v.kind != "processes" && v.kind != "refused")
    return invalidArgument("the unique id's root answered '" + v.kind + "'");
  return v;
}

}  // namespace wire

Result<std::string> startRendezvousRoot(int timeoutMs) {
  const char* ifname = std::getenv("CHORUS_SOCKET_IFNAME");
  auto host = net::interfaceAddress(ifname != nullptr ? ifname : "");
  if (!host.isOk())
    return Status(host.status().code(), "CHORUS_SOCKET_IFNAME: " + host.status().message());
  auto addr = net::resolve(host.value(), 0);
  if (!addr.isOk()) return addr.status();
  int fd = net::tcpSocket();
  if (fd < 0) return net::ioError("socket");
  sockaddr_in a = addr.value();
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 128) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    Status s = net::ioError("listening for the unique id's ranks on " + host.value());
    ::close(fd);
    return s;
  }
  std::string secret = net::randomSecret();
  auto deadline = Clock::now() + std::chrono::milliseconds(timeoutMs);
  Status started =
      roots().start([fd, secret, deadline](int stopFd) { rootMain(fd, secret, deadline, stopFd); });
  if (!started.isOk()) {
    ::close(fd);
    return started;
  }
  return std::string(kRendezvousTag)
      .append(host.value())
      .append(":")
      .append(std::to_string(ntohs(a.sin_port)))
      .append(":")
      .append(secret);
}

Result<Meeting> meetAtRoot(std::string_view id, int rank, int nranks, int timeoutMs) {
  if (id.substr(0, kRendezvousTag.size()) != kRendezvousTag)
    return invalidArgument("not an id from chorusGetUniqueId");
  auto where = decodeRootId(id, kRendezvousTag);
  if (!where.isOk()) return where.status();
  auto to = net::resolve(where.value().rootHost, where.value().rootPort);
  if (!to.isOk()) return to.status();
  auto deadline = Clock::now() + std::chrono::milliseconds(timeoutMs);
  std::string who = "rank " + std::to_string(rank);
  auto fd = net::connectRetrying(to.value(), deadline, who + ": the unique id's root");
  if (!fd.isOk()) return fd.status();
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd.value()};
  Meeting m;
  m.config.rank = rank;
  m.config.nranks = nranks;
  m.config.secret = where.value().secret;
  m.config.timeoutMs = timeoutMs;
  std::string address;
  if (rank == 0) {  // listen before coming, on the address that reaches the root
    m.config.rootHost = net::localAddressOf(fd.value());
    auto boot = Bootstrap::listen(m.config);
    if (!boot.isOk()) return boot.status();
    m.listening = std::move(boot).value();
    m.config.rootPort = m.listening->rootPort();
    address = m.config.rootHost + ":" + std::to_string(m.config.rootPort);
  }
  wire::Hello hello{where.value().secret, static_cast<uint32_t>(rank),
                    static_cast<uint32_t>(nranks), processIdentity()};
  CHORUS_RETURN_IF_ERROR(net::sendFrame(fd.value(), wire::encodeHello(hello), deadline));
  CHORUS_RETURN_IF_ERROR(net::sendFrame(fd.value(), address, deadline));
  auto frame = net::recvFrame(fd.value(), deadline);
  if (!frame.isOk())
    return Status(
        frame.status().code(),
        who + ": waiting for the other ranks at the unique id's root: " + frame.status().message());
  auto v = wire::decodeVerdict(frame.value());
  if (!v.isOk()) return v.status();
  if (v.value().kind == "refused")
    return invalidArgument("the unique id's root refused " + who + ": " + v.value().text);
  if (v.value().kind == "threads") {
    m.threads = true;
    m.listening.reset();
    return m;
  }
  if (rank != 0)
    CHORUS_RETURN_IF_ERROR(
        parseHostPort("rank 0's address from the unique id's root", v.value().text, &m.config));
  return m;
}

}  // namespace chorus::runtime
