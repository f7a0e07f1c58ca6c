// runGroup over the Communicator interface (api/communicator.h), with
// communicators that record what is asked of them: every communicator of a
// group starts (its ops in order) before any is waited for, a lone one is
// told so, and the first failure is the group's while every part is still
// waited for. Then one group of real thread ranks driven by one thread.
#include "api/communicator.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace chorus::api {
namespace {

struct Log {
  std::vector<std::string> events;
};

class Recording final : public Communicator {
 public:
  Recording(std::string name, Log& log, Status outcome = Status::ok())
      : name_(std::move(name)), log_(log), outcome_(std::move(outcome)) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  bool onGpu() const override { return false; }
  int device() const override { return -1; }
  Status asyncError() const override { return Status::ok(); }
  void abort(Status) override {}
  Status finalize() override { return Status::ok(); }
  std::unique_ptr<Started> start(std::vector<Op> ops, bool alone) override {
    // (Appended, not "start " + name_ + ...: GCC 12's -O3 -Wrestrict false
    // positive on a literal + a temporary string, PR 105651.)
    std::string e = "start ";
    e += name_;
    e += alone ? " alone:" : ":";
    for (const Op& op : ops) {
      e += ' ';
      e += std::to_string(op.args.count);
    }
    log_.events.push_back(e);
    class Waited final : public Started {
     public:
      Waited(std::string name, Log& log, Status s) : name_(std::move(name)), log_(log), s_(s) {}
      Status wait() override {
        log_.events.push_back("wait " + name_);
        return s_;
      }

     private:
      std::string name_;
      Log& log_;
      Status s_;
    };
    return std::make_unique<Waited>(name_, log_, outcome_);
  }
  Result<std::shared_ptr<Communicator>> split(int, int) override {
    return Status(StatusCode::kUnsupported, "no");
  }
  Result<std::shared_ptr<Communicator>> shrink(const std::vector<int>&, bool) override {
    return Status(StatusCode::kUnsupported, "no");
  }

 private:
  std::string name_;
  Log& log_;
  Status outcome_;
};

Op opOf(size_t count) {
  Op op = collectiveOp(CollectiveKind::kAllReduce, nullptr, nullptr, count);
  return op;
}

TEST(RunGroup, StartsEveryCommunicatorBeforeWaitingForAny) {
  Log log;
  auto a = std::make_shared<Recording>("a", log);
  auto b = std::make_shared<Recording>("b", log, Status(StatusCode::kTimeout, "b timed out"));
  auto c = std::make_shared<Recording>("c", log, Status(StatusCode::kAborted, "c aborted"));
  std::vector<std::pair<std::shared_ptr<Communicator>, Op>> ops;
  ops.emplace_back(a, opOf(1));
  ops.emplace_back(b, opOf(2));
  ops.emplace_back(a, opOf(3));
  ops.emplace_back(c, opOf(4));
  Status st = runGroup(std::move(ops));
  EXPECT_EQ(st.code(), StatusCode::kTimeout);
  EXPECT_EQ(st.message(), "b timed out");
  EXPECT_EQ(log.events, (std::vector<std::string>{"start a: 1 3", "start b: 2", "start c: 4",
                                                  "wait a", "wait b", "wait c"}));
}

TEST(RunGroup, ALoneCommunicatorIsToldSo) {
  Log log;
  auto a = std::make_shared<Recording>("a", log);
  std::vector<std::pair<std::shared_ptr<Communicator>, Op>> ops;
  ops.emplace_back(a, opOf(7));
  ops.emplace_back(a, opOf(8));
  EXPECT_TRUE(runGroup(std::move(ops)).isOk());
  EXPECT_EQ(log.events, (std::vector<std::string>{"start a alone: 7 8", "wait a"}));
}

// Four thread ranks of one world, all driven by this thread in one group:
// each rank's allreduce must be started before any is waited for.
TEST(RunGroup, OneThreadDrivesEveryRankOfAWorld) {
  const int n = 4;
  auto world = std::make_shared<InProcessWorld>(n, WorldOptions{});
  std::vector<std::vector<float>> send(n), recv(n);
  std::vector<std::pair<std::shared_ptr<Communicator>, Op>> ops;
  for (int r = 0; r < n; ++r) {
    send[static_cast<size_t>(r)] = {1.0f + r, 10.0f * (r + 1), 100.0f + r};
    recv[static_cast<size_t>(r)].assign(3, -1.0f);
    Op op = collectiveOp(CollectiveKind::kAllReduce, send[static_cast<size_t>(r)].data(),
                         recv[static_cast<size_t>(r)].data(), 3);
    op.args.type = DataType::kFloat32;
    op.args.op = ReduceOp::kSum;
    ops.emplace_back(threadRank(world, r), op);
  }
  ASSERT_TRUE(runGroup(std::move(ops)).isOk());
  for (int r = 0; r < n; ++r)
    EXPECT_EQ(recv[static_cast<size_t>(r)], (std::vector<float>{10.0f, 100.0f, 406.0f}))
        << "rank " << r;
}

}  // namespace
}  // namespace chorus::api
