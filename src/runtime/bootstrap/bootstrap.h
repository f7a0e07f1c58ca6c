// Bootstrap: how the ranks of a communicator that live in different
// processes (or hosts) find each other (issue 4). Two shapes:
//   - the star: rank 0 listens at the root address; every other rank
//     connects, proves it holds the communicator's secret and says who it
//     is (rank, world size, host identity); rank 0 answers with the table
//     of all ranks. Launchers that give each rank only the root's address
//     (torchrun, mpirun, chorusGetUniqueId) get this one.
//   - the tree (issue 26): when every rank's address is known in advance
//     (chorus launch binds a listening socket per rank and hands each its
//     own, with every rank's port), rank r connects to its parent in a
//     binomial tree (r less its lowest set bit), which checks it as the
//     root does. Joining then takes ceil(log2 N) rounds, and no rank
//     handles more than ceil(log2 N) connections.
// The same connections then carry small collectives (all-gather of short
// blobs, barrier) used to set up transports: up the tree (the star is a
// tree of depth 1) and back down, 2 ceil(log2 N) rounds in the tree.
//
// The wire format is length-prefixed frames; decoding checks every length
// and value, so malformed bytes are an error, never a crash (fuzzed).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "core/status.h"

namespace chorus::runtime {

// Where the root listens and the secret every rank must present.
struct BootstrapConfig {
  int rank = 0;
  int nranks = 1;
  std::string rootHost = "127.0.0.1";
  int rootPort = 0;  // rank 0: 0 = any free port (see Bootstrap::rootPort)
  std::string secret;
  int timeoutMs = 300000;
  // The tree: every rank's bootstrap port on rootHost, by rank (empty: the
  // star), and this rank's socket already listening on its own port
  // (CHORUS_BOOTSTRAP_PORTS, CHORUS_BOOTSTRAP_FD; chorus launch sets both).
  std::vector<int> treePorts;
  int listenFd = -1;
};

// The binomial tree of `n` ranks rooted at 0: rank r's parent (-1 for 0),
// its children (ascending), and the ranks of its subtree [first, last).
int treeParent(int r);
std::vector<int> treeChildren(int r, int n);
std::pair<int, int> treeSubtree(int r, int n);

// Reads the configuration from the environment: Chorus's own variables
// (CHORUS_RANK, CHORUS_WORLD_SIZE, CHORUS_ROOT=host:port, CHORUS_SECRET, and
// for the tree CHORUS_BOOTSTRAP_PORTS=p0,p1,... and CHORUS_BOOTSTRAP_FD),
// else torchrun's (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), else
// OpenMPI's (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE with the root from
// CHORUS_ROOT or the file named by CHORUS_ROOT_FILE), else Slurm's for a
// task of an srun step of two or more tasks (SLURM_PROCID,
// SLURM_STEP_NUM_TASKS or SLURM_NTASKS; the root, unless CHORUS_ROOT,
// CHORUS_ROOT_FILE or MASTER_ADDR and MASTER_PORT say otherwise, on the
// first host of SLURM_STEP_NODELIST at slurmRootPort). kNotFound when none
// is set; kInvalidArgument naming the variable when one is malformed.
Result<BootstrapConfig> bootstrapConfigFromEnvironment();

// The first host of a Slurm host list: "node[01-04,07],gpu3" -> "node01",
// "rack[2-3]-n[5-6]" -> "rack2-n5"; kInvalidArgument when malformed.
Result<std::string> firstSlurmHost(std::string_view list);
// The root's port for a Slurm job step: kSlurmFirstPort + (job id x 16 +
// step id) mod kSlurmPorts, the same on every task of the step.
inline constexpr int kSlurmFirstPort = 20000, kSlurmPorts = 10000;
int slurmRootPort(uint64_t jobId, uint64_t stepId);

// This host's identity: ranks with equal identities share memory.
std::string hostIdentity();

// An id naming rank 0's bootstrap directly: "chorus-tcp:HOST:PORT:SECRET"
// (`tag` then HOST:PORT:SECRET).
std::string encodeRootId(const std::string& host, int port, const std::string& secret);
Result<BootstrapConfig> decodeRootId(std::string_view id, std::string_view tag = "chorus-tcp:");
// Reads "HOST:PORT" into c->rootHost and c->rootPort; `name` is what errors call it.
Status parseHostPort(const char* name, std::string_view v, BootstrapConfig* c);

namespace wire {

// What a rank says first.
struct Hello {
  std::string secret;
  uint32_t rank = 0;
  uint32_t nranks = 0;
  std::string host;
};
std::string encodeHello(const Hello& h);
Result<Hello> decodeHello(std::string_view bytes);

// The root's answer: every rank's host identity, by rank.
std::string encodeTable(const std::vector<std::string>& hosts);
Result<std::vector<std::string>> decodeTable(std::string_view bytes, uint32_t nranks);

// A list of blobs (all-gather results).
std::string encodeBlobs(const std::vector<std::string>& blobs);
Result<std::vector<std::string>> decodeBlobs(std::string_view bytes, uint32_t count);

}  // namespace wire

class Bootstrap {
 public:
  // Rank 0 listens and waits for every other rank; others connect (retrying
  // until the timeout). Errors: kTimeout (who did not show up), kInvalidArgument
  // (a mismatched world size or duplicate rank), kIoError (sockets).
  static Result<std::unique_ptr<Bootstrap>> connect(const BootstrapConfig& config);
  // Rank 0 only: listen first (so the port is known), then connect().
  static Result<std::unique_ptr<Bootstrap>> listen(const BootstrapConfig& config);
  Status accept();  // rank 0 after listen(): wait for the other ranks
  ~Bootstrap();

