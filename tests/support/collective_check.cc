#include "tests/support/collective_check.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/types.h"
#include "tests/support/files.h"
#include "tests/support/reference_ops.h"

namespace chorus::testing {

using runtime::CallArgs;
using runtime::ThreadedOptions;
using runtime::VerifiedAlgorithm;

std::shared_ptr<const VerifiedAlgorithm> load(const std::string& path) {
  auto va = VerifiedAlgorithm::make(mustRead(path));
  EXPECT_TRUE(va.isOk()) << va.status().toString();
  return va.isOk() ? va.value() : nullptr;
}

namespace {

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

}  // namespace

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
  ThreadedOptions threaded;
  threaded.sliceBytes = c.options.sliceBytes;
  threaded.slots = c.options.slots;
  Status st =
      c.threaded ? runThreaded(va, calls, threaded) : runDeterministic(va, calls, c.options);
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
          for (int q = 1; q < n; ++q) v = referenceCombine(c.op, v, inputValue(c.type, c.op, q, e));
          storeReduced(c.type, c.op, want.data(), e, v, n);
          break;
        }
        case CollectiveKind::kReduceScatter: {
          size_t at = static_cast<size_t>(r) * count + e;
          v = inputValue(c.type, c.op, 0, at);
          for (int q = 1; q < n; ++q)
            v = referenceCombine(c.op, v, inputValue(c.type, c.op, q, at));
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

}  // namespace chorus::testing
