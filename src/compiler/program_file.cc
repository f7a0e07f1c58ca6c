#include "compiler/program_file.h"

#include <charconv>
#include <optional>
#include <string_view>

#include "compiler/compiler.h"

namespace chorus::compiler {

namespace {

// Reading expands the whole algorithm: at 4096 ranks a ring allreduce is
// 33 million steps (several GB). Past that, per-rank lowering is the way.
constexpr int kMostRanks = kMostProgramFileRanks;
constexpr int64_t kMostChunks = int64_t{kMostRanks} * kMostRanks;
// One rank's part is about its share of the chunks (a ring's rank touches
// each chunk): up to 65536 ranks (chorus gen --rank's bound), and as many
// chunks a rank as a 65536-rank ring allreduce, or as many chunks as a
// whole expansion may have (any file that expands whole has parts).
constexpr int kMostPartRanks = 1 << 16;
constexpr int64_t kMostPartChunksPerRank = kMostPartRanks;

// The attributes, as `chorus gen` spells the options.
constexpr std::string_view kAttributes[] = {
    "name",         "ranks",   "instances", "blocked-instances",
    "protocol",     "inplace", "channels",  "gpus-per-node",
    "chunk-factor", "root",    "minBytes",  "maxBytes"};

class Expansion {
 public:
  // `focus` >= 0: that rank's part only (at any rank count).
  Expansion(const ir::ProgramReference& ref, int focus) : ref_(ref), focus_(focus) {}

  ir::ReadResult run() {
    for (const auto& a : ref_.attributes) {
      bool known = false;
      for (std::string_view k : kAttributes) known = known || a.name == k;
      if (!known)
        error(a.pos, "<program> has no attribute '" + a.name +
                         "' (it takes name, ranks, instances, blocked-instances, protocol, "
                         "inplace, channels, gpus-per-node, chunk-factor, root, minBytes, "
                         "maxBytes)");
    }
    const ir::ProgramReference::Attribute* name = find("name");
    if (name == nullptr) error(ref_.pos, "<program> needs name= (a program: chorus gen --list)");
    const lang::ProgramEntry* e = name != nullptr ? lang::findProgram(name->value) : nullptr;
    if (name != nullptr && e == nullptr)
      error(name->pos, "no program named '" + name->value + "' (chorus gen --list)");
    lang::ProgramOptions given;
    if (find("ranks") == nullptr) error(ref_.pos, "<program> needs ranks=");
    given.ranks = number("ranks", 1, focus_ >= 0 ? kMostPartRanks : 1 << 20).value_or(1);
    if (given.ranks > kMostRanks && focus_ < 0)
      error(find("ranks")->pos, "ranks=\"" + std::to_string(given.ranks) +
                                    "\": a program file expands whole up to " +
                                    std::to_string(kMostRanks) +
                                    " ranks (every rank's steps in memory); one rank's part "
                                    "builds at any count: chorus gen NAME --ranks N --rank R");
    given.instances = number("instances", 1, 1 << 10).value_or(1);
    given.blockedInstances = number("blocked-instances", 0, 1).value_or(0) == 1;
    given.inplace = number("inplace", 0, 1).value_or(0) == 1;
    given.channels = number("channels", 1, 1 << 10).value_or(1);
    given.gpusPerNode = number("gpus-per-node", 0, 1 << 20).value_or(0);
    given.chunkFactor = number("chunk-factor", 1, 1 << 20).value_or(1);
    given.root = number("root", 0, 1 << 20).value_or(0);
    if (const auto* p = find("protocol")) {
      if (p->value != "Simple" && p->value != "LL" && p->value != "LL128")
        error(p->pos, "protocol '" + p->value + "' is not Simple, LL or LL128");
      given.protocol = p->value;
    }
    const uint64_t minBytes = number("minBytes", 0, INT64_MAX).value_or(0);
    const uint64_t maxBytes = number("maxBytes", 0, INT64_MAX).value_or(0);
    ir::ReadResult out;
    if (diags_.hasErrors() || e == nullptr) {
      out.diagnostics = std::move(diags_);
      return out;
    }
    lang::ProgramOptions o;
    std::string problem;
    if (!lang::programOptions(*e, given, &o, &problem)) {
      error(ref_.pos, "program '" + e->name + "': " + problem);
      out.diagnostics = std::move(diags_);
      return out;
    }
    if (focus_ >= o.ranks) {
      error(ref_.pos, "rank " + std::to_string(focus_) + " is not a rank of this " +
                          std::to_string(o.ranks) + "-rank program");
      out.diagnostics = std::move(diags_);
      return out;
    }
    // The whole algorithm is every rank's chunks' steps: bound them before
    // building (a file of 60 bytes must not ask for billions of steps; a
    // rank's part of a ring touches every chunk too).
    const int64_t chunks = int64_t{o.ranks} * o.chunkFactor * o.instances;
    if (focus_ >= 0 && chunks > std::max(kMostChunks, kMostPartChunksPerRank * o.ranks)) {
      error(ref_.pos, "program '" + e->name + "' with these options has " +
                          std::to_string(chunks / o.ranks) + " chunks a rank (chunk factor x " +
                          "instances); a rank's part builds up to " +
                          std::to_string(kMostPartChunksPerRank));
      out.diagnostics = std::move(diags_);
      return out;
    }
    if (focus_ < 0 && chunks > kMostChunks) {
      error(ref_.pos, "program '" + e->name + "' with these options expands to " +
                          std::to_string(chunks) + " chunks (ranks x chunk factor x instances); " +
                          "a program file expands whole up to " + std::to_string(kMostChunks) +
                          " (a 4096-rank ring allreduce)");
      out.diagnostics = std::move(diags_);
      return out;
    }
    // Every registered program has a per-rank form: the whole algorithm is
    // assembled from the ranks' parts (the same steps, in a fraction of the
    // memory, on every core).
    Compiled c;
    if (focus_ >= 0) {
      lang::ProgramOptions mine = o;
      mine.focus = focus_;
      c = compileRank(*e, mine);
      if (c.ok()) c.algo.ranks = allRanks(std::move(c.algo.ranks.front()), o.ranks);
      out.part = focus_;
    } else if (e->buildRank) {
      c = compileByRanks(*e, o);
    } else {
      lang::Program p(o);
      e->build(p);
      c = compile(std::move(p));
    }
    for (Diagnostic& d : c.diagnostics.items()) diags_.items().push_back(std::move(d));
    if (!c.ok()) {
      error(ref_.pos, "program '" + e->name + "' does not compile with these options");
    } else {
      c.algo.minBytes = minBytes;
      c.algo.maxBytes = maxBytes;
      out.root = isRooted(c.algo.collective) ? o.root : -1;
      // Sites are this file's element (the steps are the compiler's, not lines of it).
      c.algo.sourceFile = ref_.file;
      c.algo.pos = ref_.pos;
      for (ir::Rank& r : c.algo.ranks) {
        r.pos = ref_.pos;
        for (ir::Threadblock& tb : r.tbs) {
          tb.pos = ref_.pos;
          for (ir::Step& st : tb.steps) st.pos = ref_.pos;
        }
      }
      out.algorithm = std::move(c.algo);
    }
    out.diagnostics = std::move(diags_);
    return out;
  }

