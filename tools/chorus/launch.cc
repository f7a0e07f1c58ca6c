// `chorus launch -n N [--hosts h1,h2] -- PROGRAM ARGS`: starts N processes of
// PROGRAM as ranks of one communicator (CHORUS_RANK, CHORUS_WORLD_SIZE,
// CHORUS_LOCAL_RANK, CHORUS_ROOT, CHORUS_SECRET in their environment),
// locally or on the hosts through an agent (ssh by default), forwards their
// output line by line prefixed with the rank, and when one fails kills the
// others and returns its exit code. Locally it also binds a listening socket
// per rank and hands each rank its own (CHORUS_BOOTSTRAP_FD) with every
// rank's port (CHORUS_BOOTSTRAP_PORTS): the ranks then join in a binomial
// tree instead of all at rank 0 (runtime/bootstrap/bootstrap.h; CHORUS_BOOTSTRAP=star
// keeps the star).
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "runtime/transport/socket.h"
#include "tools/chorus/commands.h"

namespace chorus::cli {

namespace {

// A port that was free a moment ago (rank 0 binds it for the bootstrap).
int freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

// A socket listening on a free port of 127.0.0.1 (close-on-exec; a child
// clears that on its own): its fd, and the port in *port.
int listeningSocket(int* port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 128) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    return -1;
  }
  *port = ntohs(a.sin_port);
  return fd;
}

struct Child {
  pid_t pid = -1;
  int out = -1;         // read end of its stdout+stderr
  std::string partial;  // output not yet ended by a newline
  bool exited = false;
  int code = 0;
};

void flushLines(int rank, Child& c, bool all) {
  size_t start = 0, nl;
  while ((nl = c.partial.find('\n', start)) != std::string::npos) {
    std::printf("[%d] %.*s\n", rank, static_cast<int>(nl - start), c.partial.data() + start);
    start = nl + 1;
  }
  c.partial.erase(0, start);
  if (all && !c.partial.empty()) {
    std::printf("[%d] %s\n", rank, c.partial.c_str());
    c.partial.clear();
  }
  std::fflush(stdout);
}

// Set by SIGINT/SIGTERM/SIGHUP to the launcher: the ranks run in their own
// process groups (so one rank can be stopped with all it started), so the
// launcher passes the signal on itself.
volatile sig_atomic_t interrupted = 0;
void onSignal(int sig) { interrupted = sig; }

// Ranks unlink their shared-memory segments as soon as all peers have
// mapped them; a rank killed in that window cannot. Once every rank has
// exited, nothing of the job may remain: remove what does.
void removeLeftovers(const std::string& job) {
  DIR* d = ::opendir("/dev/shm");
  if (d == nullptr) return;
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d))
    if (std::strncmp(e->d_name, job.c_str(), job.size()) == 0) names.emplace_back(e->d_name);
  ::closedir(d);
  for (const std::string& n : names) ::shm_unlink(("/" + n).c_str());
  if (!names.empty())
    std::fprintf(stderr, "chorus launch: removed %zu shared-memory segment(s) the ranks left\n",
                 names.size());
}

// `s` quoted for a POSIX shell.
std::string shellQuote(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'')
      q += "'\\''";
    else
      q += c;
  }
  return q + "'";
}

// The agent's words with {host} replaced, then `line` as one more word.
std::vector<std::string> agentCommand(const std::string& agent, const std::string& host,
                                      const std::string& line) {
  std::vector<std::string> words;
  size_t i = 0;
  while (i < agent.size()) {
    while (i < agent.size() && agent[i] == ' ') ++i;
    size_t j = agent.find(' ', i);
    if (j == std::string::npos) j = agent.size();
    if (j > i) {
      std::string w = agent.substr(i, j - i);
      for (size_t at; (at = w.find("{host}")) != std::string::npos;) w.replace(at, 6, host);
      words.push_back(w);
    }
    i = j;
  }
  words.push_back(line);
  return words;
}

