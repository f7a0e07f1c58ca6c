#include "ir/mscclpp_plan.h"

#include <array>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>
#include <utility>

#include "ir/json_parse.h"
#include "ir/xml_reader.h"

namespace chorus::ir::mscclpp {

using json = nlohmann::json;
using ordered = nlohmann::ordered_json;

namespace {

constexpr std::array<std::pair<OpType, const char*>, 29> kOpNames = {{
    {OpType::kNop, "nop"},
    {OpType::kBarrier, "barrier"},
    {OpType::kPut, "put"},
    {OpType::kPutWithSignal, "pws"},
    {OpType::kPutWithSignalAndFlush, "pwsf"},
    {OpType::kGet, "get"},
    {OpType::kCopy, "copy"},
    {OpType::kSignal, "signal"},
    {OpType::kWait, "wait"},
    {OpType::kFlush, "flush"},
    {OpType::kReduce, "re"},
    {OpType::kReduceSend, "res"},
    {OpType::kReadReduce, "rre"},
    {OpType::kReadReduceSend, "rres"},
    {OpType::kPutPackets, "ppkt"},
    {OpType::kReadPutPackets, "rppkt"},
    {OpType::kReduceSendPackets, "respkt"},
    {OpType::kCopyPackets, "cpkt"},
    {OpType::kUnpackPackets, "upkt"},
    {OpType::kReducePackets, "repkt"},
    {OpType::kReduceCopyPackets, "recpkt"},
    {OpType::kReduceCopySendPackets, "recspkt"},
    {OpType::kMultiLoadReduceStore, "glres"},
    {OpType::kMultiStore, "gstore"},
    {OpType::kRelaxedSignal, "rlxsignal"},
    {OpType::kRelaxedWait, "rlxwait"},
    {OpType::kPipeline, "pipeline"},
    {OpType::kSemAcquire, "sem_acquire"},
    {OpType::kSemRelease, "sem_release"},
}};

// Reads one plan, collecting every error with its JSON path.
class Reader {
 public:
  explicit Reader(std::string file) : file_(std::move(file)) {}
  DiagnosticList take() { return std::move(diags_); }

  void plan(const json& j, Plan& p) {
    if (!object(j, "")) return;
    std::set<std::string> seen;
    str(j, "", "name", p.name, seen, true);
    str(j, "", "collective", p.collective, seen, true);
    str(j, "", "protocol", p.protocol, seen, true);
    boolean(j, "", "inplace", &p.inplace, seen, true);
    optBool(j, "", "reuse_resources", p.reuseResources, seen);
    optBool(j, "", "use_double_scratch_buffer", p.useDoubleScratchBuffer, seen);
    optUint(j, "", "buffer_alignment", p.bufferAlignment, seen,
            std::numeric_limits<uint32_t>::max());
    optUint(j, "", "min_message_size", p.minMessageSize, seen,
            std::numeric_limits<uint64_t>::max());
    optUint(j, "", "max_message_size", p.maxMessageSize, seen,
            std::numeric_limits<uint64_t>::max());
    std::optional<uint64_t> threads;
    optUint(j, "", "num_threads_per_block", threads, seen, 1u << 20);
    if (threads) p.numThreadsPerBlock = static_cast<int>(*threads);
    if (p.bufferAlignment && *p.bufferAlignment == 0)
      error("buffer_alignment", "must be positive (every size is counted in its units)");
    eachOf(j, "", "gpus", seen, true, [&](const json& e, const std::string& at) {
      p.gpus.emplace_back();
      gpu(e, at, p.gpus.back());
    });
    p.extraJson = extra(j, "", seen);
  }

 private:
  void gpu(const json& j, const std::string& at, Gpu& g) {
    if (!object(j, at)) return;
    std::set<std::string> seen;
    integer(j, at, "id", &g.id, seen, true);
    uint32(j, at, "input_chunks", &g.inputChunks, seen);
    uint32(j, at, "output_chunks", &g.outputChunks, seen);
    uint32(j, at, "scratch_chunks", &g.scratchChunks, seen);
    eachOf(j, at, "threadblocks", seen, true, [&](const json& e, const std::string& in) {
      g.threadblocks.emplace_back();
      threadblock(e, in, g.threadblocks.back());
    });
    eachOf(j, at, "channels", seen, true, [&](const json& e, const std::string& in) {
      g.channels.emplace_back();
      channel(e, in, g.channels.back());
    });
    eachOf(j, at, "remote_buffers", seen, true, [&](const json& e, const std::string& in) {
      g.remoteBuffers.emplace_back();
      remoteBuffer(e, in, g.remoteBuffers.back());
    });
    if (j.contains("semaphores")) {
      g.semaphores.emplace();
      eachOf(j, at, "semaphores", seen, true, [&](const json& e, const std::string& in) {
        int init = 0;
        if (object(e, in)) {
          std::set<std::string> s2;
          integer(e, in, "init_value", &init, s2, true);
          (void)extra(e, in, s2);  // (nothing else is read)
        }
        g.semaphores->push_back(init);
      });
    }
    g.extraJson = extra(j, at, seen);
  }

