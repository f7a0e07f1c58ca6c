// Small blocking-with-deadline socket helpers shared by the bootstrap and the
// TCP transport's connection setup, and the little-endian encoding their
// handshakes use. Every read checks lengths, so malformed bytes are an
// error, never a crash.
#pragma once

#include <netinet/in.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace chorus::runtime::net {

using Clock = std::chrono::steady_clock;

// errno's message after `what`, as kIoError.
Status ioError(const std::string& what);

// Waits until `fd` is ready for `events` (poll bits) or the deadline passes.
Status waitFd(int fd, short events, Clock::time_point deadline, const char* what);
Status sendAll(int fd, std::string_view data, Clock::time_point deadline);
Status recvAll(int fd, char* buf, size_t len, Clock::time_point deadline);

// A frame is a u32 length and that many bytes; longer than kMaxFrame is refused.
inline constexpr uint32_t kMaxFrame = 1u << 24;
Status sendFrame(int fd, std::string_view payload, Clock::time_point deadline);
Result<std::string> recvFrame(int fd, Clock::time_point deadline);

// IPv4 address of `host` (a name or dotted quad) with `port`.
Result<sockaddr_in> resolve(const std::string& host, int port);
std::string addressText(const sockaddr_in& a);  // "1.2.3.4:5"
// A TCP socket (close-on-exec, TCP_NODELAY), or -1 with errno set.
int tcpSocket();
// Connects to `to`, retrying refused connections until the deadline (the
// listener may not be up yet). Returns the socket or the error.
Result<int> connectRetrying(const sockaddr_in& to, Clock::time_point deadline,
                            const std::string& what);
// Compares secrets in time that does not depend on their content.
bool sameSecret(std::string_view a, std::string_view b);
// 128 random bits as 32 hex digits.
std::string randomSecret();
// The local IP address of a connected or bound socket ("" on error).
std::string localAddressOf(int fd);
// The first IPv4 address of an interface that is up: of one whose name
// starts with `ifname` when that is not empty (kNotFound if none), else of
// one that is not loopback, else 127.0.0.1.
Result<std::string> interfaceAddress(const std::string& ifname);

void putU32(std::string& out, uint32_t v);
void putString(std::string& out, std::string_view s);

// Reads a frame's payload, checking every length against what is left.
class Reader {
 public:
  explicit Reader(std::string_view b) : b_(b) {}
  bool u32(uint32_t* v);
  bool string(std::string* s, uint32_t max);
  bool done() const { return at_ == b_.size(); }

 private:
  std::string_view b_;
  size_t at_ = 0;
};

}  // namespace chorus::runtime::net
