// The executor with the deterministic driver: every production algorithm and
// example runs with real data (values distinct per rank and chunk, exact in
// every type), for each call form it allows, with one and with many slice
// iterations, under several seeded orders; bad calls get clear errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/types.h"
#include "ir/xml_reader.h"
#include "runtime/driver.h"
#include "tests/support/files.h"

namespace chorus::runtime {
namespace {

using Order = DeterministicOptions::Order;

std::shared_ptr<const VerifiedAlgorithm> load(const std::string& path) {
  auto va = VerifiedAlgorithm::make(chorus::testing::mustRead(path));
  EXPECT_TRUE(va.isOk()) << va.status().toString();
  return va.isOk() ? va.value() : nullptr;
}

// Typed element access through doubles (every test value is a small integer).
void store(DataType t, void* base, size_t i, double v) {
  auto* p = static_cast<unsigned char*>(base);
  switch (t) {
    case DataType::kInt8:
      reinterpret_cast<int8_t*>(p)[i] = static_cast<int8_t>(static_cast<int64_t>(v));
      break;
    case DataType::kUint8:
      reinterpret_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(static_cast<int64_t>(v));
      break;
    case DataType::kInt32:
      reinterpret_cast<int32_t*>(p)[i] = static_cast<int32_t>(static_cast<int64_t>(v));
      break;
    case DataType::kUint32:
      reinterpret_cast<uint32_t*>(p)[i] = static_cast<uint32_t>(static_cast<int64_t>(v));
      break;
    case DataType::kInt64:
      reinterpret_cast<int64_t*>(p)[i] = static_cast<int64_t>(v);
      break;
    case DataType::kUint64:
      reinterpret_cast<uint64_t*>(p)[i] = static_cast<uint64_t>(static_cast<int64_t>(v));
      break;
    case DataType::kFloat32:
      reinterpret_cast<float*>(p)[i] = static_cast<float>(v);
      break;
    case DataType::kFloat64:
      reinterpret_cast<double*>(p)[i] = v;
      break;
    case DataType::kFloat16:
      reinterpret_cast<uint16_t*>(p)[i] = floatToHalf(static_cast<float>(v));
      break;
    case DataType::kBfloat16:
      reinterpret_cast<uint16_t*>(p)[i] = floatToBfloat16(static_cast<float>(v));
      break;
    case DataType::kFp8E4M3:
      p[i] = floatToFp8E4M3(static_cast<float>(v));
      break;
    case DataType::kFp8E5M2:
      p[i] = floatToFp8E5M2(static_cast<float>(v));
      break;
  }
}

// Bit pattern of element i, for exact comparison.
uint64_t bitsAt(DataType t, const void* base, size_t i) {
  uint64_t out = 0;
  size_t sz = dataTypeSize(t);
  std::memcpy(&out, static_cast<const unsigned char*>(base) + i * sz, sz);
  return out;
}

// Input element e of rank r: small integers, distinct per rank and chunk,
// chosen so every reduction of up to 8 ranks is exact in type t.
double inputValue(DataType t, ReduceOp op, int r, size_t e) {
  if (op == ReduceOp::kProd) return 1.0 + static_cast<double>((r + e) % 2);  // products <= 256
  switch (t) {
    case DataType::kFp8E4M3:
    case DataType::kFp8E5M2:
      return static_cast<double>((static_cast<size_t>(r) + e) % 2);
    case DataType::kBfloat16:
      return 1.0 + r + 8.0 * static_cast<double>(e % 3);
    case DataType::kInt8:
    case DataType::kUint8:  // fits in 7 bits, so max/min agree with the wrapped values
      return 1.0 + r + 8.0 * static_cast<double>(e % 13);
    case DataType::kFloat16:
      return 1.0 + r + 8.0 * static_cast<double>(e % 31);
    default:
      return 1.0 + r + 8.0 * static_cast<double>(e % 97);
  }
}

double combine(ReduceOp op, double a, double b) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return a + b;
    case ReduceOp::kProd:
      return a * b;
    case ReduceOp::kMax:
      return std::max(a, b);
    case ReduceOp::kMin:
      return std::min(a, b);
  }
  return 0;
}

// The value a reduced element must hold, in the type's own arithmetic for avg.
void storeReduced(DataType t, ReduceOp op, void* base, size_t i, double sum, int n) {
  if (op != ReduceOp::kAvg) return store(t, base, i, sum);
  if (!isFloatingPoint(t)) {
    // The sum wraps in the type's width first, then divides (truncating).
    auto wrapped = static_cast<int64_t>(sum);
    switch (t) {
      case DataType::kInt8:
        wrapped = static_cast<int8_t>(wrapped);
        break;
      case DataType::kUint8:
        wrapped = static_cast<uint8_t>(wrapped);
        break;
      case DataType::kInt32:
        wrapped = static_cast<int32_t>(wrapped);
        break;
      case DataType::kUint32:
        wrapped = static_cast<uint32_t>(wrapped);
        break;
      default:
        break;
    }
    return store(t, base, i, static_cast<double>(wrapped / n));
  }
  // Floats divide in float after the (exact) sum.
  store(t, base, i, static_cast<double>(static_cast<float>(sum) / static_cast<float>(n)));
}