  void threadblock(const json& j, const std::string& at, Threadblock& t) {
    if (!object(j, at)) return;
    std::set<std::string> seen;
    integer(j, at, "id", &t.id, seen, true);
    eachOf(j, at, "ops", seen, true, [&](const json& e, const std::string& in) {
      t.ops.emplace_back();
      op(e, in, t.ops.back(), true);
    });
    eachOf(j, at, "channels", seen, true, [&](const json& e, const std::string& in) {
      if (!object(e, in)) return;
      TbChannels c;
      std::set<std::string> s2;
      channelType(e, in, "channel_type", &c.type, s2, true);
      ints(e, in, "channel_ids", c.ids, s2, true);
      if (e.contains("buff")) {
        s2.insert("buff");
        c.buff = e["buff"].dump();
      }
      c.extraJson = extra(e, in, s2);
      t.channels.push_back(std::move(c));
    });
    if (j.contains("remote_buffer_refs")) {
      t.remoteRefs.emplace();
      eachOf(j, at, "remote_buffer_refs", seen, true, [&](const json& e, const std::string& in) {
        if (!object(e, in)) return;
        TbRemoteRefs r;
        std::set<std::string> s2;
        channelType(e, in, "access_channel_type", &r.type, s2, true);
        ints(e, in, "remote_buffer_ids", r.ids, s2, true);
        r.extraJson = extra(e, in, s2);
        t.remoteRefs->push_back(std::move(r));
      });
    }
    t.extraJson = extra(j, at, seen);
  }

  void op(const json& j, const std::string& at, Op& o, bool topLevel) {
    if (!object(j, at)) return;
    std::set<std::string> seen;
    std::string name;
    str(j, at, "name", name, seen, true);
    if (auto t = opTypeFromName(name)) {
      o.type = *t;
    } else if (j.contains("name") && j["name"].is_string()) {
      error(at + ".name", "'" + name + "' is not an operation MSCCL++'s executor reads");
    }
    if (j.contains("channel_type")) {
      ChannelType c = ChannelType::kNone;
      channelType(j, at, "channel_type", &c, seen, true);
      o.channelType = c;
    }
    if (j.contains("channel_ids")) {
      o.channelIds.emplace();
      ints(j, at, "channel_ids", *o.channelIds, seen, true);
    }
    for (const char* key : {"src_buff", "dst_buff"}) {
      if (!j.contains(key)) continue;
      auto& refs = std::string(key) == "src_buff" ? o.src : o.dst;
      refs.emplace();
      eachOf(j, at, key, seen, true, [&](const json& e, const std::string& in) {
        refs->emplace_back();
        bufferRef(e, in, refs->back());
      });
    }
    if (j.contains("tbg_info")) {
      seen.insert("tbg_info");
      const json& t = j["tbg_info"];
      const std::string in = at + ".tbg_info";
      if (object(t, in)) {
        Op::Tbg g;
        std::set<std::string> s2;
        integer(t, in, "tb_id", &g.tbId, s2, true);
        integer(t, in, "tbg_size", &g.tbgSize, s2, true);
        if (g.tbgSize < 1 || g.tbId < 0 || g.tbId >= g.tbgSize)
          error(in, "tb_id " + std::to_string(g.tbId) + " is not in [0, tbg_size " +
                        std::to_string(g.tbgSize) + ")");
        (void)extra(t, in, s2);
        o.tbg = g;
      }
    }
    if (j.contains("barrier_id")) {
      int v = 0;
      integer(j, at, "barrier_id", &v, seen, true);
      o.barrierId = v;
    }
    if (j.contains("num_threadblocks")) {
      int v = 0;
      integer(j, at, "num_threadblocks", &v, seen, true);
      o.numThreadblocks = v;
    }
    if (j.contains("semaphore_ids")) {
      o.semaphoreIds.emplace();
      ints(j, at, "semaphore_ids", *o.semaphoreIds, seen, true);
    }
    if (j.contains("iter_context")) {
      seen.insert("iter_context");
      const json& t = j["iter_context"];
      const std::string in = at + ".iter_context";
      if (object(t, in)) {
        Op::IterContext c;
        std::set<std::string> s2;
        std::optional<uint64_t> unit, chunks;
        optUint(t, in, "unit_size", unit, s2, std::numeric_limits<uint64_t>::max());
        optUint(t, in, "num_chunks", chunks, s2, std::numeric_limits<uint32_t>::max());
        if (!unit || !chunks) error(in, "needs unit_size and num_chunks");
        c.unitSize = unit.value_or(0);
        c.numChunks = static_cast<uint32_t>(chunks.value_or(0));
        if (unit && *unit == 0) error(in + ".unit_size", "must be positive");
        (void)extra(t, in, s2);
        o.iterContext = c;
      }
    }
    if (j.contains("ops")) {
      o.hasOps = true;
      eachOf(j, at, "ops", seen, true, [&](const json& e, const std::string& in) {
        o.ops.emplace_back();
        op(e, in, o.ops.back(), false);
        if (o.ops.back().type == OpType::kPipeline)
          error(in, "a pipeline inside a pipeline (MSCCL++ flattens one level)");
      });
    }
    if (j.contains("reduce_op")) {
      std::string r;
      str(j, at, "reduce_op", r, seen, true);
      o.reduceOp = r;
    }
    if (o.type == OpType::kPipeline && (!o.iterContext || !o.hasOps))
      error(at, "a pipeline needs iter_context and ops");
    if (o.type != OpType::kPipeline && (o.iterContext || o.hasOps))
      error(at, "only a pipeline has iter_context and ops");
    (void)topLevel;
    o.extraJson = extra(j, at, seen);
  }

