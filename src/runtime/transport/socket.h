// Small blocking-with-deadline socket helpers shared by the bootstrap and the
// TCP transport's connection setup, and the little-endian encoding their
// handshakes use. Every read checks lengths, so malformed bytes are an
// error, never a crash.
#pragma once

#include <netinet/in.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

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

// A connection a listener accepted and the first frames it sent.
struct Arrival {
  int fd = -1;
  std::string from;                 // "1.2.3.4:5"
  std::vector<std::string> frames;  // as many as acceptHellos was asked to read
};

// The handshake's limits against a flood of strays (docs/security.md): a
// connection has kHelloSeconds to send its first frames, each at most
// kMaxHelloBytes; at most kMaxPendingHellos are read at once (the oldest
// beyond that is dropped); refusals past the first kLoggedRefusals of a
// listener are counted, not logged one by one.
inline constexpr int kHelloSeconds = 5;
inline constexpr uint32_t kMaxHelloBytes = 4096;
inline constexpr size_t kMaxPendingHellos = 64;
inline constexpr int kLoggedRefusals = 16;

// Accepts connections on `listenFd` and reads `frames` frames from each,
// all connections side by side, so a peer that connects and stays silent,
// or sends a huge length, delays no one. `take(arrival)` returns "" to keep
// the connection (its fd, blocking again, is then the caller's) or why it is
// refused: logged as "WHAT: refused a connection from ADDR: WHY" and
// closed (after `refuse(fd, why)` if given, e.g. to answer the peer).
// Returns OK once `done()` is true; kTimeout at `deadline`; kAborted when
// `stopFd` (>= 0) becomes readable.
Status acceptHellos(int listenFd, int frames, Clock::time_point deadline, const std::string& what,
                    const std::function<std::string(Arrival&)>& take,
                    const std::function<bool()>& done,
                    const std::function<void(int, const std::string&)>& refuse = nullptr,
                    int stopFd = -1);

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
