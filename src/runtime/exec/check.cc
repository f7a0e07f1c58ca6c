#include "runtime/exec/check.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <tuple>
#include <utility>

#include "core/check.h"
#include "core/collectives.h"

namespace chorus::runtime {
namespace {

// Typed element access through doubles (every value used is a small integer).
void store(DataType t, void* base, size_t i, double v) {
  auto* p = static_cast<unsigned char*>(base);
  auto asInt = static_cast<int64_t>(v);
  switch (t) {
    case DataType::kInt8:
      reinterpret_cast<int8_t*>(p)[i] = static_cast<int8_t>(asInt);
      break;
    case DataType::kUint8:
      reinterpret_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(asInt);
      break;
    case DataType::kInt32:
      reinterpret_cast<int32_t*>(p)[i] = static_cast<int32_t>(asInt);
      break;
    case DataType::kUint32:
      reinterpret_cast<uint32_t*>(p)[i] = static_cast<uint32_t>(asInt);
      break;
    case DataType::kInt64:
      reinterpret_cast<int64_t*>(p)[i] = asInt;
      break;
    case DataType::kUint64:
      reinterpret_cast<uint64_t*>(p)[i] = static_cast<uint64_t>(asInt);
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

uint64_t bitsAt(DataType t, const void* base, size_t i) {
  uint64_t out = 0;
  size_t sz = dataTypeSize(t);
  std::memcpy(&out, static_cast<const unsigned char*>(base) + i * sz, sz);
  return out;
}

// Input element e of rank r, when the values of n ranks are combined (1
// for collectives that only move data): small integers, distinct per rank
// and chunk as far as the type allows, chosen so every partial result of a
// reduction over the n ranks, in any order, is exact in type t. A sum stays
// within the type's exact integers (fp16 2048, bf16 256, fp8 16 or 8, fp32
// 2^24), a product within its range (at most that many doublings), and
// 8-bit integers within their range (max and min compare what is stored);
// sums of other integers wrap, exactly. Up to 8 ranks the values do not
// depend on n; past a type's exact range, each element sums ones from at
// most that many ranks.
double inputValue(DataType t, ReduceOp op, int r, size_t e, int n) {
  const auto re = static_cast<size_t>(r) + e;
  const auto ranks = static_cast<size_t>(std::max(n, 1));
  auto atMost = [&](size_t most) {  // every m-th rank, m so that at most `most` are picked
    return std::max<size_t>(2, (ranks + most - 1) / most);
  };
  if (op == ReduceOp::kProd) {
    size_t doublings = 62;
    switch (t) {
      case DataType::kFp8E4M3:
        doublings = 8;
        break;
      case DataType::kFp8E5M2:
      case DataType::kFloat16:
        doublings = 15;
        break;
      case DataType::kInt8:
        doublings = 6;
        break;
      case DataType::kUint8:
        doublings = 7;
        break;
      case DataType::kInt32:
        doublings = 30;
        break;
      case DataType::kUint32:
        doublings = 31;
        break;
      default:
        break;
    }
    const size_t m = atMost(doublings);
    return re % m == m - 1 ? 2.0 : 1.0;
  }
  // Sums within `exact`: 1 + r % p + p * (e % k) summed over n ranks is at
  // most n * p * k; past `exact` ranks, ones from at most `exact` of them.
  auto bounded = [&](size_t exact, size_t k) {
    if (ranks > exact) {
      const size_t m = atMost(exact);
      return re % m == m - 1 ? 1.0 : 0.0;
    }
    const size_t p = std::clamp<size_t>(exact / ranks, 1, 8);
    k = std::clamp<size_t>(exact / (ranks * p), 1, k);
    return 1.0 + static_cast<double>(static_cast<size_t>(r) % p + p * (e % k));
  };
  const bool few = ranks <= 8;
  switch (t) {
    case DataType::kFp8E4M3:
    case DataType::kFp8E5M2: {
      const size_t m = atMost(t == DataType::kFp8E4M3 ? 16 : 8);
      return re % m == m - 1 ? 1.0 : 0.0;
    }
    case DataType::kBfloat16:
      return few ? 1.0 + r + 8.0 * static_cast<double>(e % 3) : bounded(256, 3);
    case DataType::kInt8:
    case DataType::kUint8:  // < 128 either way
      return few ? 1.0 + r + 8.0 * static_cast<double>(e % 13)
                 : 1.0 + static_cast<double>(static_cast<size_t>(r) % 16 + 16 * (e % 7));
    case DataType::kFloat16:
      return few ? 1.0 + r + 8.0 * static_cast<double>(e % 31) : bounded(2048, 31);
    case DataType::kFloat32:
      return ranks <= 1024 ? 1.0 + r + 8.0 * static_cast<double>(e % 97)
                           : bounded(size_t{1} << 24, 97);
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

// What a reduced element holds, in the type's own arithmetic for avg: the
// sum wraps to the integer width and truncates, or divides in float.
void storeReduced(DataType t, ReduceOp op, void* base, size_t i, double v, int n) {
  if (op != ReduceOp::kAvg) return store(t, base, i, v);
  if (!isFloatingPoint(t)) {
    auto wrapped = static_cast<int64_t>(v);
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
  store(t, base, i, static_cast<double>(static_cast<float>(v) / static_cast<float>(n)));
}

}  // namespace

Result<CollectiveData> CollectiveData::make(const VerifiedAlgorithm& va, size_t count,
                                            DataType type, ReduceOp op, bool inplace,
                                            const verify::PostCondition* spec) {
  const ir::Algorithm& a = va.algo();
  if (countsWholeVector(a.collective))
    return build(a.collective, a.ngpus, va.root(), count, type, op, inplace, -1, false);
  if (a.collective != CollectiveKind::kCustom)
    return make(a.collective, a.ngpus, va.root(), count, type, op, inplace);
  if (spec == nullptr)
    return Status(StatusCode::kUnsupported, "no closed-form check for collective '" +
                                                a.collectiveName + "' (give its --spec)");
  const auto chunks = static_cast<size_t>(a.nchunksPerLoop);
  if (spec->inputChunks != a.nchunksPerLoop || spec->outputChunks != a.nchunksPerLoop)
    return Status(StatusCode::kInvalidArgument,
                  "the spec has " + std::to_string(spec->inputChunks) + " input and " +
                      std::to_string(spec->outputChunks) + " output chunks per rank; " +
                      a.collectiveName + " runs on " + std::to_string(chunks) + " both ways");
  auto built = build(a.collective, a.ngpus, -1, count, type, op, inplace, -1, false);
  if (!built.isOk()) return built.status();
  CollectiveData d = std::move(built).value();
  d.chunkElems_ = count / chunks;
  d.expected_.assign(static_cast<size_t>(a.ngpus),
                     std::vector<std::vector<std::pair<int, int>>>(chunks));
  for (const verify::PostCondition::Entry& e : spec->entries) {
    if (e.rank < 0 || e.rank >= a.ngpus || e.chunk < 0 || static_cast<size_t>(e.chunk) >= chunks)
      return Status(StatusCode::kInvalidArgument, "the spec names rank " + std::to_string(e.rank) +
                                                      " output chunk " + std::to_string(e.chunk) +
                                                      ", outside the algorithm");
    for (auto [q, k] : e.holds)
      if (q < 0 || q >= a.ngpus || k < 0 || static_cast<size_t>(k) >= chunks)
        return Status(StatusCode::kInvalidArgument, "the spec names rank " + std::to_string(q) +
                                                        " input chunk " + std::to_string(k) +
                                                        ", outside the algorithm");
    d.expected_[static_cast<size_t>(e.rank)][static_cast<size_t>(e.chunk)] = e.holds;
  }
  return d;
}

Result<CollectiveData> CollectiveData::make(CollectiveKind coll, int nranks, int root, size_t count,
                                            DataType type, ReduceOp op, bool inplace, int onlyRank,
                                            bool mappable) {
  // kSend: the ring of sendrecvs the tests and `chorus soak` post.
  if (traits(coll).source == nullptr && coll != CollectiveKind::kSend)
    return Status(StatusCode::kUnsupported, "no closed-form check for collective '" +
                                                std::string(collectiveName(coll)) + "'");
  return build(coll, nranks, root, count, type, op, inplace, onlyRank, mappable);
}

Result<CollectiveData> CollectiveData::build(CollectiveKind coll, int nranks, int root,
                                             size_t count, DataType type, ReduceOp op, bool inplace,
                                             int onlyRank, bool mappable) {
  CollectiveData d;
  d.collective_ = coll;
  d.nranks_ = nranks;
  d.root_ = root;
  d.count_ = count;
  d.type_ = type;
  d.op_ = op;
  d.inplace_ = inplace;
  auto n = static_cast<size_t>(nranks);
  std::tie(d.inElems_, d.outElems_) = bufferElems(coll, nranks, count);
  size_t esz = dataTypeSize(type), big = std::max(d.inElems_, d.outElems_);
  d.send_.resize(n);
  d.recv_.resize(n);
  d.calls_.resize(n);
  for (size_t r = 0; r < n; ++r) {
    CallArgs& c = d.calls_[r];
    c.count = count;
    c.type = type;
    c.op = op;
    if (onlyRank >= 0 && r != static_cast<size_t>(onlyRank)) continue;
    CHORUS_RETURN_IF_ERROR(d.recv_[r].assign(std::max<size_t>(1, big * esz), mappable));
    unsigned char* rb = d.recv_[r].data();
    if (inplace) {
      // NCCL's in-place conventions: the input is a view of the output
      // (allgather) or the output a view of the input (reducescatter).
      // Gather and scatter: the rank's share is count / n (m = 1).
      size_t share = blockElems(coll, count, nranks);
      bool gathers = traits(coll).inPlace == InPlace::kInputInOutput;
      bool scatters = traits(coll).inPlace == InPlace::kOutputInInput;
      c.sendbuff = rb + (gathers ? r * share : 0) * esz;
      c.recvbuff = rb + (scatters ? r * share : 0) * esz;
    } else {
      CHORUS_RETURN_IF_ERROR(d.send_[r].assign(std::max<size_t>(1, d.inElems_ * esz), mappable));
      c.sendbuff = d.send_[r].data();
      c.recvbuff = rb;
    }
  }
  d.reset();
  return d;
}

void CollectiveData::reset() {
  for (size_t r = 0; r < calls_.size(); ++r) {
    if (recv_[r].empty()) continue;                       // another process's rank
    std::memset(recv_[r].data(), 0xEE, recv_[r].size());  // poison no correct result holds
    // The input buffer is ours (send_ or a view of recv_).
    auto* in = const_cast<unsigned char*>(static_cast<const unsigned char*>(calls_[r].sendbuff));
    for (size_t e = 0; e < inElems_; ++e)
      store(type_, in, e, inputValue(type_, op_, static_cast<int>(r), e, combined()));
  }
}

size_t CollectiveData::countWrong(std::string* first) const {
  const int n = nranks_, mixed = combined();
  std::vector<unsigned char> want(dataTypeSize(type_));
  size_t wrong = 0;
  const CollectiveTraits& t = traits(collective_);
  const size_t block = blockElems(collective_, count_, n);
  CHORUS_CHECK(t.source != nullptr || collective_ == CollectiveKind::kCustom ||
                   collective_ == CollectiveKind::kSend,
               "CollectiveData holds a collective make() refuses");
  for (int r = 0; r < n; ++r) {
    if (t.writes == Ranks::kRoot && r != root_) continue;
    if (recv_[static_cast<size_t>(r)].empty()) continue;  // another process's rank
    const void* out = calls_[static_cast<size_t>(r)].recvbuff;
    for (size_t e = 0; e < outElems_; ++e) {
      if (collective_ == CollectiveKind::kCustom) {
        const auto& holds = expected_[static_cast<size_t>(r)][e / chunkElems_];
        if (holds.empty()) continue;  // unconstrained
        size_t at = e % chunkElems_;
        auto value = [&](std::pair<int, int> c) {
          return inputValue(type_, op_, c.first, static_cast<size_t>(c.second) * chunkElems_ + at,
                            mixed);
        };
        double v = value(holds[0]);
        for (size_t h = 1; h < holds.size(); ++h) v = combine(op_, v, value(holds[h]));
        storeReduced(type_, op_, want.data(), 0, v, n);
      } else if (collective_ == CollectiveKind::kSend) {  // sendrecv: from the previous rank
        store(type_, want.data(), 0, inputValue(type_, op_, (r + n - 1) % n, e, mixed));
      } else {
        const std::optional<Source> from = t.source(n, root_, r, block, e);
        if (!from) continue;  // unconstrained
        double v = inputValue(type_, op_, from->first, from->index, mixed);
        if (t.reduces) {
          for (int q = from->first + 1; q < from->last; ++q)
            v = combine(op_, v, inputValue(type_, op_, q, from->index, mixed));
          storeReduced(type_, op_, want.data(), 0, v, from->last - from->first);
        } else {
          store(type_, want.data(), 0, v);
        }
      }
      uint64_t got = bitsAt(type_, out, e), exp = bitsAt(type_, want.data(), 0);
      if (got == exp) continue;
      if (wrong++ == 0 && first != nullptr) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "rank %d element %zu: got 0x%llx, want 0x%llx", r, e,
                      static_cast<unsigned long long>(got), static_cast<unsigned long long>(exp));
        *first = buf;
      }
    }
  }
  return wrong;
}

}  // namespace chorus::runtime