  void bufferRef(const json& j, const std::string& at, BufferRef& b) {
    if (!object(j, at)) return;
    std::set<std::string> seen;
    uint32(j, at, "index", &b.index, seen);
    uint32(j, at, "size", &b.size, seen);
    int kinds = 0;
    if (j.contains("type")) {
      ++kinds;
      b.kind = BufferRef::Kind::kLocal;
      bufferType(j, at, "type", &b.type, seen);
    }
    if (j.contains("buffer_id")) {
      ++kinds;
      b.kind = BufferRef::Kind::kRemote;
      integer(j, at, "buffer_id", &b.id, seen, true);
    }
    if (j.contains("switch_channel_id")) {
      ++kinds;
      b.kind = BufferRef::Kind::kSwitch;
      integer(j, at, "switch_channel_id", &b.id, seen, true);
    }
    if (kinds != 1)
      error(at, "needs exactly one of type, buffer_id and switch_channel_id (it has " +
                    std::to_string(kinds) + ")");
    b.extraJson = extra(j, at, seen);
  }

  void channel(const json& j, const std::string& at, Channel& c) {
    if (!object(j, at)) return;
    std::set<std::string> seen;
    channelType(j, at, "channel_type", &c.type, seen, true);
    if (c.type == ChannelType::kSwitch) {
      bufferType(j, at, "buffer_type", &c.bufferType, seen);
      eachOf(j, at, "rank_groups", seen, true, [&](const json& e, const std::string& in) {
        if (!object(e, in)) return;
        RankGroup g;
        std::set<std::string> s2;
        integer(e, in, "size", &g.size, s2, true);
        ints(e, in, "ranks", g.ranks, s2, true);
        (void)extra(e, in, s2);
        c.rankGroups.push_back(std::move(g));
      });
    } else {
      ints(j, at, "connected_to", c.connectedTo, seen, true);
    }
    c.extraJson = extra(j, at, seen);
  }

  void remoteBuffer(const json& j, const std::string& at, RemoteBuffer& r) {
    if (!object(j, at)) return;
    std::set<std::string> seen;
    integer(j, at, "rank", &r.rank, seen, true);
    bufferType(j, at, "type", &r.type, seen);
    eachOf(j, at, "access_channel_types", seen, true, [&](const json& e, const std::string& in) {
      ChannelType t = ChannelType::kNone;
      if (!e.is_string() || !channelTypeOf(e.get<std::string>(), &t) ||
          (t != ChannelType::kMemory && t != ChannelType::kPort))
        error(in, "is not \"memory\" or \"port\"");
      r.access.push_back(t);
    });
    r.extraJson = extra(j, at, seen);
  }

