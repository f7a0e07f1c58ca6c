#include "core/collectives.h"

#include <array>

namespace chorus {
namespace {

using Src = std::optional<Source>;

Src one(int rank, size_t index) { return Source{rank, rank + 1, index}; }
Src all(int n, size_t index) { return Source{0, n, index}; }
int blockOf(size_t k, size_t block) { return static_cast<int>(k / block); }

constexpr double ringFactor(int n) { return (n - 1.0) / n; }
constexpr double one1(int) { return 1; }

constexpr auto kAll = Ranks::kAll, kRoot = Ranks::kRoot;
constexpr auto kCount = Extent::kCount, kTimesN = Extent::kCountTimesN,
               kOverN = Extent::kCountOverN;

// In CollectiveKind order.
constexpr std::array<CollectiveTraits, 11> kTable = {{
    {CollectiveKind::kAllReduce, "allreduce", false, true, true, kCount, kCount, InPlace::kSame,
     kAll, kAll, [](int n, int, int, size_t, size_t k) { return all(n, k); },
     [](int n) { return 2.0 * (n - 1) / n; }},
    {CollectiveKind::kAllGather, "allgather", false, false, true, kCount, kTimesN,
     InPlace::kInputInOutput, kAll, kAll,
     [](int, int, int, size_t c, size_t k) { return one(blockOf(k, c), k % c); }, ringFactor},
    {CollectiveKind::kReduceScatter, "reducescatter", false, true, true, kTimesN, kCount,
     InPlace::kOutputInInput, kAll, kAll,
     [](int n, int, int r, size_t c, size_t k) { return all(n, static_cast<size_t>(r) * c + k); },
     ringFactor},
    {CollectiveKind::kAllToAll, "alltoall", false, false, true, kTimesN, kTimesN, InPlace::kSame,
     kAll, kAll,
     [](int, int, int r, size_t c, size_t k) {
       return one(blockOf(k, c), static_cast<size_t>(r) * c + k % c);
     },
     ringFactor},
    {CollectiveKind::kBroadcast, "broadcast", true, false, true, kCount, kCount, InPlace::kSame,
     kRoot, kAll, [](int, int root, int, size_t, size_t k) { return one(root, k); }, one1},
    {CollectiveKind::kReduce, "reduce", true, true, true, kCount, kCount, InPlace::kSame, kAll,
     kRoot,
     [](int n, int root, int r, size_t, size_t k) { return r == root ? all(n, k) : std::nullopt; },
     one1},
    {CollectiveKind::kSend, "send", false, false, false, kCount, kCount, InPlace::kSame, kAll, kAll,
     nullptr, one1},
    {CollectiveKind::kRecv, "recv", false, false, false, kCount, kCount, InPlace::kSame, kAll, kAll,
     nullptr, one1},
    // nccl-tests' gather_perf and scatter_perf count (n - 1) / n as well.
    {CollectiveKind::kGather, "gather", true, false, false, kOverN, kCount, InPlace::kInputInOutput,
     kAll, kRoot,
     [](int, int root, int r, size_t c, size_t k) {
       return r == root ? one(blockOf(k, c), k % c) : std::nullopt;
     },
     ringFactor},
    {CollectiveKind::kScatter, "scatter", true, false, false, kCount, kOverN,
     InPlace::kOutputInInput, kRoot, kAll,
     [](int, int root, int r, size_t c,
        size_t k) { return one(root, static_cast<size_t>(r) * c + k); },
     ringFactor},
    {CollectiveKind::kAllToAllv, "alltoallv", false, false, false, kCount, kCount, InPlace::kSame,
     kAll, kAll, nullptr, one1},
}};

constexpr bool inEnumOrder() {
  for (size_t i = 0; i < kTable.size(); ++i)
    if (static_cast<size_t>(kTable[i].kind) != i) return false;
  return kTable.size() == static_cast<size_t>(CollectiveKind::kCustom);
}
static_assert(inEnumOrder(), "kTable: one row per CollectiveKind, in enum order");

constexpr CollectiveTraits kCustomRow = {
    CollectiveKind::kCustom, "custom", false, false,   false, kCount, kCount,
    InPlace::kSame,          kAll,     kAll,  nullptr, one1};

}  // namespace

std::span<const CollectiveTraits> collectiveTable() { return kTable; }

const CollectiveTraits& traits(CollectiveKind k) {
  const auto i = static_cast<size_t>(k);
  return i < kTable.size() ? kTable[i] : kCustomRow;
}

size_t extentElems(Extent extent, size_t count, int n) {
  switch (extent) {
    case Extent::kCount:
      return count;
    case Extent::kCountTimesN:
      return count * static_cast<size_t>(n);
    case Extent::kCountOverN:
      return count / static_cast<size_t>(n);
  }
  return count;
}

size_t blockElems(CollectiveKind k, size_t count, int n) {
  return countsWholeVector(k) ? count / static_cast<size_t>(n) : count;
}

size_t countMultiplier(CollectiveKind k, int n) {
  const CollectiveTraits& t = traits(k);
  return t.input == Extent::kCountTimesN || t.output == Extent::kCountTimesN
             ? static_cast<size_t>(n)
             : 1;
}

std::string_view collectiveName(CollectiveKind k) { return traits(k).name; }

CollectiveKind parseCollective(std::string_view name) {
  if (name == "reduce_scatter") return CollectiveKind::kReduceScatter;
  for (const CollectiveTraits& t : kTable)
    if (t.name == name) return t.kind;
  return CollectiveKind::kCustom;
}

bool countsWholeVector(CollectiveKind k) {
  const CollectiveTraits& t = traits(k);
  return t.input == Extent::kCountOverN || t.output == Extent::kCountOverN;
}

bool isRooted(CollectiveKind k) { return traits(k).rooted; }

double busBandwidthFactor(CollectiveKind k, int n) { return traits(k).busFactor(n); }

bool isNcclCollective(CollectiveKind k) { return traits(k).ncclSignature; }

}  // namespace chorus
