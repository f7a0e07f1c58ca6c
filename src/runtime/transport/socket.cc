#include "runtime/transport/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>
#include <thread>

#include "core/log.h"

namespace chorus::runtime::net {

Status ioError(const std::string& what) {
  return Status(StatusCode::kIoError, what + ": " + std::strerror(errno));
}

void putU32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void putString(std::string& out, std::string_view s) {
  putU32(out, static_cast<uint32_t>(s.size()));
  out.append(s);
}

bool Reader::u32(uint32_t* v) {
  if (b_.size() - at_ < 4) return false;
  *v = 0;
  for (int i = 0; i < 4; ++i)
    *v |= static_cast<uint32_t>(static_cast<unsigned char>(b_[at_ + static_cast<size_t>(i)]))
          << (8 * i);
  at_ += 4;
  return true;
}

bool Reader::string(std::string* s, uint32_t max) {
  uint32_t n = 0;
  if (!u32(&n) || n > max || b_.size() - at_ < n) return false;
  s->assign(b_.substr(at_, n));
  at_ += n;
  return true;
}

Status waitFd(int fd, short events, Clock::time_point deadline, const char* what) {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return Status(StatusCode::kTimeout, std::string("timed out ") + what);
    pollfd p{fd, events, 0};
    int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1 << 30)));
    if (r > 0) return Status::ok();
    if (r < 0 && errno != EINTR) return ioError(what);
  }
}

Status sendAll(int fd, std::string_view data, Clock::time_point deadline) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      off += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      CHORUS_RETURN_IF_ERROR(waitFd(fd, POLLOUT, deadline, "sending on a socket"));
    } else {
      return ioError("sending on a socket");
    }
  }
  return Status::ok();
}

Status recvAll(int fd, char* buf, size_t len, Clock::time_point deadline) {
  size_t off = 0;
  while (off < len) {
    ssize_t n = ::recv(fd, buf + off, len - off, MSG_DONTWAIT);
    if (n > 0) {
      off += static_cast<size_t>(n);
    } else if (n == 0) {
      return Status(StatusCode::kIoError, "the peer closed its connection");
    } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      CHORUS_RETURN_IF_ERROR(waitFd(fd, POLLIN, deadline, "waiting on a socket"));
    } else {
      return ioError("receiving on a socket");
    }
  }
  return Status::ok();
}

Status sendFrame(int fd, std::string_view payload, Clock::time_point deadline) {
  std::string f;
  putU32(f, static_cast<uint32_t>(payload.size()));
  f.append(payload);
  return sendAll(fd, f, deadline);
}

Result<std::string> recvFrame(int fd, Clock::time_point deadline) {
  char len[4];
  CHORUS_RETURN_IF_ERROR(recvAll(fd, len, 4, deadline));
  uint32_t n = 0;
  Reader(std::string_view(len, 4)).u32(&n);
  if (n > kMaxFrame)
    return Status(StatusCode::kInvalidArgument, "frame of " + std::to_string(n) +
                                                    " bytes refused (limit " +
                                                    std::to_string(kMaxFrame) + ")");
  std::string payload(n, '\0');
  CHORUS_RETURN_IF_ERROR(recvAll(fd, payload.data(), n, deadline));
  return payload;
}

Result<sockaddr_in> resolve(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr)
    return Status(StatusCode::kInvalidArgument,
                  "cannot resolve host '" + host + "': " + gai_strerror(rc));
  sockaddr_in a = *reinterpret_cast<sockaddr_in*>(res->ai_addr);
  ::freeaddrinfo(res);
  a.sin_port = htons(static_cast<uint16_t>(port));
  return a;
}

std::string addressText(const sockaddr_in& a) {
  char ip[INET_ADDRSTRLEN] = "?";
  ::inet_ntop(AF_INET, &a.sin_addr, ip, sizeof ip);
  return std::string(ip).append(":").append(std::to_string(ntohs(a.sin_port)));
}

int tcpSocket() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0) {
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  return fd;
}

Result<int> connectRetrying(const sockaddr_in& to, Clock::time_point deadline,
                            const std::string& what) {
  const auto started = Clock::now();
  for (auto pause = std::chrono::milliseconds(10);;
       pause = std::min(pause * 2, decltype(pause)(500))) {
    int fd = tcpSocket();
    if (fd < 0) return ioError("socket");
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to) == 0) return fd;
    ::close(fd);
    if (Clock::now() + pause > deadline)
      return Status(
          StatusCode::kTimeout,
          what + ": could not reach " + addressText(to) + " in " +
              std::to_string(
                  std::chrono::duration_cast<std::chrono::seconds>(deadline - started).count()) +
              " s");
    std::this_thread::sleep_for(pause);
  }
}

bool sameSecret(std::string_view a, std::string_view b) {
  // Constant time in the secret's content.
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

std::string randomSecret() {
  std::random_device rd;
  std::string s;
  const char* hex = "0123456789abcdef";
  for (int i = 0; i < 32; ++i) s += hex[rd() % 16];
  return s;
}

std::string localAddressOf(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return "";
  std::string s = addressText(a);
  return s.substr(0, s.rfind(':'));
}

Result<std::string> interfaceAddress(const std::string& ifname) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return ioError("getifaddrs");
  std::string found;
  for (ifaddrs* i = list; i != nullptr && found.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    if ((i->ifa_flags & IFF_UP) == 0) continue;
    if (ifname.empty() && (i->ifa_flags & IFF_LOOPBACK) != 0) continue;
    if (std::string_view(i->ifa_name).substr(0, ifname.size()) != ifname) continue;
    found = addressText(*reinterpret_cast<const sockaddr_in*>(i->ifa_addr));
    found.resize(found.rfind(':'));
  }
  ::freeifaddrs(list);
  if (!found.empty()) return found;
  if (ifname.empty()) return std::string("127.0.0.1");
  return Status(StatusCode::kNotFound, "no IPv4 interface that is up is named '" + ifname + "...'");
}