  // --- fields ---
  static std::string path(const std::string& at, const std::string& key) {
    return at.empty() ? key : at + "." + key;
  }
  void error(const std::string& where, const std::string& what) {
    Location l;
    l.file = file_;
    diags_.add(DiagCode::kPlanFormat, l, (where.empty() ? "" : where + ": ") + what);
  }
  bool object(const json& j, const std::string& at) {
    if (j.is_object()) return true;
    error(at.empty() ? "the document" : at, "is not a JSON object");
    return false;
  }
  const json* field(const json& j, const std::string& at, const char* key,
                    std::set<std::string>& seen, bool required) {
    seen.insert(key);
    if (!j.contains(key)) {
      if (required) error(at.empty() ? "the plan" : at, std::string("has no \"") + key + "\"");
      return nullptr;
    }
    return &j[key];
  }
  void str(const json& j, const std::string& at, const char* key, std::string& out,
           std::set<std::string>& seen, bool required) {
    const json* v = field(j, at, key, seen, required);
    if (v == nullptr) return;
    if (!v->is_string()) return error(path(at, key), "is not a string");
    out = v->get<std::string>();
  }
  void boolean(const json& j, const std::string& at, const char* key, bool* out,
               std::set<std::string>& seen, bool required) {
    const json* v = field(j, at, key, seen, required);
    if (v == nullptr) return;
    if (!v->is_boolean()) return error(path(at, key), "is not true or false");
    *out = v->get<bool>();
  }
  void optBool(const json& j, const std::string& at, const char* key, std::optional<bool>& out,
               std::set<std::string>& seen) {
    if (!j.contains(key)) return seen.insert(key), void();
    bool b = false;
    boolean(j, at, key, &b, seen, true);
    out = b;
  }
  template <class T>
  void optUint(const json& j, const std::string& at, const char* key, std::optional<T>& out,
               std::set<std::string>& seen, uint64_t most) {
    const json* v = field(j, at, key, seen, false);
    if (v == nullptr) return;
    // (max_message_size is 2^64 - 1 in most plans: unsigned 64-bit.)
    if (!v->is_number_unsigned() && !(v->is_number_integer() && v->get<int64_t>() >= 0))
      return error(path(at, key), "is not a non-negative integer");
    auto u = v->get<uint64_t>();
    if (u > most) return error(path(at, key), std::to_string(u) + " is too large");
    out = static_cast<T>(u);
  }
  void uint32(const json& j, const std::string& at, const char* key, uint32_t* out,
              std::set<std::string>& seen) {
    std::optional<uint32_t> v;
    if (!j.contains(key)) {
      seen.insert(key);
      return error(at, std::string("has no \"") + key + "\"");
    }
    optUint(j, at, key, v, seen, std::numeric_limits<uint32_t>::max());
    if (v) *out = *v;
  }
  void integer(const json& j, const std::string& at, const char* key, int* out,
               std::set<std::string>& seen, bool required) {
    const json* v = field(j, at, key, seen, required);
    if (v == nullptr) return;
    if (!v->is_number_integer() || v->get<int64_t>() < std::numeric_limits<int>::min() ||
        v->get<int64_t>() > std::numeric_limits<int>::max() ||
        (v->is_number_unsigned() && v->get<uint64_t>() > std::numeric_limits<int>::max()))
      return error(path(at, key), "is not an integer");
    *out = static_cast<int>(v->get<int64_t>());
  }
  void ints(const json& j, const std::string& at, const char* key, std::vector<int>& out,
            std::set<std::string>& seen, bool required) {
    eachOf(j, at, key, seen, required, [&](const json& e, const std::string& in) {
      if (!e.is_number_integer() || e.get<int64_t>() < 0 ||
          e.get<int64_t>() > std::numeric_limits<int>::max() ||
          (e.is_number_unsigned() && e.get<uint64_t>() > std::numeric_limits<int>::max()))
        return error(in, "is not a non-negative integer");
      out.push_back(static_cast<int>(e.get<int64_t>()));
    });
  }
  static bool channelTypeOf(const std::string& s, ChannelType* t) {
    for (ChannelType c :
         {ChannelType::kNone, ChannelType::kMemory, ChannelType::kPort, ChannelType::kSwitch})
      if (s == channelTypeName(c)) return *t = c, true;
    return false;
  }
  void channelType(const json& j, const std::string& at, const char* key, ChannelType* out,
                   std::set<std::string>& seen, bool required) {
    std::string s;
    str(j, at, key, s, seen, required);
    if (j.contains(key) && j[key].is_string() && !channelTypeOf(s, out))
      error(path(at, key), "'" + s + "' is not memory, port, switch or none");
  }
  void bufferType(const json& j, const std::string& at, const char* key, BufferType* out,
                  std::set<std::string>& seen) {
    std::string s;
    str(j, at, key, s, seen, true);
    if (!j.contains(key) || !j[key].is_string()) return;
    if (s == "i")
      *out = BufferType::kInput;
    else if (s == "o")
      *out = BufferType::kOutput;
    else if (s == "s")
      *out = BufferType::kScratch;
    else
      error(path(at, key), "'" + s + "' is not i, o or s");
  }
  void eachOf(const json& j, const std::string& at, const char* key, std::set<std::string>& seen,
              bool required, const std::function<void(const json&, const std::string&)>& f) {
    const json* v = field(j, at, key, seen, required);
    if (v == nullptr) return;
    const std::string in = path(at, key);
    if (!v->is_array()) return error(in, "is not an array");
    for (size_t i = 0; i < v->size(); ++i) f((*v)[i], in + "[" + std::to_string(i) + "]");
  }
  // The keys of `j` that nothing read, kept as a JSON object ("" if none),
  // and noted.
  std::string extra(const json& j, const std::string& at, const std::set<std::string>& seen) {
    json rest = json::object();
    for (auto it = j.begin(); it != j.end(); ++it)
      if (!seen.count(it.key())) rest[it.key()] = it.value();
    if (rest.empty()) return "";
    Location l;
    l.file = file_;
    std::string keys;
    for (auto it = rest.begin(); it != rest.end(); ++it)
      keys += (keys.empty() ? "" : ", ") + it.key();
    diags_.add(DiagCode::kPlanUnreadKey, l,
               (at.empty() ? std::string("the plan") : at) + ": MSCCL++'s parser does not read " +
                   keys + " (kept when written back)");
    return rest.dump();
  }