int exitCode(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace

int runLaunch(const LaunchArgs& a) {
  if (a.nprocs < 1 || a.command.empty()) {
    std::fprintf(stderr, "chorus launch: need -n N >= 1 and a program after --\n");
    return 2;
  }
  const char* bindEnv = std::getenv("CHORUS_BIND");
  const std::string bind = !a.bind.empty()                          ? a.bind
                           : bindEnv != nullptr && *bindEnv != '\0' ? bindEnv
                                                                    : "auto";
  if (bind != "auto" && bind != "core" && bind != "none") {
    std::fprintf(stderr, "chorus launch: --bind (CHORUS_BIND) is auto, core or none, not '%s'\n",
                 bind.c_str());
    return 2;
  }
  int port = freePort();
  if (port < 0) {
    std::fprintf(stderr, "chorus launch: no free TCP port on 127.0.0.1: %s\n",
                 std::strerror(errno));
    return 2;
  }
  // The tree's sockets: on this host only, with the root left to us.
  std::vector<int> treeFds;
  std::string treePorts;
  const char* shape = std::getenv("CHORUS_BOOTSTRAP");
  if (a.hosts.empty() && a.root.empty() && (shape == nullptr || std::string(shape) != "star")) {
    for (int r = 0; r < a.nprocs; ++r) {
      int p = 0;
      int fd = listeningSocket(&p);
      if (fd < 0) {
        std::fprintf(stderr, "chorus launch: no listening socket on 127.0.0.1 for rank %d: %s\n", r,
                     std::strerror(errno));
        return 2;
      }
      treeFds.push_back(fd);
      treePorts += (r == 0 ? "" : ",") + std::to_string(p);
    }
  }
  std::string root = "127.0.0.1:" + std::to_string(port);
  if (!a.hosts.empty()) root = a.hosts[0] + ":" + std::to_string(port);
  if (!a.root.empty())
    root = a.root.find(':') == std::string::npos ? a.root + ":" + std::to_string(port) : a.root;
  const size_t perHost =
      a.hosts.empty() ? static_cast<size_t>(a.nprocs)
                      : (static_cast<size_t>(a.nprocs) + a.hosts.size() - 1) / a.hosts.size();
  char cwd[4096] = ".";
  if (::getcwd(cwd, sizeof cwd) == nullptr) std::strcpy(cwd, ".");
  struct sigaction sa {};
  sa.sa_handler = onSignal;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &sa, nullptr);
  std::string secret = chorus::runtime::net::randomSecret();
  // Segment names of this job start with it (see cleanup below).
  std::string job = "chorus-" + std::to_string(::getpid()) + "-" +
                    chorus::runtime::net::randomSecret().substr(0, 8);
  // Local ranks bound to a CPU each (--bind): a rank then never shares its
  // core with another rank of the job, which the scheduler otherwise may do
  // when other work keeps a core busy (two ranks on one core hand every
  // step over through the scheduler: a 4 KiB allreduce took 7.5 us, not
  // 0.5, with one busy core beside 2 ranks; docs/processes.md).
  std::vector<int> cpus;  // empty: no binding
  if (a.hosts.empty() && bind != "none") {
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (::sched_getaffinity(0, sizeof allowed, &allowed) == 0)
      for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
    if (bind == "auto" && static_cast<size_t>(a.nprocs) > cpus.size()) cpus.clear();
  }
  std::vector<Child> kids(static_cast<size_t>(a.nprocs));
  for (int r = 0; r < a.nprocs; ++r) {
    int fds[2];
    // On hosts, the secret travels on the agent's standard input, never on
    // a command line (docs/security.md).
    int secretPipe[2] = {-1, -1};
    if (::pipe2(fds, O_CLOEXEC) != 0 || (!a.hosts.empty() && ::pipe2(secretPipe, O_CLOEXEC) != 0)) {
      std::perror("chorus launch: pipe");
      return 2;
    }
    pid_t pid = ::fork();
    if (pid < 0) {
      std::perror("chorus launch: fork");
      return 2;
    }
    if (pid == 0) {
      ::setpgid(0, 0);  // its own group: stopping a rank stops what it started
      if (!cpus.empty()) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpus[static_cast<size_t>(r) % cpus.size()], &one);
        (void)::sched_setaffinity(0, sizeof one, &one);  // best effort, as mpirun's
      }
      ::dup2(fds[1], 1);
      ::dup2(fds[1], 2);
      std::vector<std::pair<std::string, std::string>> env = {
          {"CHORUS_RANK", std::to_string(r)},
          {"CHORUS_LOCAL_RANK", std::to_string(static_cast<size_t>(r) % perHost)},
          {"CHORUS_WORLD_SIZE", std::to_string(a.nprocs)},
          {"CHORUS_ROOT", root},
          {"CHORUS_SECRET", secret},
          {"CHORUS_JOB_ID", job}};
      if (!treeFds.empty()) {
        const int mine = treeFds[static_cast<size_t>(r)];
        ::fcntl(mine, F_SETFD, 0);  // this one survives exec
        env.emplace_back("CHORUS_BOOTSTRAP_FD", std::to_string(mine));
        env.emplace_back("CHORUS_BOOTSTRAP_PORTS", treePorts);
      }
      std::vector<std::string> command = a.command;
      if (a.hosts.empty()) {
        ::unsetenv("CHORUS_BOOTSTRAP_FD");  // an outer launch's, when this one is a star
        ::unsetenv("CHORUS_BOOTSTRAP_PORTS");
        for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
      } else {
        // On a host: one shell line that enters this directory and sets the
        // variables there (ssh does not carry the environment).
        // The launcher's own CHORUS_* and MSCCL_* settings go along too.
        std::string line = "cd " + shellQuote(cwd) +
                           " && read -r CHORUS_SECRET && export CHORUS_SECRET && exec env";
        ::dup2(secretPipe[0], 0);
        for (char** e = environ; *e != nullptr; ++e) {
          std::string kv = *e;
          std::string key = kv.substr(0, kv.find('='));
          bool ours = false;
          for (const auto& kvp : env) ours = ours || kvp.first == key;
          if (!ours && (key.rfind("CHORUS_", 0) == 0 || key.rfind("MSCCL_", 0) == 0))
            (line += ' ') += shellQuote(kv);
        }
        for (const auto& [k, v] : env)
          if (k != "CHORUS_SECRET") (line += ' ') += shellQuote(k + "=" + v);
        for (const std::string& w : a.command) (line += ' ') += shellQuote(w);
        command = agentCommand(a.agent, a.hosts[static_cast<size_t>(r) / perHost], line);
      }
      std::vector<char*> argv;
      for (const std::string& s : command) argv.push_back(const_cast<char*>(s.c_str()));
      argv.push_back(nullptr);
      ::execvp(argv[0], argv.data());
      std::fprintf(stderr, "chorus launch: cannot run '%s': %s\n", argv[0], std::strerror(errno));
      ::_exit(127);
    }
    ::close(fds[1]);
    if (!treeFds.empty()) ::close(treeFds[static_cast<size_t>(r)]);  // the child's now
    if (secretPipe[1] >= 0) {
      std::string line = secret + "\n";
      (void)!::write(secretPipe[1], line.data(), line.size());
      ::close(secretPipe[0]);
      ::close(secretPipe[1]);
    }
    ::setpgid(pid, pid);  // also here: no race with the child's own call
    ::fcntl(fds[0], F_SETFL, O_NONBLOCK);
    kids[static_cast<size_t>(r)].pid = pid;
    kids[static_cast<size_t>(r)].out = fds[0];
  }

  int firstFailure = 0;
  bool killing = false;
  auto killAt = std::chrono::steady_clock::time_point::max();
  // --keep-going: once a rank failed, the others have their own deadline
  // (CHORUS_TIMEOUT_S) and a margin to notice and leave; a rank still there
  // then is hung (e.g. stopped) and is stopped here, so the job ends.
  auto graceAt = std::chrono::steady_clock::time_point::max();
  long graceS = 300;
  if (const char* t = std::getenv("CHORUS_TIMEOUT_S"); t != nullptr && std::atol(t) > 0)
    graceS = std::atol(t);
  size_t running = kids.size();
  while (running > 0) {
    std::vector<pollfd> pfds;
    std::vector<size_t> who;
    for (size_t r = 0; r < kids.size(); ++r)
      if (kids[r].out >= 0) {
        pfds.push_back({kids[r].out, POLLIN, 0});
        who.push_back(r);
      }
    if (!pfds.empty())
      ::poll(pfds.data(), pfds.size(), 100);
    else
      ::usleep(20000);
    for (size_t i = 0; i < pfds.size(); ++i) {
      if ((pfds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      Child& c = kids[who[i]];
      char buf[65536];
      ssize_t n = ::read(c.out, buf, sizeof buf);
      if (n > 0) {
        c.partial.append(buf, static_cast<size_t>(n));
        flushLines(static_cast<int>(who[i]), c, false);
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        flushLines(static_cast<int>(who[i]), c, true);
        ::close(c.out);
        c.out = -1;
      }
    }
    for (size_t r = 0; r < kids.size(); ++r) {
      Child& c = kids[r];
      int status = 0;
      if (c.exited || ::waitpid(c.pid, &status, WNOHANG) != c.pid) continue;
      c.exited = true;
      c.code = exitCode(status);
      --running;
      if (c.code != 0 && firstFailure == 0 && a.keepGoing) {
        firstFailure = c.code;
        std::fprintf(stderr, "chorus launch: rank %zu exited with %d\n", r, c.code);
        graceAt = std::chrono::steady_clock::now() + std::chrono::seconds(graceS + 2);
      } else if (c.code != 0 && firstFailure == 0 && !killing) {
        firstFailure = c.code;
        std::fprintf(stderr, "chorus launch: rank %zu exited with %d; stopping the others\n", r,
                     c.code);
        killing = true;
        for (Child& o : kids) ::kill(-o.pid, SIGTERM);
        killAt = std::chrono::steady_clock::now() + std::chrono::seconds(3);
      }
    }
    if (interrupted != 0 && !killing) {
      std::fprintf(stderr, "chorus launch: signal %d; stopping the ranks\n", interrupted);
      firstFailure = 128 + interrupted;
      killing = true;
      for (Child& o : kids) ::kill(-o.pid, SIGTERM);
      killAt = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    }
    if (!killing && std::chrono::steady_clock::now() > graceAt) {
      std::string left;
      for (size_t r = 0; r < kids.size(); ++r)
        if (!kids[r].exited) left += " " + std::to_string(r);
      std::fprintf(stderr,
                   "chorus launch: rank(s)%s still running %ld s after a rank failed "
                   "(CHORUS_TIMEOUT_S + 2); stopping them\n",
                   left.c_str(), graceS + 2);
      killing = true;
      for (Child& o : kids) {
        ::kill(-o.pid, SIGTERM);
        ::kill(-o.pid, SIGCONT);  // a stopped rank handles its SIGTERM now
      }
      killAt = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    }
    if (killing && std::chrono::steady_clock::now() > killAt) {
      for (Child& o : kids) ::kill(-o.pid, SIGKILL);
      killAt = std::chrono::steady_clock::time_point::max();
    }
  }
  for (size_t r = 0; r < kids.size(); ++r) {
    Child& c = kids[r];
    if (c.out >= 0) {
      char buf[65536];
      ssize_t n;
      while ((n = ::read(c.out, buf, sizeof buf)) > 0)
        c.partial.append(buf, static_cast<size_t>(n));
      flushLines(static_cast<int>(r), c, true);
      ::close(c.out);
    }
  }
  removeLeftovers(job);
  return firstFailure;
}

}  // namespace chorus::cli