 private:
  // Rank `mine`'s part among `n` ranks: the others keep their ids and chunk
  // counts (a program's are every rank's), without threadblocks or scratch.
  static std::vector<ir::Rank> allRanks(ir::Rank mine, int n) {
    std::vector<ir::Rank> ranks(static_cast<size_t>(n));
    for (int q = 0; q < n; ++q) {
      ir::Rank& r = ranks[static_cast<size_t>(q)];
      r.id = q;
      r.inputChunks = mine.inputChunks;
      r.outputChunks = mine.outputChunks;
    }
    const int id = mine.id;
    ranks[static_cast<size_t>(id)] = std::move(mine);
    return ranks;
  }
  const ir::ProgramReference::Attribute* find(std::string_view name) const {
    for (const auto& a : ref_.attributes)
      if (a.name == name) return &a;
    return nullptr;
  }
  template <typename T = int64_t>
  std::optional<T> number(std::string_view name, int64_t lo, int64_t hi) {
    const auto* a = find(name);
    if (a == nullptr) return std::nullopt;
    int64_t v = 0;
    auto [end, ec] = std::from_chars(a->value.data(), a->value.data() + a->value.size(), v);
    if (ec != std::errc() || end != a->value.data() + a->value.size() || v < lo || v > hi) {
      error(a->pos, std::string(name) + "=\"" + a->value + "\" is not a whole number in " +
                        std::to_string(lo) + ".." + std::to_string(hi));
      return std::nullopt;
    }
    return static_cast<T>(v);
  }
  void error(ir::SourcePos p, std::string msg) {
    Location l;
    l.file = ref_.file;
    l.line = p.line;
    l.column = p.column;
    diags_.add(DiagCode::kBadStructure, l, std::move(msg));
  }

  const ir::ProgramReference& ref_;
  const int focus_;
  DiagnosticList diags_;
};

}  // namespace

ir::ReadResult expandProgramFile(const ir::ProgramReference& ref) {
  return Expansion(ref, -1).run();
}

ir::ReadResult expandProgramPart(const ir::ProgramReference& ref, int rank) {
  return Expansion(ref, rank).run();
}

const ir::ProgramFiles& programFiles() {
  static const ir::ProgramFiles files{&expandProgramFile, &expandProgramPart};
  return files;
}

ir::ReadOptions readOptions(int focus) {
  ir::ReadOptions o;
  o.focus = focus;
  o.programs = &programFiles();
  return o;
}

std::string writeProgramFile(const lang::ProgramEntry& entry, const lang::ProgramOptions& given,
                             uint64_t minBytes, uint64_t maxBytes) {
  std::string s =
      "<program name=\"" + entry.name + "\" ranks=\"" + std::to_string(given.ranks) + "\"";
  auto put = [&s](const char* name, int64_t v, int64_t unset) {
    if (v != unset) s += std::string(" ") + name + "=\"" + std::to_string(v) + "\"";
  };
  put("instances", given.instances, 1);
  put("blocked-instances", given.blockedInstances ? 1 : 0, 0);
  if (given.protocol != "Simple") s += " protocol=\"" + given.protocol + "\"";
  put("inplace", given.inplace ? 1 : 0, 0);
  put("channels", given.channels, 1);
  put("gpus-per-node", given.gpusPerNode, 0);
  put("chunk-factor", given.chunkFactor, 1);
  put("root", given.root, 0);
  put("minBytes", static_cast<int64_t>(minBytes), 0);
  put("maxBytes", static_cast<int64_t>(maxBytes), 0);
  return s + "/>\n";
}

}  // namespace chorus::compiler