  std::string file_;
  DiagnosticList diags_;
};

// --- writing, in the DSL's key order ---

void putExtra(ordered& o, const std::string& extraJson) {
  if (extraJson.empty()) return;
  ordered rest = ordered::parse(extraJson);
  for (auto it = rest.begin(); it != rest.end(); ++it) o[it.key()] = it.value();
}

ordered ref(const BufferRef& b) {
  ordered o;
  switch (b.kind) {
    case BufferRef::Kind::kLocal:
      o["type"] = bufferTypeName(b.type);
      break;
    case BufferRef::Kind::kRemote:
      o["buffer_id"] = b.id;
      break;
    case BufferRef::Kind::kSwitch:
      o["switch_channel_id"] = b.id;
      break;
  }
  o["index"] = b.index;
  o["size"] = b.size;
  putExtra(o, b.extraJson);
  return o;
}

ordered op(const Op& p) {
  ordered o;
  o["name"] = opTypeName(p.type);
  if (p.iterContext)
    o["iter_context"] = {{"unit_size", p.iterContext->unitSize},
                         {"num_chunks", p.iterContext->numChunks}};
  if (p.hasOps) {
    o["ops"] = ordered::array();
    for (const Op& inner : p.ops) o["ops"].push_back(op(inner));
  }
  if (p.src) {
    o["src_buff"] = ordered::array();
    for (const BufferRef& b : *p.src) o["src_buff"].push_back(ref(b));
  }
  if (p.dst) {
    o["dst_buff"] = ordered::array();
    for (const BufferRef& b : *p.dst) o["dst_buff"].push_back(ref(b));
  }
  if (p.channelIds) o["channel_ids"] = *p.channelIds;
  if (p.channelType) o["channel_type"] = channelTypeName(*p.channelType);
  if (p.reduceOp) o["reduce_op"] = *p.reduceOp;
  if (p.tbg) o["tbg_info"] = {{"tb_id", p.tbg->tbId}, {"tbg_size", p.tbg->tbgSize}};
  if (p.barrierId) o["barrier_id"] = *p.barrierId;
  if (p.numThreadblocks) o["num_threadblocks"] = *p.numThreadblocks;
  if (p.semaphoreIds) o["semaphore_ids"] = *p.semaphoreIds;
  putExtra(o, p.extraJson);
  return o;
}

ordered gpu(const Gpu& g) {
  ordered o;
  o["id"] = g.id;
  o["input_chunks"] = g.inputChunks;
  o["output_chunks"] = g.outputChunks;
  o["scratch_chunks"] = g.scratchChunks;
  o["threadblocks"] = ordered::array();
  for (const Threadblock& t : g.threadblocks) {
    ordered tb;
    tb["id"] = t.id;
    tb["ops"] = ordered::array();
    for (const Op& p : t.ops) tb["ops"].push_back(op(p));
    tb["channels"] = ordered::array();
    for (const TbChannels& c : t.channels) {
      ordered e;
      e["channel_type"] = channelTypeName(c.type);
      e["channel_ids"] = c.ids;
      if (c.buff) e["buff"] = ordered::parse(*c.buff);
      putExtra(e, c.extraJson);
      tb["channels"].push_back(e);
    }
    if (t.remoteRefs) {
      tb["remote_buffer_refs"] = ordered::array();
      for (const TbRemoteRefs& r : *t.remoteRefs) {
        ordered e;
        e["access_channel_type"] = channelTypeName(r.type);
        e["remote_buffer_ids"] = r.ids;
        putExtra(e, r.extraJson);
        tb["remote_buffer_refs"].push_back(e);
      }
    }
    putExtra(tb, t.extraJson);
    o["threadblocks"].push_back(tb);
  }
  o["channels"] = ordered::array();
  for (const Channel& c : g.channels) {
    ordered e;
    e["channel_type"] = channelTypeName(c.type);
    if (c.type == ChannelType::kSwitch) {
      e["buffer_type"] = bufferTypeName(c.bufferType);
      e["rank_groups"] = ordered::array();
      for (const RankGroup& rg : c.rankGroups)
        e["rank_groups"].push_back({{"size", rg.size}, {"ranks", rg.ranks}});
    } else {
      e["connected_to"] = c.connectedTo;
    }
    putExtra(e, c.extraJson);
    o["channels"].push_back(e);
  }
  o["remote_buffers"] = ordered::array();
  for (const RemoteBuffer& r : g.remoteBuffers) {
    ordered e;
    e["rank"] = r.rank;
    e["type"] = bufferTypeName(r.type);
    e["access_channel_types"] = ordered::array();
    for (ChannelType t : r.access) e["access_channel_types"].push_back(channelTypeName(t));
    putExtra(e, r.extraJson);
    o["remote_buffers"].push_back(e);
  }
  if (g.semaphores) {
    o["semaphores"] = ordered::array();
    for (int v : *g.semaphores) o["semaphores"].push_back({{"init_value", v}});
  }
  putExtra(o, g.extraJson);
  return o;
}

}  // namespace

const char* channelTypeName(ChannelType t) {
  switch (t) {
    case ChannelType::kNone:
      return "none";
    case ChannelType::kMemory:
      return "memory";
    case ChannelType::kPort:
      return "port";
    case ChannelType::kSwitch:
      return "switch";
  }
  return "none";
}

const char* bufferTypeName(BufferType t) {
  switch (t) {
    case BufferType::kInput:
      return "i";
    case BufferType::kOutput:
      return "o";
    case BufferType::kScratch:
      return "s";
  }
  return "i";
}

const char* opTypeName(OpType t) {
  for (const auto& [type, name] : kOpNames)
    if (type == t) return name;
  return "nop";
}

std::optional<OpType> opTypeFromName(std::string_view name) {
  for (const auto& [type, n] : kOpNames)
    if (name == n) return type;
  return std::nullopt;
}

PlanReadResult readPlan(std::string_view text, const std::string& fileName) {
  PlanReadResult out;
  std::optional<json> doc = parseJsonText(text, fileName, DiagCode::kPlanFormat, out.diagnostics);
  if (!doc) return out;
  Plan p;
  Reader reader(fileName);
  reader.plan(*doc, p);
  out.diagnostics = reader.take();
  if (!out.diagnostics.hasErrors()) out.plan = std::move(p);
  return out;
}

bool looksLikePlan(std::string_view text) {
  json doc = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains("gpus") || !doc["gpus"].is_array()) return false;
  for (const json& g : doc["gpus"])
    if (!g.is_object() || !g.contains("threadblocks")) return false;
  return true;
}