struct Case {
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  size_t count = 0;
  bool inplace = false;
  DeterministicOptions options;
};

// Runs `va` for `c` and checks every output element bit for bit.
void runAndCheck(const VerifiedAlgorithm& va, const Case& c) {
  const ir::Algorithm& a = va.algo();
  const int n = a.ngpus;
  const size_t esz = dataTypeSize(c.type), count = c.count;
  const auto nn = static_cast<size_t>(n);
  size_t inElems = count, outElems = count;
  if (a.collective == CollectiveKind::kAllGather) outElems = count * nn;
  if (a.collective == CollectiveKind::kReduceScatter) inElems = count * nn;
  if (a.collective == CollectiveKind::kAllToAll) inElems = outElems = count * nn;
  size_t big = std::max(inElems, outElems);

  std::vector<std::vector<unsigned char>> sendBufs(nn), recvBufs(nn);
  std::vector<CallArgs> calls(nn);
  for (int r = 0; r < n; ++r) {
    auto& sb = sendBufs[static_cast<size_t>(r)];
    auto& rb = recvBufs[static_cast<size_t>(r)];
    rb.assign(big * esz, 0xEE);  // garbage that no correct result contains
    CallArgs& call = calls[static_cast<size_t>(r)];
    call.count = count;
    call.type = c.type;
    call.op = c.op;
    if (c.inplace) {
      size_t at = a.collective == CollectiveKind::kAllGather ? static_cast<size_t>(r) * count : 0;
      for (size_t e = 0; e < inElems; ++e)
        store(c.type, rb.data(), at + e, inputValue(c.type, c.op, r, e));
      call.sendbuff = rb.data() + at * esz;
      call.recvbuff = a.collective == CollectiveKind::kReduceScatter
                          ? rb.data() + static_cast<size_t>(r) * count * esz
                          : rb.data();
    } else {
      sb.assign(inElems * esz, 0);
      for (size_t e = 0; e < inElems; ++e)
        store(c.type, sb.data(), e, inputValue(c.type, c.op, r, e));
      call.sendbuff = sb.data();
      call.recvbuff = rb.data();
    }
  }
  Status st = runDeterministic(va, calls, c.options);
  ASSERT_TRUE(st.isOk()) << st.toString();

  std::vector<unsigned char> want(big * esz);
  for (int r = 0; r < n; ++r) {
    const auto* out = static_cast<const unsigned char*>(calls[static_cast<size_t>(r)].recvbuff);
    for (size_t e = 0; e < (a.collective == CollectiveKind::kAllGather ||
                                    a.collective == CollectiveKind::kAllToAll
                                ? outElems
                                : count);
         ++e) {
      double v = 0;
      switch (a.collective) {
        case CollectiveKind::kAllReduce: {
          v = inputValue(c.type, c.op, 0, e);
          for (int q = 1; q < n; ++q) v = combine(c.op, v, inputValue(c.type, c.op, q, e));
          storeReduced(c.type, c.op, want.data(), e, v, n);
          break;
        }
        case CollectiveKind::kReduceScatter: {
          size_t at = static_cast<size_t>(r) * count + e;
          v = inputValue(c.type, c.op, 0, at);
          for (int q = 1; q < n; ++q) v = combine(c.op, v, inputValue(c.type, c.op, q, at));
          storeReduced(c.type, c.op, want.data(), e, v, n);
          break;
        }
        case CollectiveKind::kAllGather:
          store(c.type, want.data(), e,
                inputValue(c.type, c.op, static_cast<int>(e / count), e % count));
          break;
        case CollectiveKind::kAllToAll:
          store(c.type, want.data(), e,
                inputValue(c.type, c.op, static_cast<int>(e / count),
                           static_cast<size_t>(r) * count + e % count));
          break;
        case CollectiveKind::kBroadcast:
          store(c.type, want.data(), e, inputValue(c.type, c.op, va.root(), e));
          break;
        default:
          FAIL() << "collective not covered by this test";
      }
      ASSERT_EQ(bitsAt(c.type, out, e), bitsAt(c.type, want.data(), e))
          << a.name << " rank " << r << " element " << e << " (" << dataTypeName(c.type) << " "
          << reduceOpName(c.op) << ")";
    }
  }
}

