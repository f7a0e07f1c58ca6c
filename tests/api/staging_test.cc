// The staging plan of GPU ranks in separate processes (api/staging.h): which
// buffers are copied to the host and back, and where each call's buffers sit
// in them. Pointers here are only compared, never dereferenced.
#include "api/staging.h"

#include <gtest/gtest.h>

namespace chorus::api {
namespace {

unsigned char arena[1 << 16];

Op call(CollectiveKind k, size_t sendAt, size_t recvAt, size_t count, int root = -1) {
  Op op;
  op.kind = Op::Kind::kCollective;
  op.collective = k;
  op.args.sendbuff = arena + sendAt;
  op.args.recvbuff = arena + recvAt;
  op.args.count = count;
  op.args.type = DataType::kFloat32;
  op.root = root;
  return op;
}

void expectRegion(const runtime::StagedRegion& r, size_t at, size_t bytes, bool in, bool out) {
  EXPECT_EQ(r.data, arena + at);
  EXPECT_EQ(r.bytes, bytes);
  EXPECT_EQ(r.in, in);
  EXPECT_EQ(r.out, out);
}

TEST(Staging, OutOfPlaceAllReduceCopiesInputInAndOutputOut) {
  StagingPlan p = planStaging({call(CollectiveKind::kAllReduce, 0, 4096, 100)}, 0, 4);
  ASSERT_EQ(p.regions.size(), 2u);
  expectRegion(p.regions[0], 0, 400, true, false);
  expectRegion(p.regions[1], 4096, 400, false, true);
  EXPECT_EQ(p.where[0].sendRegion, 0);
  EXPECT_EQ(p.where[0].recvRegion, 1);
}

TEST(Staging, InPlaceCallsKeepTheirShape) {
  // Allgather in place at rank 2 of 4: the input is block 2 of the output.
  StagingPlan p = planStaging({call(CollectiveKind::kAllGather, 1000 + 2 * 400, 1000, 100)}, 2, 4);
  ASSERT_EQ(p.regions.size(), 1u);
  expectRegion(p.regions[0], 1000, 1600, true, true);
  EXPECT_EQ(p.where[0].sendRegion, 0);
  EXPECT_EQ(p.where[0].sendOff, 800u);
  EXPECT_EQ(p.where[0].recvOff, 0u);
  // Reduce-scatter in place at rank 1 of 4: the output is block 1 of the input.
  p = planStaging({call(CollectiveKind::kReduceScatter, 0, 400, 100)}, 1, 4);
  ASSERT_EQ(p.regions.size(), 1u);
  expectRegion(p.regions[0], 0, 1600, true, true);
  EXPECT_EQ(p.where[0].recvOff, 400u);
}

TEST(Staging, RootOnlyBuffersMoveOnlyAtTheRoot) {
  // Broadcast from 0: rank 3's input is not read, its output is written.
  StagingPlan p = planStaging({call(CollectiveKind::kBroadcast, 0, 4096, 10, 0)}, 3, 4);
  ASSERT_EQ(p.regions.size(), 2u);
  EXPECT_FALSE(p.regions[0].in);
  EXPECT_TRUE(p.regions[1].out);
  // Reduce to 0: rank 3's output is not written (nothing copied back).
  p = planStaging({call(CollectiveKind::kReduce, 0, 4096, 10, 0)}, 3, 4);
  EXPECT_TRUE(p.regions[0].in);
  EXPECT_FALSE(p.regions[1].out);
  // Gather to 1 (the runtime's count is the whole vector): 4 x 10 floats
  // land at the root; elsewhere the output stays.
  p = planStaging({call(CollectiveKind::kGather, 0, 4096, 40, 1)}, 1, 4);
  expectRegion(p.regions[0], 0, 40, true, false);
  expectRegion(p.regions[1], 4096, 160, false, true);
  p = planStaging({call(CollectiveKind::kGather, 0, 4096, 40, 1)}, 2, 4);
  EXPECT_FALSE(p.regions[1].out);
  // Scatter from 1: only the root's input is read.
  p = planStaging({call(CollectiveKind::kScatter, 0, 4096, 40, 1)}, 0, 4);
  expectRegion(p.regions[0], 0, 160, false, false);
  expectRegion(p.regions[1], 4096, 40, false, true);
}

TEST(Staging, AGroupSharesWhatItsCallsShare) {
  // Reduce x -> y, then broadcast y -> y: one region for y, copied in whole
  // (its bytes come back as they were where nothing writes them) and out.
  StagingPlan p = planStaging({call(CollectiveKind::kReduce, 0, 4096, 100, 0),
                               call(CollectiveKind::kBroadcast, 4096, 4096, 100, 0)},
                              0, 2);
  ASSERT_EQ(p.regions.size(), 2u);
  expectRegion(p.regions[1], 4096, 400, true, true);
  EXPECT_EQ(p.where[0].recvRegion, 1);
  EXPECT_EQ(p.where[1].sendRegion, 1);
  EXPECT_EQ(p.where[1].recvRegion, 1);
  // Two outputs that overlap in part: one region spanning both.
  p = planStaging({call(CollectiveKind::kAllReduce, 0, 8192, 100),
                   call(CollectiveKind::kAllReduce, 1024, 8192 + 200, 100)},
                  0, 2);
  ASSERT_EQ(p.regions.size(), 3u);
  expectRegion(p.regions[2], 8192, 600, true, true);
  EXPECT_EQ(p.where[1].recvOff, 200u);
  // Buffers that only touch stay apart.
  p = planStaging({call(CollectiveKind::kAllReduce, 0, 400, 100)}, 0, 2);
  EXPECT_EQ(p.regions.size(), 2u);
}

TEST(Staging, SendsReceivesAndNullBuffers) {
  Op send;
  send.kind = Op::Kind::kSend;
  send.args.sendbuff = arena;
  send.args.count = 8;
  send.args.type = DataType::kInt64;
  Op recv;
  recv.kind = Op::Kind::kRecv;
  recv.args.recvbuff = arena + 512;
  recv.args.count = 8;
  recv.args.type = DataType::kInt64;
  Op none = call(CollectiveKind::kAllReduce, 0, 0, 0);
  none.args.sendbuff = nullptr;
  none.args.recvbuff = nullptr;
  StagingPlan p = planStaging({send, recv, none}, 0, 2);
  ASSERT_EQ(p.regions.size(), 2u);
  expectRegion(p.regions[0], 0, 64, true, false);
  expectRegion(p.regions[1], 512, 64, false, true);
  EXPECT_EQ(p.where[0].recvRegion, -1);
  EXPECT_EQ(p.where[1].sendRegion, -1);
  EXPECT_EQ(p.where[2].sendRegion, -1);
  EXPECT_EQ(p.where[2].recvRegion, -1);
}

}  // namespace
}  // namespace chorus::api
