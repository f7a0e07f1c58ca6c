#include "runtime/bootstrap/bootstrap.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <thread>

#include "core/failpoint.h"
#include "core/log.h"
#include "runtime/transport/socket.h"

namespace chorus::runtime {

using net::Clock;
using net::putString;
using net::putU32;
using net::Reader;
using net::recvFrame;
using net::sendFrame;

namespace {

constexpr uint32_t kHelloMagic = 0x53524843;  // "CHRS"
// 2: the root's answer to a hello is a typed frame (the table, or why it
// gave up), like every frame after it.
constexpr uint32_t kVersion = 2;
// Frames after the hello start with a type byte.
constexpr char kData = 'D';    // a payload follows (the table, allGather/barrier data)
constexpr char kBye = 'B';     // the sender leaves on purpose
constexpr char kFailed = 'F';  // the sender leaves after an error (its text follows)
constexpr char kLost = 'L';    // rank 0 to the others: a rank is gone (u32, then why)
constexpr size_t kMaxReason = 2000;
constexpr uint32_t kMaxHost = 1024;
constexpr uint32_t kMaxSecret = 256;
constexpr uint32_t kMaxRanks = 1u << 16;

Result<int> parseInt(const char* name, const char* v, int lo, int hi) {
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (end == v || *end != '\0' || x < lo || x > hi)
    return invalidArgument(std::string(name) + "='" + v + "' is not a number in [" +
                           std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return static_cast<int>(x);
}

}  // namespace

namespace {

// A hello, decoded into *out: why it is refused ("" if it is not) for bytes
// that do not decode, a wrong secret or a wrong world size.
std::string readHello(const std::string& frame, const std::string& secret, int n,
                      wire::Hello* out) {
  Result<wire::Hello> hello = wire::decodeHello(frame);
  if (!hello.isOk()) return hello.status().message();
  *out = std::move(hello).value();
  if (!net::sameSecret(out->secret, secret)) return "wrong secret";
  if (static_cast<int>(out->nranks) != n)
    return "it says the world has " + std::to_string(out->nranks) + " ranks, not " +
           std::to_string(n);
  return "";
}

// The ranks a listener waited for in vain.
Status didNotJoin(const std::vector<int>& missing, int timeoutMs) {
  std::string list;
  for (int r : missing) (list += ' ') += std::to_string(r);
  return Status(StatusCode::kTimeout, "bootstrap: ranks" + list + " did not join within " +
                                          std::to_string(timeoutMs / 1000) + " s");
}

}  // namespace

int treeParent(int r) { return r <= 0 ? -1 : r - (r & -r); }

std::pair<int, int> treeSubtree(int r, int n) {
  return {r, r == 0 ? n : std::min(n, r + (r & -r))};
}

std::vector<int> treeChildren(int r, int n) {
  std::vector<int> out;
  const int end = treeSubtree(r, n).second;
  for (int k = 1; r + k < end; k <<= 1) out.push_back(r + k);
  return out;
}

namespace wire {

std::string encodeHello(const Hello& h) {
  std::string out;
  putU32(out, kHelloMagic);
  putU32(out, kVersion);
  putString(out, h.secret);
  putU32(out, h.rank);
  putU32(out, h.nranks);
  putString(out, h.host);
  return out;
}

Result<Hello> decodeHello(std::string_view bytes) {
  Reader r(bytes);
  uint32_t magic = 0, version = 0;
  Hello h;
  if (!r.u32(&magic) || magic != kHelloMagic)
    return invalidArgument("not a Chorus bootstrap hello");
  if (!r.u32(&version) || version != kVersion)
    return invalidArgument("bootstrap protocol version " + std::to_string(version) + ", expected " +
                           std::to_string(kVersion));
  if (!r.string(&h.secret, kMaxSecret) || !r.u32(&h.rank) || !r.u32(&h.nranks) ||
      !r.string(&h.host, kMaxHost) || !r.done())
    return invalidArgument("malformed bootstrap hello");
  if (h.nranks == 0 || h.nranks > kMaxRanks || h.rank >= h.nranks)
    return invalidArgument("bootstrap hello with rank " + std::to_string(h.rank) + " of " +
                           std::to_string(h.nranks));
  return h;
}

std::string encodeTable(const std::vector<std::string>& hosts) { return encodeBlobs(hosts); }

Result<std::vector<std::string>> decodeTable(std::string_view bytes, uint32_t nranks) {
  return decodeBlobs(bytes, nranks);
}

std::string encodeBlobs(const std::vector<std::string>& blobs) {
  std::string out;
  putU32(out, static_cast<uint32_t>(blobs.size()));
  for (const std::string& b : blobs) putString(out, b);
  return out;
}

Result<std::vector<std::string>> decodeBlobs(std::string_view bytes, uint32_t count) {
  Reader r(bytes);
  uint32_t n = 0;
  if (!r.u32(&n) || n != count)
    return invalidArgument("bootstrap list of " + std::to_string(n) + " entries, expected " +
                           std::to_string(count));
  std::vector<std::string> out(n);
  for (std::string& s : out)
    if (!r.string(&s, net::kMaxFrame)) return invalidArgument("malformed bootstrap list");
  if (!r.done()) return invalidArgument("trailing bytes in a bootstrap list");
  return out;
}

}  // namespace wire

std::string hostIdentity() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  // A network namespace is a host of its own: its ranks have their own
  // addresses (containers, and the tests' simulated hosts).
  std::error_code ec;
  auto ns = std::filesystem::read_symlink("/proc/self/ns/net", ec);
  std::string id = std::string(name).append("/").append(boot);
  if (!ec) id.append("/").append(ns.string());
  return id;
}

Status parseHostPort(const char* name, std::string_view v, BootstrapConfig* c) {
  size_t colon = v.rfind(':');
  if (colon == std::string_view::npos || colon == 0)
    return invalidArgument(std::string(name) + "='" + std::string(v) + "' is not HOST:PORT");
  std::string port(v.substr(colon + 1));
  auto p = parseInt(name, port.c_str(), 1, 65535);
  if (!p.isOk()) return p.status();
  c->rootHost = std::string(v.substr(0, colon));
  c->rootPort = p.value();
  return Status::ok();
}

std::string encodeRootId(const std::string& host, int port, const std::string& secret) {
  return "chorus-tcp:" + host + ":" + std::to_string(port) + ":" + secret;
}

Result<BootstrapConfig> decodeRootId(std::string_view id, std::string_view tag) {
  if (id.substr(0, tag.size()) != tag) return invalidArgument("not a Chorus TCP unique id");
  std::string_view rest = id.substr(tag.size());
  size_t last = rest.rfind(':');
  if (last == std::string_view::npos) return invalidArgument("malformed Chorus unique id");
  BootstrapConfig c;
  c.secret = std::string(rest.substr(last + 1));
  CHORUS_RETURN_IF_ERROR(parseHostPort("unique id", rest.substr(0, last), &c));
  return c;
}

Result<std::string> firstSlurmHost(std::string_view list) {
  auto bad = [&](const char* why) {
    return invalidArgument("SLURM_STEP_NODELIST='" + std::string(list) + "': " + why);
  };
  std::string host;
  for (size_t i = 0; i < list.size() && list[i] != ','; ++i) {
    if (list[i] == ']') return bad("a ']' without its '['");
    if (list[i] != '[') {
      host += list[i];
      continue;
    }
    // A bracket's first number, as written (node[01-04] -> node01).
    size_t j = i + 1;
    while (j < list.size() && std::isdigit(static_cast<unsigned char>(list[j])) != 0) ++j;
    const size_t close = list.find(']', i);
    if (j == i + 1 || close == std::string_view::npos || close < j)
      return bad("a '[' without a number and its ']'");
    host += list.substr(i + 1, j - i - 1);
    i = close;
  }
  if (host.empty()) return bad("no first host");
  return host;
}

int slurmRootPort(uint64_t jobId, uint64_t stepId) {
  return static_cast<int>(kSlurmFirstPort + (jobId * 16 + stepId) % kSlurmPorts);
}

Result<BootstrapConfig> bootstrapConfigFromEnvironment() {
  BootstrapConfig c;
  auto env = [](const char* n) -> const char* {
    const char* v = std::getenv(n);
    return v != nullptr && *v != '\0' ? v : nullptr;
  };
  const char *rank = nullptr, *size = nullptr, *rankName = nullptr, *sizeName = nullptr;
  for (auto [r, s] :
       {std::pair{"CHORUS_RANK", "CHORUS_WORLD_SIZE"}, std::pair{"RANK", "WORLD_SIZE"},
        std::pair{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}}) {
    if (env(r) != nullptr && env(s) != nullptr) {
      rank = env(r);
      size = env(s);
      rankName = r;
      sizeName = s;
      break;
    }
  }
  // Slurm's, for a task srun started: SLURM_STEP_NODELIST is a step's (a
  // batch script's shell has SLURM_PROCID=0 and SLURM_NTASKS but no step),
  // and a step of one task (srun --pty bash) is no job either.
  const char* slurmNodes = env("SLURM_STEP_NODELIST");
  bool slurm = false;
  if (rank == nullptr && slurmNodes != nullptr && env("SLURM_PROCID") != nullptr) {
    sizeName = env("SLURM_STEP_NUM_TASKS") != nullptr ? "SLURM_STEP_NUM_TASKS" : "SLURM_NTASKS";
    if (env(sizeName) != nullptr && std::string_view(env(sizeName)) != "1") {
      rank = env("SLURM_PROCID");
      size = env(sizeName);
      rankName = "SLURM_PROCID";
      slurm = true;
    }
  }
  if (rank == nullptr) return Status(StatusCode::kNotFound, "no rank variables in the environment");
  auto n = parseInt(sizeName, size, 1, static_cast<int>(kMaxRanks));
  if (!n.isOk()) return n.status();
  auto r = parseInt(rankName, rank, 0, n.value() - 1);
  if (!r.isOk()) return r.status();
  c.rank = r.value();
  c.nranks = n.value();
  if (const char* root = env("CHORUS_ROOT")) {
    CHORUS_RETURN_IF_ERROR(parseHostPort("CHORUS_ROOT", root, &c));
  } else if (const char* file = env("CHORUS_ROOT_FILE")) {
    std::string line;
    std::ifstream(file) >> line;
    if (line.empty())
      return invalidArgument(std::string("CHORUS_ROOT_FILE '") + file + "' holds no HOST:PORT");
    CHORUS_RETURN_IF_ERROR(parseHostPort("CHORUS_ROOT_FILE", line, &c));
  } else if (env("MASTER_ADDR") != nullptr && env("MASTER_PORT") != nullptr) {
    c.rootHost = env("MASTER_ADDR");
    auto p = parseInt("MASTER_PORT", env("MASTER_PORT"), 1, 65535);
    if (!p.isOk()) return p.status();
    c.rootPort = p.value();
  } else if (slurm) {
    // Task 0 runs on the step's first node; the port is the job's and
    // step's (two steps of a job running at once get different ones).
    auto host = firstSlurmHost(slurmNodes);
    if (!host.isOk()) return host.status();
    const char* job = env("SLURM_JOB_ID") != nullptr ? env("SLURM_JOB_ID") : env("SLURM_JOBID");
    const char* step = env("SLURM_STEP_ID") != nullptr ? env("SLURM_STEP_ID") : env("SLURM_STEPID");
    if (job == nullptr)
      return invalidArgument("SLURM_PROCID is set but not SLURM_JOB_ID: set CHORUS_ROOT=HOST:PORT");
    auto jobId = parseInt("SLURM_JOB_ID", job, 0, std::numeric_limits<int>::max());
    if (!jobId.isOk()) return jobId.status();
    auto stepId = step == nullptr
                      ? Result<int>(0)
                      : parseInt("SLURM_STEP_ID", step, 0, std::numeric_limits<int>::max());
    if (!stepId.isOk()) return stepId.status();
    c.rootHost = host.value();
    c.rootPort =
        slurmRootPort(static_cast<uint64_t>(jobId.value()), static_cast<uint64_t>(stepId.value()));
  } else {
    return invalidArgument(
        std::string(rankName) +
        " is set but no root address: set CHORUS_ROOT=HOST:PORT (or CHORUS_ROOT_FILE, "
        "or MASTER_ADDR and MASTER_PORT)");
  }
  // Launchers pass a secret; without one the root address is the secret
  // (every rank knows it, a stray connection does not present it).
  // The tree's variables come from chorus launch, with CHORUS_RANK (a
  // program that renames the launcher's variables for torchrun's or
  // OpenMPI's conventions gets the star those launchers give).
  const char* ports = env("CHORUS_BOOTSTRAP_PORTS");
  if (ports != nullptr && std::string_view(rankName) == "CHORUS_RANK") {
    const char* fd = env("CHORUS_BOOTSTRAP_FD");
    if (fd == nullptr)
      return invalidArgument("CHORUS_BOOTSTRAP_PORTS is set but not CHORUS_BOOTSTRAP_FD");
    auto f = parseInt("CHORUS_BOOTSTRAP_FD", fd, 0, 1 << 20);
    if (!f.isOk()) return f.status();
    int type = 0;
    socklen_t len = sizeof type;
    if (::getsockopt(f.value(), SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM)
      return invalidArgument(std::string("CHORUS_BOOTSTRAP_FD=") + fd +
                             " is not an open stream socket");
    c.listenFd = f.value();
    std::string_view list = ports;
    for (size_t at = 0; at <= list.size();) {
      size_t comma = std::min(list.find(',', at), list.size());
      std::string one(list.substr(at, comma - at));
      auto p = parseInt("CHORUS_BOOTSTRAP_PORTS", one.c_str(), 1, 65535);
      if (!p.isOk()) return p.status();
      c.treePorts.push_back(p.value());
      at = comma + 1;
    }
    if (static_cast<int>(c.treePorts.size()) != c.nranks)
      return invalidArgument("CHORUS_BOOTSTRAP_PORTS lists " + std::to_string(c.treePorts.size()) +
                             " ports for " + std::to_string(c.nranks) + " ranks");
  }
  const char* secret = env("CHORUS_SECRET");
  c.secret = secret != nullptr ? secret : "addr:" + c.rootHost + ":" + std::to_string(c.rootPort);
  if (const char* t = env("CHORUS_TIMEOUT_S")) {
    auto s = parseInt("CHORUS_TIMEOUT_S", t, 1, 2000000);
    if (!s.isOk()) return s.status();
    c.timeoutMs = s.value() * 1000;
  }
  return c;
}

Bootstrap::~Bootstrap() {
  goodbye();
  if (monitor_.joinable()) {
    char c = 'q';
    (void)!::write(wakePipe_[1], &c, 1);
    monitor_.join();
  }
  for (int fd : wakePipe_)
    if (fd >= 0) ::close(fd);
  for (const Link& l : links_)
    if (l.fd >= 0) ::close(l.fd);
  if (listenFd_ >= 0) ::close(listenFd_);
}

Result<std::unique_ptr<Bootstrap>> Bootstrap::listen(const BootstrapConfig& config) {
  if (config.rank != 0) return invalidArgument("only rank 0 listens");
  std::unique_ptr<Bootstrap> b(new Bootstrap());
  b->config_ = config;
  auto addr = net::resolve(config.rootHost, config.rootPort);
  if (!addr.isOk()) return addr.status();
  b->listenFd_ = net::tcpSocket();
  if (b->listenFd_ < 0) return net::ioError("socket");
  int one = 1;
  ::setsockopt(b->listenFd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a = addr.value();
  if (::bind(b->listenFd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
    return net::ioError("binding the bootstrap root to " + config.rootHost + ":" +
                        std::to_string(config.rootPort));
  if (::listen(b->listenFd_, 128) != 0) return net::ioError("listen");
  socklen_t len = sizeof a;
  ::getsockname(b->listenFd_, reinterpret_cast<sockaddr*>(&a), &len);
  b->port_ = ntohs(a.sin_port);
  return b;
}

// Admits `ranks` (ascending) on the listener as the star's root admits every
// rank: a hello with the secret, the world size and one of those ranks,
// once; anything else is refused and logged. Their links follow links_'s,
// in rank order; their host identities go to (*hosts)[rank] if given.
// Then the listener closes (docs/security.md), or, if some rank did not
// come, the ranks that did learn why.
Status Bootstrap::admit(const std::vector<int>& ranks, Clock::time_point deadline,
                        std::vector<std::string>* hosts) {
  const int n = config_.nranks;
  std::vector<int> fds(ranks.size(), -1);
  size_t joined = 0;
  Status st = Status::ok();
  if (!ranks.empty())
    st = net::acceptHellos(
        listenFd_, 1, deadline, "bootstrap",
        [&](net::Arrival& a) -> std::string {
          wire::Hello h;
          if (std::string why = readHello(a.frames[0], config_.secret, n, &h); !why.empty())
            return why;
          auto at = std::lower_bound(ranks.begin(), ranks.end(), static_cast<int>(h.rank));
          if (at == ranks.end() || *at != static_cast<int>(h.rank))
            return "rank " + std::to_string(h.rank) + " does not join rank " +
                   std::to_string(config_.rank) + (tree() ? " in the bootstrap tree" : "");
          auto k = static_cast<size_t>(at - ranks.begin());
          if (fds[k] >= 0) return "rank " + std::to_string(h.rank) + " is already taken";
          fds[k] = a.fd;
          if (hosts != nullptr) (*hosts)[h.rank] = h.host;
          ++joined;
          return "";
        },
        [&] { return joined == ranks.size(); });
  std::vector<int> missing;
  for (size_t k = 0; k < ranks.size(); ++k) {
    if (fds[k] >= 0) links_.push_back({ranks[k], fds[k]});
    if (fds[k] < 0) missing.push_back(ranks[k]);
  }
  if (st.code() == StatusCode::kTimeout) st = didNotJoin(missing, config_.timeoutMs);
  if (!st.isOk()) {
    goodbye(st.message());  // the ranks that joined learn why, not just a timeout
    return st;
  }
  // Everyone joined: nothing needs the listener any more (docs/security.md).
  ::close(listenFd_);
  listenFd_ = -1;
  return Status::ok();
}

Status Bootstrap::accept() {
  const int n = config_.nranks;
  auto deadline = Clock::now() + std::chrono::milliseconds(config_.timeoutMs);
  hosts_.assign(static_cast<size_t>(n), "");
  hosts_[0] = hostIdentity();
  std::vector<int> ranks;
  for (int r = 1; r < n; ++r) ranks.push_back(r);
  CHORUS_RETURN_IF_ERROR(admit(ranks, deadline, &hosts_));
  localAddress_ = n > 1 ? net::localAddressOf(links_[0].fd) : config_.rootHost;
  std::string table = kData + wire::encodeTable(hosts_);
  for (const Link& l : links_) CHORUS_RETURN_IF_ERROR(sendFrame(l.fd, table, deadline));
  return Status::ok();
}

// The tree: connect to the parent and say who we are (its listening socket
// exists before any rank runs, so this never waits for it), then admit the
// children as the star's root admits ranks. The table of hosts is the
// first all-gather, which also tells a rank that every rank above it
// joined (or why one gave up).
Status Bootstrap::treeJoin() {
  const int n = config_.nranks, me = config_.rank;
  auto deadline = Clock::now() + std::chrono::milliseconds(config_.timeoutMs);
  listenFd_ = config_.listenFd;
  port_ = config_.treePorts[static_cast<size_t>(me)];
  parent_ = treeParent(me);
  const std::string who = "bootstrap: rank " + std::to_string(me) + ": ";
  if (parent_ >= 0) {
    const int port = config_.treePorts[static_cast<size_t>(parent_)];
    auto addr = net::resolve(config_.rootHost, port);
    if (!addr.isOk()) return addr.status();
    auto fd =
        net::connectRetrying(addr.value(), deadline,
                             who + "its parent (rank " + std::to_string(parent_) + ") at " +
                                 config_.rootHost + ":" + std::to_string(port) + " did not answer");
    if (!fd.isOk()) return fd.status();
    links_.push_back({parent_, fd.value()});
    localAddress_ = net::localAddressOf(fd.value());
    wire::Hello h{config_.secret, static_cast<uint32_t>(me), static_cast<uint32_t>(n),
                  hostIdentity()};
    // Its socket listened before it ran: it may have accepted us and died.
    if (Status sent = sendFrame(fd.value(), wire::encodeHello(h), deadline); !sent.isOk())
      return Status(sent.code(), who + "its parent (rank " + std::to_string(parent_) +
                                     ") went away: " + sent.message());
  }
  const std::vector<int> children = treeChildren(me, n);
  CHORUS_RETURN_IF_ERROR(admit(children, deadline, nullptr));
  if (me == 0) localAddress_ = n > 1 ? net::localAddressOf(links_[0].fd) : config_.rootHost;
  auto hosts = allGather(hostIdentity());
  if (!hosts.isOk()) {
    if (me == 0 || hosts.status().code() != StatusCode::kAborted) return hosts.status();
    return Status(StatusCode::kAborted, who + "not admitted: " + hosts.status().message());
  }
  hosts_ = std::move(hosts).value();
  if (logEnabled(LogLevel::kInfo))
    logLine(LogLevel::kInfo, "bootstrap: rank " + std::to_string(me) + " joined the tree" +
                                 (parent_ >= 0 ? " under rank " + std::to_string(parent_) : "") +
                                 ", " + std::to_string(children.size()) + " children");
  return Status::ok();
}

Result<std::unique_ptr<Bootstrap>> Bootstrap::connect(const BootstrapConfig& config) {
  if (config.nranks < 1 || config.rank < 0 || config.rank >= config.nranks)
    return invalidArgument("rank " + std::to_string(config.rank) + " of " +
                           std::to_string(config.nranks));
  (void)failpoint("bootstrap.connect");  // fault injection (core/failpoint.h)
  if (!config.treePorts.empty()) {
    if (static_cast<int>(config.treePorts.size()) != config.nranks || config.listenFd < 0)
      return invalidArgument(
          "the bootstrap tree needs a port per rank and this rank's listening socket");
    std::unique_ptr<Bootstrap> b(new Bootstrap());
    b->config_ = config;
    CHORUS_RETURN_IF_ERROR(b->treeJoin());
    return b;
  }
  if (config.rank == 0) {
    auto b = listen(config);
    if (!b.isOk()) return b.status();
    CHORUS_RETURN_IF_ERROR(b.value()->accept());
    return b;
  }
  std::unique_ptr<Bootstrap> b(new Bootstrap());
  b->config_ = config;
  b->parent_ = 0;
  auto addr = net::resolve(config.rootHost, config.rootPort);
  if (!addr.isOk()) return addr.status();
  auto deadline = Clock::now() + std::chrono::milliseconds(config.timeoutMs);
  // The root may not listen yet: retry until the deadline.
  auto fd = net::connectRetrying(
      addr.value(), deadline,
      "bootstrap: rank " + std::to_string(config.rank) + ": the root (rank 0) did not answer");
  if (!fd.isOk()) return fd.status();
  b->links_.push_back({0, fd.value()});
  const int rootFd = fd.value();
  b->localAddress_ = net::localAddressOf(rootFd);
  wire::Hello h{config.secret, static_cast<uint32_t>(config.rank),
                static_cast<uint32_t>(config.nranks), hostIdentity()};
  CHORUS_RETURN_IF_ERROR(sendFrame(rootFd, wire::encodeHello(h), deadline));
  // The root answers by its own deadline (the table, or why it gave up)
  // unless it died; the margin lets its answer arrive.
  auto table = recvFrame(rootFd, deadline + std::chrono::seconds(2));
  const std::string rank = "bootstrap: rank " + std::to_string(config.rank) + ": ";
  if (!table.isOk()) {
    return Status(table.status().code(),
                  rank + "not admitted by the root (rank 0) at " + config.rootHost + ":" +
                      std::to_string(config.rootPort) + ": " + table.status().message() +
                      " (the root refuses and logs a wrong secret or world size)");
  }
  if (table.value().empty() || table.value()[0] != kData) {
    std::string why = table.value().empty() ? "" : table.value().substr(1);
    return Status(StatusCode::kAborted,
                  rank + "the root (rank 0) gave up" + (why.empty() ? "" : ": " + why));
  }
  auto hosts = wire::decodeTable(std::string_view(table.value()).substr(1),
                                 static_cast<uint32_t>(config.nranks));
  if (!hosts.isOk()) return hosts.status();
  b->hosts_ = std::move(hosts).value();
  return b;
}

// Up the tree and back down: each rank sends its parent the blobs of its
// subtree (its own, then its children's, in rank order), and rank 0 sends
// everything back down. In the star every subtree but rank 0's is one rank.
Result<std::vector<std::string>> Bootstrap::allGather(std::string_view mine) {
  (void)failpoint("bootstrap.allgather");
  auto deadline = Clock::now() + std::chrono::milliseconds(config_.timeoutMs);
  const int n = config_.nranks, me = config_.rank;
  auto subtree = [&](int r) {
    return tree() ? treeSubtree(r, n) : r == 0 ? std::pair{0, n} : std::pair{r, r + 1};
  };
  std::vector<std::string> blobs(static_cast<size_t>(n));
  blobs[static_cast<size_t>(me)] = std::string(mine);
  const size_t first = parent_ >= 0 ? 1 : 0;  // links_[0] is the parent's
  for (size_t k = first; k < links_.size(); ++k) {
    auto [lo, hi] = subtree(links_[k].rank);
    auto f = recvData(k, deadline);
    auto part = f.isOk() ? wire::decodeBlobs(f.value(), static_cast<uint32_t>(hi - lo))
                         : Result<std::vector<std::string>>(f.status());
    if (!part.isOk()) {
      goodbye(part.status().message());  // the others learn which rank, not just that we left
      return part.status();
    }
    std::move(part.value().begin(), part.value().end(),
              blobs.begin() + static_cast<std::ptrdiff_t>(lo));
  }
  if (parent_ >= 0) {
    auto [lo, hi] = subtree(me);
    std::vector<std::string> up(blobs.begin() + lo, blobs.begin() + hi);
    CHORUS_RETURN_IF_ERROR(sendData(0, wire::encodeBlobs(up), deadline));
    // The parent answers by its deadline (everything, or which rank failed)
    // unless it died; the margin lets its answer arrive.
    auto all = recvData(0, deadline + std::chrono::seconds(2));
    auto decoded = all.isOk() ? wire::decodeBlobs(all.value(), static_cast<uint32_t>(n))
                              : Result<std::vector<std::string>>(all.status());
    if (!decoded.isOk()) {
      // The ranks below wait on this one: they learn why (the parent knows).
      std::string why(1, kFailed);
      why.append(decoded.status().message().substr(0, kMaxReason));
      std::lock_guard<std::mutex> lock(sendMu_);
      for (size_t k = first; k < links_.size(); ++k)
        (void)sendFrame(links_[k].fd, why, Clock::now() + std::chrono::seconds(1));
      return decoded.status();
    }
    blobs = std::move(decoded).value();
  }
  if (links_.size() > first) {
    std::string all = wire::encodeBlobs(blobs);
    for (size_t k = first; k < links_.size(); ++k)
      CHORUS_RETURN_IF_ERROR(sendData(k, all, deadline));
  }
  return blobs;
}

Status Bootstrap::barrier() {
  auto r = allGather("");
  return r.isOk() ? Status::ok() : r.status();
}

Status Bootstrap::sendData(size_t slot, std::string_view payload, Clock::time_point deadline) {
  std::string f(1, kData);
  f.append(payload);
  std::lock_guard<std::mutex> lock(sendMu_);
  Status st = sendFrame(links_[slot].fd, f, deadline);
  if (st.isOk()) return st;
  return Status(st.code(), "bootstrap: sending to rank " + std::to_string(links_[slot].rank) +
                               ": " + st.message());
}

namespace {

// What a frame from rank `who` that is not data says of it, as the other
// ranks report it: closed without a goodbye (the read failed or ended), left
// after an error, or left on purpose; "" for any other frame.
std::string leaving(int who, const Result<std::string>& f) {
  const std::string rank = "rank " + std::to_string(who);
  if (!f.isOk() || f.value().empty())
    return rank + " closed its connection without leaving (it died or was killed)";
  if (f.value()[0] == kFailed)
    return rank + " left after an error: " + f.value().substr(1, kMaxReason);
  if (f.value()[0] == kBye) return rank + " left";
  return "";
}

}  // namespace

Result<std::string> Bootstrap::recvData(size_t slot, Clock::time_point deadline) {
  const int who = links_[slot].rank;
  if (!monitor_.joinable()) {
    for (;;) {
      auto f = recvFrame(links_[slot].fd, deadline);
      const std::string from = "bootstrap: rank " + std::to_string(who);
      if (!f.isOk()) return Status(f.status().code(), from + ": " + f.status().message());
      if (!f.value().empty() && f.value()[0] == kData) return f.value().substr(1);
      if (std::string why = leaving(who, f); !why.empty() && !f.value().empty())
        return Status(StatusCode::kAborted, "bootstrap: " + why);
      return invalidArgument("unexpected bootstrap frame from rank " + std::to_string(who));
    }
  }
  std::unique_lock<std::mutex> lock(mu_);
  auto& q = inbox_[slot];
  if (!cv_.wait_until(lock, deadline, [&] { return !q.empty() || gone_[slot]; }))
    return Status(StatusCode::kTimeout,
                  "bootstrap: rank " + std::to_string(who) + " did not answer");
  if (q.empty())
    return Status(StatusCode::kAborted,
                  "bootstrap: " + (why_[slot].empty()
                                       ? "rank " + std::to_string(who) + " closed its connection"
                                       : why_[slot]));
  std::string f = std::move(q.front());
  q.pop_front();
  return f;
}

void Bootstrap::goodbye(std::string_view failure) {
  if (saidGoodbye_) return;
  saidGoodbye_ = true;
  auto deadline = Clock::now() + std::chrono::seconds(1);
  std::string bye(1, failure.empty() ? kBye : kFailed);
  bye.append(failure.substr(0, kMaxReason));
  std::lock_guard<std::mutex> lock(sendMu_);
  for (const Link& l : links_)
    if (l.fd >= 0) (void)sendFrame(l.fd, bye, deadline);
}

std::string Bootstrap::newsOfPeers() {
  if (monitor_.joinable()) return "";
  std::string news;
  for (const Link& l : links_) {
    pollfd p{l.fd, POLLIN, 0};
    if (l.fd < 0 || ::poll(&p, 1, 0) != 1) continue;
    std::string why =
        leaving(l.rank, recvFrame(l.fd, Clock::now() + std::chrono::milliseconds(100)));
    if (!why.empty()) news += (news.empty() ? "" : "; ") + why;
  }
  return news;
}

bool Bootstrap::parentLeft() {
  std::lock_guard<std::mutex> lock(mu_);
  return parent_ >= 0 && !byeFrom_.empty() && byeFrom_[0];
}

void Bootstrap::startMonitor(std::function<void(int, const std::string&)> onLost) {
  if (monitor_.joinable()) return;
  if (::pipe2(wakePipe_, O_CLOEXEC) != 0) return;  // no monitor: timeouts still apply
  onLost_ = std::move(onLost);
  inbox_.assign(links_.size(), {});
  gone_.assign(links_.size(), false);
  byeFrom_.assign(links_.size(), false);
  why_.assign(links_.size(), "");
  lost_.assign(static_cast<size_t>(config_.nranks), false);
  monitor_ = std::thread([this] { monitorMain(); });
}

// Reads every link. A link that closes without a goodbye, or a goodbye
// after an error, is a lost rank; so is a notice (kLost) from a link. Each
// loss is reported here once and passed on to every other link still open:
// in the star rank 0 tells everyone, in the tree the notice floods the tree
// (each rank hears it once, over the one path from where it was seen).
void Bootstrap::monitorMain() {
  for (;;) {
    std::vector<pollfd> fds{{wakePipe_[0], POLLIN, 0}};
    std::vector<size_t> slots;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t i = 0; i < gone_.size(); ++i)
        if (!gone_[i]) {
          fds.push_back({links_[i].fd, POLLIN, 0});
          slots.push_back(i);
        }
    }
    if (::poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) return;
    if (fds[0].revents != 0) return;  // shutting down
    for (size_t k = 1; k < fds.size(); ++k) {
      if (fds[k].revents == 0) continue;
      const size_t slot = slots[k - 1];
      const int w = links_[slot].rank;
      auto f = recvFrame(fds[k].fd, Clock::now() + std::chrono::milliseconds(config_.timeoutMs));
      std::string lostWhy;
      int lostRank = -1;
      std::vector<bool> goneNow;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!f.isOk() || f.value().empty()) {
          gone_[slot] = true;
          if (!byeFrom_[slot]) {
            lostRank = w;
            lostWhy = leaving(w, f);
          }
        } else if (f.value()[0] == kData) {
          inbox_[slot].push_back(f.value().substr(1));
        } else if (f.value()[0] == kBye) {
          byeFrom_[slot] = true;
        } else if (f.value()[0] == kFailed) {
          // It leaves because its calls failed: ours with it cannot finish.
          byeFrom_[slot] = true;
          lostRank = w;
          lostWhy = leaving(w, f);
        } else if (f.value()[0] == kLost && f.value().size() >= 5) {
          uint32_t r = 0;
          Reader(std::string_view(f.value()).substr(1, 4)).u32(&r);
          if (r < lost_.size()) {
            lostRank = static_cast<int>(r);
            lostWhy = f.value().size() > 5 ? f.value().substr(5, kMaxReason)
                                           : "rank " + std::to_string(r) + " is gone (rank " +
                                                 std::to_string(w) + " lost its connection to it)";
          }
        }
        if (lostRank == w) why_[slot] = lostWhy;
        if (lostRank >= 0) {
          if (lost_[static_cast<size_t>(lostRank)])
            lostRank = -1;  // heard already
          else
            lost_[static_cast<size_t>(lostRank)] = true;
        }
        goneNow = gone_;
      }
      cv_.notify_all();
      if (lostRank < 0) continue;
      // Pass it on to every other link still open.
      std::string notice(1, kLost);
      putU32(notice, static_cast<uint32_t>(lostRank));
      notice.append(lostWhy);
      {
        std::lock_guard<std::mutex> lock(sendMu_);
        for (size_t i = 0; i < links_.size(); ++i)
          if (i != slot && links_[i].rank != lostRank && !goneNow[i])
            (void)sendFrame(links_[i].fd, notice, Clock::now() + std::chrono::seconds(1));
      }
      if (onLost_) onLost_(lostRank, lostWhy);
    }
  }
}

}  // namespace chorus::runtime