size_t unitCount(const ir::Algorithm& a) {
  // The smallest count whose total splits into nchunksperloop chunks.
  size_t m =
      (a.collective == CollectiveKind::kAllGather ||
       a.collective == CollectiveKind::kReduceScatter || a.collective == CollectiveKind::kAllToAll)
          ? static_cast<size_t>(a.ngpus)
          : 1;
  size_t c = static_cast<size_t>(a.nchunksPerLoop);
  while ((c * m) % static_cast<size_t>(a.nchunksPerLoop) != 0) ++c;
  for (size_t k = 1; k <= c; ++k)
    if ((k * m) % static_cast<size_t>(a.nchunksPerLoop) == 0) return k;
  return c;
}

TEST(Executor, ProductionFilesUnderManyOrdersAndSlices) {
  for (const auto& path : chorus::testing::productionFiles()) {
    SCOPED_TRACE(chorus::testing::baseName(path));
    auto va = load(path);
    ASSERT_TRUE(va);
    size_t unit = unitCount(va->algo());
    const Order orders[] = {Order::kRoundRobin, Order::kReverse, Order::kRandom, Order::kRandom};
    int seed = 0;
    for (Order o : orders) {
      for (size_t sliceBytes : {size_t{4}, size_t{0}}) {  // one element per slice, or the default
        Case c;
        c.count = unit * 3;
        c.inplace = va->algo().inplace;
        c.options.order = o;
        c.options.seed = static_cast<uint64_t>(++seed);
        c.options.sliceBytes = sliceBytes;
        runAndCheck(*va, c);
      }
    }
  }
}

TEST(Executor, EveryTypeAndOpOnReduceAlgorithms) {
  std::vector<std::string> files = {
      std::string(CHORUS_MSCCL_DIR) + "/r48ll.xml", std::string(CHORUS_MSCCL_DIR) + "/ap4ll.xml",
      std::string(CHORUS_SOURCE_DIR) + "/examples/algorithms/ring_allreduce_5_outofplace.xml"};
  for (const auto& path : files) {
    auto va = load(path);
    ASSERT_TRUE(va);
    for (int t = 0; t < kNumDataTypes; ++t) {
      for (int o = 0; o < kNumReduceOps; ++o) {
        Case c;
        c.type = static_cast<DataType>(t);
        c.op = static_cast<ReduceOp>(o);
        c.count = unitCount(va->algo()) * 2;
        c.inplace = va->algo().inplace;
        c.options.order = Order::kRandom;
        c.options.seed = static_cast<uint64_t>(t * 10 + o);
        c.options.sliceBytes = dataTypeSize(c.type);
        SCOPED_TRACE(chorus::testing::baseName(path) + " " + std::string(dataTypeName(c.type)) +
                     " " + std::string(reduceOpName(c.op)));
        runAndCheck(*va, c);
      }
    }
  }
}

TEST(Executor, ExamplesInEveryTypeTheyMove) {
  for (const auto& path : chorus::testing::sourceFiles("examples/algorithms", ".xml")) {
    SCOPED_TRACE(chorus::testing::baseName(path));
    auto va = load(path);
    ASSERT_TRUE(va);
    for (DataType t : {DataType::kInt8, DataType::kUint64, DataType::kFloat16, DataType::kFp8E5M2,
                       DataType::kFloat64}) {
      Case c;
      c.type = t;
      c.count = unitCount(va->algo()) * 5;
      c.inplace = va->algo().inplace;
      c.options.order = Order::kRandom;
      c.options.seed = 42;
      c.options.sliceBytes = 2 * dataTypeSize(t);
      runAndCheck(*va, c);
    }
  }
}

// A 2-rank alltoall where each rank sends two messages before it receives:
// correct (the verifier proves it) and fine with 2 slots per connection, but
// with 1 slot both ranks wait for the other to drain: a deadlock the driver
// must report, naming what each threadblock waits for.
constexpr const char* kSendTwiceFirst =
    R"(<algo name="a2a_send_twice" proto="Simple" nchannels="1" nchunksperloop="4" ngpus="2" coll="alltoall" inplace="0" outofplace="1" minBytes="0" maxBytes="0">
  <gpu id="0" i_chunks="4" o_chunks="4" s_chunks="0">
    <tb id="0" send="1" recv="1" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="2" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="s" srcbuf="i" srcoff="3" dstbuf="o" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="2" type="r" srcbuf="i" srcoff="-1" dstbuf="o" dstoff="2" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="3" type="r" srcbuf="i" srcoff="-1" dstbuf="o" dstoff="3" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
    <tb id="1" send="-1" recv="-1" chan="0">
      <step s="0" type="cpy" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="2" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>
  <gpu id="1" i_chunks="4" o_chunks="4" s_chunks="0">
    <tb id="0" send="0" recv="0" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="o" dstoff="2" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="s" srcbuf="i" srcoff="1" dstbuf="o" dstoff="3" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="2" type="r" srcbuf="i" srcoff="-1" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="3" type="r" srcbuf="i" srcoff="-1" dstbuf="o" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
    <tb id="1" send="-1" recv="-1" chan="0">
      <step s="0" type="cpy" srcbuf="i" srcoff="2" dstbuf="o" dstoff="2" cnt="2" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>