std::string writePlan(const Plan& p) {
  ordered o;
  o["name"] = p.name;
  o["collective"] = p.collective;
  o["protocol"] = p.protocol;
  o["inplace"] = p.inplace;
  if (p.reuseResources) o["reuse_resources"] = *p.reuseResources;
  o["gpus"] = ordered::array();
  for (const Gpu& g : p.gpus) o["gpus"].push_back(gpu(g));
  if (p.numThreadsPerBlock) o["num_threads_per_block"] = *p.numThreadsPerBlock;
  if (p.useDoubleScratchBuffer) o["use_double_scratch_buffer"] = *p.useDoubleScratchBuffer;
  if (p.bufferAlignment) o["buffer_alignment"] = *p.bufferAlignment;
  if (p.minMessageSize) o["min_message_size"] = *p.minMessageSize;
  if (p.maxMessageSize) o["max_message_size"] = *p.maxMessageSize;
  putExtra(o, p.extraJson);
  return o.dump(2) + "\n";
}

}  // namespace chorus::ir::mscclpp

namespace chorus::ir::mscclpp {

namespace {

BufferType planBuffer(Buffer b) {
  return b == Buffer::kInput    ? BufferType::kInput
         : b == Buffer::kOutput ? BufferType::kOutput
                                : BufferType::kScratch;
}

BufferRef localRef(Buffer b, int off, int cnt) {
  BufferRef r;
  r.kind = BufferRef::Kind::kLocal;
  r.type = planBuffer(b);
  r.index = static_cast<uint32_t>(off);
  r.size = static_cast<uint32_t>(cnt);
  return r;
}

BufferRef scratchRef(size_t off, int cnt) {
  BufferRef r = localRef(Buffer::kScratch, 0, cnt);
  r.index = static_cast<uint32_t>(off);
  return r;
}

BufferRef remoteRef(int localId, size_t off, int cnt) {
  BufferRef r;
  r.kind = BufferRef::Kind::kRemote;
  r.id = localId;
  r.index = static_cast<uint32_t>(off);
  r.size = static_cast<uint32_t>(cnt);
  return r;
}

Op dataOp(OpType t, std::vector<BufferRef> src, std::vector<BufferRef> dst, bool remote) {
  Op o;
  o.type = t;
  o.src = std::move(src);
  o.dst = std::move(dst);
  if (remote) o.channelType = ChannelType::kMemory;
  return o;
}

Op syncOp(OpType t, int localChannel) {
  Op o;
  o.type = t;
  o.channelType = ChannelType::kMemory;
  o.channelIds = std::vector<int>{localChannel};
  return o;
}

Op semOp(OpType t, int id) {
  Op o;
  o.type = t;
  o.semaphoreIds = std::vector<int>{id};
  return o;
}

// A connection of the algorithm: (channel, from, to).
using Link = std::tuple<int, int, int>;

}  // namespace

Plan planFromAlgorithm(const Algorithm& a) {
  Plan p;
  p.name = a.name;
  p.collective = a.collective == CollectiveKind::kCustom
                     ? "custom"
                     : std::string(collectiveName(a.collective));
  if (p.collective == "reduce_scatter") p.collective = "reducescatter";
  p.protocol = "Simple";
  p.inplace = !a.outofplace;
  p.reuseResources = false;
  p.numThreadsPerBlock = 1024;
  p.useDoubleScratchBuffer = false;
  p.bufferAlignment = 16;
  p.minMessageSize = a.minBytes;
  p.maxMessageSize = a.maxBytes == 0 ? std::numeric_limits<uint64_t>::max() : a.maxBytes;
  const int n = a.ngpus;
  // Every connection's messages (their chunk counts, in order), and where
  // each one lands in its receiver's scratch.
  std::map<Link, std::vector<int>> messages;
  for (const Rank& r : a.ranks)
    for (const ir::Threadblock& tb : r.tbs)
      for (const ir::Step& s : tb.steps)
        if (sends(s.type)) messages[{tb.channel, r.id, tb.sendPeer}].push_back(s.count);
  std::vector<size_t> scratch(static_cast<size_t>(n));
  for (const Rank& r : a.ranks)
    scratch[static_cast<size_t>(r.id)] = static_cast<size_t>(r.scratchChunks);
  std::map<Link, size_t> slotBase;
  for (const auto& [link, counts] : messages) {
    size_t& end = scratch[static_cast<size_t>(std::get<2>(link))];
    slotBase[link] = end;
    for (int c : counts) end += static_cast<size_t>(c);
  }
  // Channels: between each pair of ranks, one memory channel per connection
  // in either direction, in one order both sides share, so the k-th channel
  // r -> p pairs with the k-th p -> r. A rank's channel to p for a link is
  // its index among its channels.
  std::map<std::pair<int, int>, std::vector<Link>> pairLinks;
  for (const auto& [link, counts] : messages) {
    auto [c, from, to] = link;
    pairLinks[{std::min(from, to), std::max(from, to)}].push_back(link);
  }
  std::vector<std::vector<int>> connectedTo(static_cast<size_t>(n));
  std::map<std::pair<int, Link>, int> channelOf;  // (rank, link) -> its channel id
  for (const auto& [pair, links] : pairLinks)
    for (const Link& l : links)
      for (int side : {pair.first, pair.second}) {
        const int other = side == pair.first ? pair.second : pair.first;
        auto& mine = connectedTo[static_cast<size_t>(side)];
        channelOf[{side, l}] = static_cast<int>(mine.size());
        mine.push_back(other);
      }
  for (const Rank& r : a.ranks) {
    Gpu g;
    g.id = r.id;
    g.inputChunks = static_cast<uint32_t>(r.inputChunks);
    g.outputChunks = static_cast<uint32_t>(r.outputChunks);
    // A collective's buffers are the call's, whatever the file declares
    // (an in-place file may use only one of them): MSCCL++ sizes chunks by
    // both.
    const auto whole = static_cast<uint32_t>(a.nchunksPerLoop);
    const auto share = static_cast<uint32_t>(a.nchunksPerLoop / std::max(n, 1));
    switch (a.collective) {
      case CollectiveKind::kAllReduce:
      case CollectiveKind::kAllToAll:
        g.inputChunks = g.outputChunks = whole;
        break;
      case CollectiveKind::kAllGather:
        g.inputChunks = share;
        g.outputChunks = whole;
        break;
      case CollectiveKind::kReduceScatter:
        g.inputChunks = whole;
        g.outputChunks = share;
        break;
      default:
        break;
    }
    g.scratchChunks = static_cast<uint32_t>(scratch[static_cast<size_t>(r.id)]);
    if (!connectedTo[static_cast<size_t>(r.id)].empty()) {
      Channel ch;
      ch.type = ChannelType::kMemory;
      ch.connectedTo = connectedTo[static_cast<size_t>(r.id)];
      g.channels.push_back(ch);
    }
    // One remote buffer per peer this rank sends to: its scratch.
    std::map<int, int> remoteOf;
    for (const ir::Threadblock& tb : r.tbs)
      if (tb.sendPeer >= 0 && !remoteOf.count(tb.sendPeer)) {
        remoteOf[tb.sendPeer] = static_cast<int>(g.remoteBuffers.size());
        RemoteBuffer rb;
        rb.rank = tb.sendPeer;
        rb.type = BufferType::kScratch;
        rb.access = {ChannelType::kMemory};
        g.remoteBuffers.push_back(rb);
      }
    // Semaphores: one per cross-threadblock dependency, by (tb, step) of
    // the dependent step.
    std::map<std::pair<int, int>, int> semOf;                       // dependent (tb, step)
    std::map<std::pair<int, int>, std::vector<int>> releasedAfter;  // (tb, step) -> sems
    for (const ir::Threadblock& tb : r.tbs)
      for (size_t s = 0; s < tb.steps.size(); ++s) {
        const ir::Step& st = tb.steps[s];
        if (st.depTb < 0 || st.depTb == tb.id) continue;
        const int id = static_cast<int>(semOf.size());
        semOf[{tb.id, static_cast<int>(s)}] = id;
        releasedAfter[{st.depTb, st.depStep}].push_back(id);
      }
    if (!semOf.empty()) g.semaphores = std::vector<int>(semOf.size(), 0);
    for (const ir::Threadblock& tb : r.tbs) {
      Threadblock out;
      out.id = tb.id;
      const Link sendLink{tb.channel, r.id, tb.sendPeer}, recvLink{tb.channel, tb.recvPeer, r.id};
      int sendCh = -1, recvCh = -1;
      TbChannels mem;
      mem.type = ChannelType::kMemory;
      if (tb.sendPeer >= 0) {
        sendCh = static_cast<int>(mem.ids.size());
        mem.ids.push_back(channelOf[{r.id, sendLink}]);
      }
      if (tb.recvPeer >= 0) {
        recvCh = static_cast<int>(mem.ids.size());
        mem.ids.push_back(channelOf[{r.id, recvLink}]);
      }
      if (!mem.ids.empty()) out.channels.push_back(mem);
      out.remoteRefs.emplace();
      if (tb.sendPeer >= 0) {
        TbRemoteRefs refs;
        refs.type = ChannelType::kMemory;
        refs.ids = {remoteOf[tb.sendPeer]};
        out.remoteRefs->push_back(refs);
      }
      size_t sent = slotBase.count(sendLink) ? slotBase[sendLink] : 0;
      size_t received = slotBase.count(recvLink) ? slotBase[recvLink] : 0;
      auto& ops = out.ops;
      // Whether an op since the last nop waited or touched data: a nop must
      // order it before the next data op, signal or release.
      bool unsynced = false;
      auto nop = [&] {
        if (unsynced) ops.push_back(Op{});
        unsynced = false;
      };
      for (size_t i = 0; i < tb.steps.size(); ++i) {
        const ir::Step& s = tb.steps[i];
        // What the step waits for (a semaphore, a peer's signal), then one
        // nop: the block's threads start the step's data after it, and
        // after the block's earlier data.
        if (auto it = semOf.find({tb.id, static_cast<int>(i)}); it != semOf.end()) {
          ops.push_back(semOp(OpType::kSemAcquire, it->second));
          unsynced = true;
        }
        const int cnt = s.count;
        size_t slot = 0;
        if (receives(s.type)) {
          slot = received;
          received += static_cast<size_t>(cnt);
          ops.push_back(syncOp(OpType::kWait, recvCh));
          unsynced = true;
        }
        if (s.type != StepType::kNop) {
          nop();
          unsynced = true;  // the data op below
        }
        const BufferRef here = scratchRef(slot, cnt);
        const size_t to = sent;
        if (sends(s.type)) sent += static_cast<size_t>(cnt);
        switch (s.type) {
          case StepType::kSend:
            ops.push_back(dataOp(OpType::kPut, {localRef(s.srcBuf, s.srcOff, cnt)},
                                 {remoteRef(0, to, cnt)}, true));
            break;
          case StepType::kRecv:
            ops.push_back(
                dataOp(OpType::kCopy, {here}, {localRef(s.dstBuf, s.dstOff, cnt)}, false));
            break;
          case StepType::kRecvCopySend:
            ops.push_back(
                dataOp(OpType::kCopy, {here}, {localRef(s.dstBuf, s.dstOff, cnt)}, false));
            ops.push_back(dataOp(OpType::kPut, {here}, {remoteRef(0, to, cnt)}, true));
            break;
          case StepType::kRecvReduceSend:
            ops.push_back(dataOp(OpType::kReduceSend, {here, localRef(s.srcBuf, s.srcOff, cnt)},
                                 {here, remoteRef(0, to, cnt)}, true));
            break;
          case StepType::kRecvReduceCopy:
            ops.push_back(dataOp(OpType::kReduce, {localRef(s.srcBuf, s.srcOff, cnt), here},
                                 {localRef(s.dstBuf, s.dstOff, cnt)}, false));
            break;
          case StepType::kRecvReduceCopySend:
            ops.push_back(dataOp(OpType::kReduceSend, {localRef(s.srcBuf, s.srcOff, cnt), here},
                                 {localRef(s.dstBuf, s.dstOff, cnt), remoteRef(0, to, cnt)}, true));
            break;
          case StepType::kCopy:
            ops.push_back(dataOp(OpType::kCopy, {localRef(s.srcBuf, s.srcOff, cnt)},
                                 {localRef(s.dstBuf, s.dstOff, cnt)}, false));
            break;
          case StepType::kReduce:
            ops.push_back(
                dataOp(OpType::kReduce,
                       {localRef(s.dstBuf, s.dstOff, cnt), localRef(s.srcBuf, s.srcOff, cnt)},
                       {localRef(s.dstBuf, s.dstOff, cnt)}, false));
            break;
          case StepType::kNop:
            break;
        }
        // The step's data, done by every thread, before a signal or a
        // release publishes it; otherwise the next step's nop orders it.
        const auto released = releasedAfter.find({tb.id, static_cast<int>(i)});
        if (sends(s.type) || released != releasedAfter.end()) nop();
        if (sends(s.type)) {
          ops.push_back(syncOp(OpType::kSignal, sendCh));  // (touches no data: no nop after)
        }
        // One release of all the semaphores this step frees (MSCCL++ takes
        // up to 16 per op), so that a step costs at most its 4-5 ops.
        if (released != releasedAfter.end())
          for (size_t k = 0; k < released->second.size(); k += limits::kMaxSemaphoresPerOp) {
            Op rel = semOp(OpType::kSemRelease, released->second[k]);
            for (size_t j = k + 1;
                 j < std::min(k + limits::kMaxSemaphoresPerOp, released->second.size()); ++j)
              rel.semaphoreIds->push_back(released->second[j]);
            ops.push_back(std::move(rel));
          }
      }
      g.threadblocks.push_back(std::move(out));
    }
    p.gpus.push_back(std::move(g));
  }
  return p;
}

}  // namespace chorus::ir::mscclpp