  int rank() const { return config_.rank; }
  int nranks() const { return config_.nranks; }
  int rootPort() const { return port_; }
  const std::string& secret() const { return config_.secret; }
  // The IP address this rank's peers reach it at (the local end of its
  // bootstrap connections).
  const std::string& localAddress() const { return localAddress_; }
  // Host identity of every rank (after connect/accept).
  const std::vector<std::string>& hosts() const { return hosts_; }

  // Every rank's blob, by rank (a collective over the bootstrap sockets).
  Result<std::vector<std::string>> allGather(std::string_view mine);
  Status barrier();

  // Watches the bootstrap connections from a thread of its own: when a peer
  // closes its connection without saying goodbye (it died, or its host
  // went away), `onLost(rank, why)` is called once for it; rank 0 also tells
  // every other rank, so all learn of any death within a round trip.
  // allGather and barrier keep working (the thread hands their frames over).
  void startMonitor(std::function<void(int, const std::string&)> onLost);
  // Tells the peers this rank leaves on purpose (its connections then close
  // without alarming them), or, with `failure`, that it leaves because its
  // calls failed: then their onLost fires for it with that text (rank 0
  // passes it on), so a failure anywhere ends every rank's pending call
  // instead of leaving them to time out. Called by the destructor too.
  void goodbye(std::string_view failure = {});
  // Before the monitor runs: what the bootstrap connections say now,
  // without waiting — a peer that closed its connection or left after an
  // error ("rank 0 closed its connection (...)"), or "" if none did. For
  // the message of a set-up step that failed because a peer went away.
  std::string newsOfPeers();
  // The rank that passes reports on to this one (its parent: rank 0 in the
  // star), -1 for rank 0; and whether it said goodbye (left on purpose).
  int parent() const { return parent_; }
  bool parentLeft();
  bool tree() const { return !config_.treePorts.empty(); }

 private:
  Bootstrap() = default;
  Status treeJoin();
  Status admit(const std::vector<int>& ranks, std::chrono::steady_clock::time_point deadline,
               std::vector<std::string>* hosts);
  // To links_[slot]; a failure names its rank.
  Status sendData(size_t slot, std::string_view payload,
                  std::chrono::steady_clock::time_point deadline);
  // From links_[slot].
  Result<std::string> recvData(size_t slot, std::chrono::steady_clock::time_point deadline);
  void monitorMain();
  BootstrapConfig config_;
  int port_ = 0;
  int listenFd_ = -1;
  // The connections: to the parent first (none for rank 0), then to each
  // child in rank order (the star's rank 0: every other rank).
  struct Link {
    int rank = -1;
    int fd = -1;
  };
  std::vector<Link> links_;
  int parent_ = -1;
  std::vector<std::string> hosts_;
  std::string localAddress_;

  // The monitor: it owns all reads once started. Data frames for
  // allGather/barrier wait in `inbox_` by link (as links_).
  std::thread monitor_;
  int wakePipe_[2] = {-1, -1};
  std::function<void(int, const std::string&)> onLost_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::deque<std::string>> inbox_;
  std::vector<bool> gone_;        // connection closed (after goodbye or not)
  std::vector<bool> byeFrom_;     // the peer said goodbye before closing
  std::vector<std::string> why_;  // why each peer is gone (guarded by mu_), empty if unknown
  std::vector<bool> lost_;        // by rank: its loss was reported here (once each)
  bool saidGoodbye_ = false;
  std::mutex sendMu_;  // the monitor forwards notices while callers send data
};

}  // namespace chorus::runtime
