// What loopback TCP itself gives on this machine, the bound for Chorus's TCP
// transport (issue 23 asks large messages at >= 80 % of it): iperf-style
// streams between two processes (a forked child sends, the parent
// receives), 1 and 2 sockets at once (Chorus stripes a large message over
// CHORUS_TCP_SOCKETS = 2 by default), and a ping-pong of small messages
// (half a round trip: the least a hop can cost). `bidir` streams both ways
// at once, as a 2-rank ring collective or sendrecv moves data: each process
// sends on one socket and receives on the other; GB/s per direction.
//   tcp_stream [SECONDS_PER_TEST [TEST...]]   (TEST: stream, bidir, pingpong; default all)
// Prints CSV: test,sockets,bytes,value,unit.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

void die(const char* what) {
  std::perror(what);
  std::exit(2);
}

// A listening socket on 127.0.0.1 (any port); its port in `port`.
int listenLoopback(int* port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) die("socket");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) die("bind");
  if (::listen(fd, 8) != 0) die("listen");
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *port = ntohs(a.sin_port);
  return fd;
}

int connectLoopback(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) die("connect");
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

bool sendAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool recvAll(int fd, char* p, size_t n) {
  while (n > 0) {
    ssize_t k = ::recv(fd, p, n, 0);
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

// `sockets` streams from a child to this process for `seconds`; GB/s.
double stream(int sockets, double seconds) {
  int port = 0;
  int lfd = listenLoopback(&port);
  constexpr size_t kBuf = size_t{1} << 20;
  pid_t child = ::fork();
  if (child == 0) {
    std::vector<std::thread> ts;
    for (int s = 0; s < sockets; ++s)
      ts.emplace_back([port] {
        int fd = connectLoopback(port);
        std::vector<char> buf(kBuf, 1);
        while (sendAll(fd, buf.data(), buf.size())) {
        }
        ::close(fd);
      });
    for (auto& t : ts) t.join();
    ::_exit(0);
  }
  std::vector<int> fds;
  for (int s = 0; s < sockets; ++s) fds.push_back(::accept(lfd, nullptr, nullptr));
  std::vector<double> got(static_cast<size_t>(sockets), 0);
  auto end = Clock::now() + std::chrono::duration<double>(seconds);
  auto t0 = Clock::now();
  std::vector<std::thread> ts;
  for (int s = 0; s < sockets; ++s)
    ts.emplace_back([&, s] {
      std::vector<char> buf(kBuf);
      while (Clock::now() < end) {
        ssize_t k = ::recv(fds[static_cast<size_t>(s)], buf.data(), buf.size(), 0);
        if (k <= 0) break;
        got[static_cast<size_t>(s)] += static_cast<double>(k);
      }
    });
  for (auto& t : ts) t.join();
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  for (int fd : fds) ::close(fd);
  ::close(lfd);
  ::waitpid(child, nullptr, 0);
  double total = 0;
  for (double g : got) total += g;
  return total / secs / 1e9;
}

// One stream each way between a child and this process for `seconds`;
// the mean GB/s of the two directions.
double bidir(double seconds) {
  int port = 0;
  int lfd = listenLoopback(&port);
  constexpr size_t kBuf = size_t{1} << 20;
  // Sends on `out` and receives on `in` for `seconds`; the bytes received.
  auto both = [seconds](int out, int in) {
    std::thread sender([out] {
      std::vector<char> buf(kBuf, 1);
      while (sendAll(out, buf.data(), buf.size())) {
      }
    });
    std::vector<char> buf(kBuf);
    double got = 0;
    auto end = Clock::now() + std::chrono::duration<double>(seconds);
    while (Clock::now() < end) {
      ssize_t k = ::recv(in, buf.data(), buf.size(), 0);
      if (k <= 0) break;
      got += static_cast<double>(k);
    }
    ::shutdown(out, SHUT_RDWR);
    ::shutdown(in, SHUT_RDWR);
    sender.join();
    return got;
  };
  pid_t child = ::fork();
  if (child == 0) {
    int a = connectLoopback(port), b = connectLoopback(port);
    both(a, b);
    ::_exit(0);
  }
  int a = ::accept(lfd, nullptr, nullptr), b = ::accept(lfd, nullptr, nullptr);
  int one = 1;
  ::setsockopt(a, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::setsockopt(b, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  auto t0 = Clock::now();
  double got = both(b, a);  // the child sends on a, receives on b
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  ::close(a);
  ::close(b);
  ::close(lfd);
  ::waitpid(child, nullptr, 0);
  return got / secs / 1e9;
}

// Half the round trip of a `bytes` ping-pong, in us.
double pingPong(size_t bytes, double seconds) {
  int port = 0;
  int lfd = listenLoopback(&port);
  pid_t child = ::fork();
  if (child == 0) {
    int fd = connectLoopback(port);
    std::vector<char> buf(bytes);
    while (recvAll(fd, buf.data(), bytes) && sendAll(fd, buf.data(), bytes)) {
    }
    ::_exit(0);
  }
  int fd = ::accept(lfd, nullptr, nullptr);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  std::vector<char> buf(bytes, 2);
  long trips = 0;
  auto end = Clock::now() + std::chrono::duration<double>(seconds);
  auto t0 = Clock::now();
  while (Clock::now() < end) {
    if (!sendAll(fd, buf.data(), bytes) || !recvAll(fd, buf.data(), bytes)) die("ping-pong");
    ++trips;
  }
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  ::close(fd);
  ::close(lfd);
  ::waitpid(child, nullptr, 0);
  return secs / static_cast<double>(trips) / 2 * 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = argc > 1 ? std::atof(argv[1]) : 2.0;
  std::vector<std::string> tests(argv + std::min(argc, 2), argv + argc);
  if (tests.empty()) tests = {"stream", "bidir", "pingpong"};
  bool bad = seconds <= 0;
  for (const std::string& t : tests)
    bad = bad || (t != "stream" && t != "bidir" && t != "pingpong");
  if (bad) {
    std::fprintf(stderr, "usage: tcp_stream [SECONDS_PER_TEST [stream|bidir|pingpong]...]\n");
    return 2;
  }
  std::printf("test,sockets,bytes,value,unit\n");
  for (const std::string& t : tests) {
    if (t == "stream")
      for (int s : {1, 2}) std::printf("stream,%d,,%.3f,GB/s\n", s, stream(s, seconds));
    if (t == "bidir") std::printf("bidir,2,,%.3f,GB/s per direction\n", bidir(seconds));
    if (t == "pingpong")
      for (size_t b : {size_t{4096}, size_t{65536}})
        std::printf("pingpong,1,%zu,%.2f,us per hop\n", b, pingPong(b, seconds));
  }
  std::fflush(stdout);
  return 0;
}