</algo>
)";

TEST(Executor, BoundedSlotsDeadlockIsReported) {
  auto read = ir::readXml(kSendTwiceFirst, "send_twice.xml");
  ASSERT_TRUE(read.algorithm);
  auto va = VerifiedAlgorithm::make(*read.algorithm);
  ASSERT_TRUE(va.isOk()) << va.status().toString();
  Case c;
  c.count = 2;
  c.options.slots = 2;
  runAndCheck(*va.value(), c);  // enough slots: correct

  std::vector<float> in0(4, 1), in1(4, 2), out0(4), out1(4);
  std::vector<CallArgs> calls = {{in0.data(), out0.data(), 2, DataType::kFloat32, ReduceOp::kSum},
                                 {in1.data(), out1.data(), 2, DataType::kFloat32, ReduceOp::kSum}};
  DeterministicOptions one;
  one.slots = 1;
  Status st = runDeterministic(*va.value(), calls, one);
  EXPECT_EQ(st.code(), StatusCode::kDeadlock);
  EXPECT_NE(
      st.message().find(
          "rank 0 tb 0 step 1 (s, iteration 0): waiting for a free slot to rank 1 on channel 0"),
      std::string::npos)
      << st.message();
}

TEST(Executor, BadCallsGetClearErrors) {
  auto va = load(std::string(CHORUS_MSCCL_DIR) + "/ap-1pass.xml");  // 8 ranks, 32 chunks, in place
  ASSERT_TRUE(va);
  std::vector<std::vector<float>> bufs(8, std::vector<float>(64, 1.0f));
  auto inPlace = [&](size_t count) {
    std::vector<CallArgs> calls;
    for (auto& b : bufs)
      calls.push_back({b.data(), b.data(), count, DataType::kFloat32, ReduceOp::kSum});
    return calls;
  };
  auto expectError = [&](std::vector<CallArgs> calls, const char* words) {
    Status st = runDeterministic(*va, calls);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << words;
    EXPECT_NE(st.message().find(words), std::string::npos) << st.message();
  };
  EXPECT_TRUE(runDeterministic(*va, inPlace(64)).isOk());
  expectError(inPlace(33), "does not split into the 32 equal chunks");
  auto fewer = inPlace(64);
  fewer.pop_back();
  expectError(fewer, "is for 8 ranks, the call has 7");
  auto mismatch = inPlace(64);
  mismatch[3].count = 32;
  expectError(mismatch, "rank 3 calls with count 32");
  auto null = inPlace(64);
  null[5].recvbuff = nullptr;
  expectError(null, "rank 5 passes a null buffer");
  std::vector<std::vector<float>> outs(8, std::vector<float>(64));
  auto oop = inPlace(64);
  for (size_t r = 0; r < 8; ++r) oop[r].recvbuff = outs[r].data();
  expectError(oop, "does not serve out-of-place calls");
  auto overlap = inPlace(32);
  for (size_t r = 0; r < 8; ++r) overlap[r].recvbuff = bufs[r].data() + 16;
  expectError(overlap, "overlap");

  auto ag = load(std::string(CHORUS_MSCCL_DIR) + "/ag-1m.xml");
  ASSERT_TRUE(ag);
  std::vector<std::vector<float>> agBufs(8, std::vector<float>(8 * 4));
  std::vector<CallArgs> agCalls;
  for (size_t r = 0; r < 8; ++r)
    agCalls.push_back(
        {agBufs[r].data() + r * 4, agBufs[r].data(), 4, DataType::kFloat32, ReduceOp::kAvg});
  Status st = runDeterministic(*ag, agCalls);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("avg needs a reducing collective"), std::string::npos);
}

TEST(Executor, RefusesWhatTheVerifierRejectsQuotingIt) {
  ir::Algorithm bad = chorus::testing::mustRead(std::string(CHORUS_SOURCE_DIR) +
                                                "/tests/data/bad/e301_swapped_offsets.xml");
  auto va = VerifiedAlgorithm::make(bad);
  ASSERT_FALSE(va.isOk());
  EXPECT_EQ(va.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(va.status().message().find("error[E301]: rank 1"), std::string::npos)
      << va.status().message();
}

}  // namespace
}  // namespace chorus::runtime