namespace {

void setBlocking(int fd, bool blocking) {
  int fl = ::fcntl(fd, F_GETFL);
  if (fl >= 0) ::fcntl(fd, F_SETFL, blocking ? fl & ~O_NONBLOCK : fl | O_NONBLOCK);
}

}  // namespace

Status acceptHellos(int listenFd, int frames, Clock::time_point deadline, const std::string& what,
                    const std::function<std::string(Arrival&)>& take,
                    const std::function<bool()>& done,
                    const std::function<void(int, const std::string&)>& refuse, int stopFd) {
  struct Pending {
    Arrival a;
    std::string buf;  // the frame being read: its length, then its bytes
    Clock::time_point until;
  };
  std::vector<Pending> pending;
  int refused = 0;
  auto drop = [&](size_t i, const std::string& why) {
    Pending& p = pending[i];
    if (++refused <= kLoggedRefusals)
      logLine(LogLevel::kWarn, what + ": refused a connection from " + p.a.from + ": " + why);
    else if (refused == kLoggedRefusals + 1)
      logLine(LogLevel::kWarn, what + ": refusing more connections (no longer logged one by one)");
    if (refuse) {
      setBlocking(p.a.fd, true);
      refuse(p.a.fd, why);
    }
    ::close(p.a.fd);
    pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
  };
  auto closeAll = [&] {
    for (Pending& p : pending) ::close(p.a.fd);
    pending.clear();
    if (refused > kLoggedRefusals)
      logLine(LogLevel::kWarn, what + ": refused " + std::to_string(refused) + " connections");
  };
  while (!done()) {
    auto now = Clock::now();
    if (now >= deadline) {
      closeAll();
      return Status(StatusCode::kTimeout, what + ": deadline passed");
    }
    for (size_t i = pending.size(); i-- > 0;)
      if (now >= pending[i].until)
        drop(i, "no hello within " + std::to_string(kHelloSeconds) + " s");
    std::vector<pollfd> fds{{listenFd, POLLIN, 0}, {stopFd, POLLIN, 0}};
    auto wake = deadline;
    for (const Pending& p : pending) {
      fds.push_back({p.a.fd, POLLIN, 0});
      wake = std::min(wake, p.until);
    }
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count() + 1;
    int rc = ::poll(fds.data(), fds.size(), static_cast<int>(std::min<int64_t>(ms, 1000)));
    if (rc < 0 && errno != EINTR) {
      closeAll();
      return ioError(what + ": poll");
    }
    if (rc <= 0) continue;
    if (stopFd >= 0 && fds[1].revents != 0) {
      closeAll();
      return Status(StatusCode::kAborted, what + ": stopped");
    }
    // Reads first (indices match `fds` until a connection is taken or dropped).
    for (size_t i = pending.size(); i-- > 0;) {
      if (fds[i + 2].revents == 0) continue;
      Pending& p = pending[i];
      uint32_t n = 0;
      if (p.buf.size() >= 4) Reader(std::string_view(p.buf).substr(0, 4)).u32(&n);
      size_t want = p.buf.size() < 4 ? 4 - p.buf.size() : 4 + n - p.buf.size();
      char chunk[4096];
      ssize_t got = ::recv(p.a.fd, chunk, std::min(want, sizeof chunk), 0);
      if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) {
        drop(i, "closed before its hello");
        continue;
      }
      if (got < 0) continue;
      p.buf.append(chunk, static_cast<size_t>(got));
      if (p.buf.size() == 4) {
        Reader(std::string_view(p.buf)).u32(&n);
        if (n > kMaxHelloBytes) {
          drop(i, "a hello of " + std::to_string(n) + " bytes (limit " +
                      std::to_string(kMaxHelloBytes) + ")");
          continue;
        }
      }
      if (p.buf.size() < 4 || p.buf.size() < 4 + static_cast<size_t>(n)) continue;
      p.a.frames.push_back(p.buf.substr(4));
      p.buf.clear();
      if (static_cast<int>(p.a.frames.size()) < frames) continue;
      setBlocking(p.a.fd, true);
      std::string why = take(p.a);
      if (!why.empty()) {
        drop(i, why);
        continue;
      }
      pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));  // the caller's now
      if (done()) break;
    }
    if ((fds[0].revents & POLLIN) != 0 && !done()) {
      sockaddr_in from{};
      socklen_t len = sizeof from;
      int fd = ::accept4(listenFd, reinterpret_cast<sockaddr*>(&from), &len,
                         SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd >= 0) {
        if (pending.size() >= kMaxPendingHellos) drop(0, "too many connections waiting");
        Pending p;
        p.a.fd = fd;
        p.a.from = addressText(from);
        p.until = Clock::now() + std::chrono::seconds(kHelloSeconds);
        pending.push_back(std::move(p));
      }
    }
  }
  closeAll();
  return Status::ok();
}

}  // namespace chorus::runtime::net
