// The IR: buffers mapped (input i, output o, each scratch buffer a range of
// s, one after another, sized by the largest chunk any rank uses), every
// threadblock's peers and channel from its instructions, each step after
// the nops that carry its further dependencies, hasdep on every target.
#include "compiler/passes.h"
#include "lang/collectives.h"

namespace chorus::compiler {

ir::Algorithm emit(const Mir& m) {
  ir::Algorithm a;
  const lang::ProgramOptions& o = m.options;
  a.name = o.name;
  a.protocol = ir::parseProtocol(o.protocol).value_or(ir::Protocol::kSimple);
  a.ngpus = o.ranks;
  a.collective = parseCollective(o.collective);
  a.collectiveName = o.collective;
  a.inplace = o.inplace;
  a.outofplace = !o.inplace;
  a.nchunksPerLoop = std::max(m.inputChunks, m.outputChunks);
  a.sliceBytes = o.sliceBytes;
  // Steps carry lines of the file the operations were recorded in (a
  // registered program's own file, not the one that made the Program).
  a.sourceFile = m.opsFile != nullptr ? m.opsFile : m.file;
  // Scratch layout.
  // Extents a per-rank form states (it sees only its rank's indices).
  std::vector<int> size = m.scratchExtents, base(m.scratchNames.size(), 0);
  size.resize(m.scratchNames.size(), 0);
  int channels = 1;
  for (const auto& xs : m.ranks)
    for (const Instr& x : xs) {
      if (x.dead) continue;
      channels = std::max(channels, x.channel + 1);
      for (auto [b, k] : {std::pair{x.srcBuf, x.srcIdx}, std::pair{x.dstBuf, x.dstIdx}})
        if (b >= 2 && k >= 0)
          size[static_cast<size_t>(b - 2)] =
              std::max(size[static_cast<size_t>(b - 2)], k + x.count);
    }
  int scratch = 0;
  for (size_t i = 0; i < size.size(); ++i) {
    base[i] = scratch;
    scratch += size[i];
  }
  a.nchannels = channels;
  auto buffer = [&](int b, int k, ir::Buffer* out, int* off) {
    if (b < 0 || k < 0) {
      *off = -1;
      return;
    }
    *out = b == lang::kInput    ? ir::Buffer::kInput
           : b == lang::kOutput ? ir::Buffer::kOutput
                                : ir::Buffer::kScratch;
    *off = b >= 2 ? base[static_cast<size_t>(b - 2)] + k : k;
  };
  lang::InPlace ip = lang::inPlaceOf(o.collective);
  for (int r = 0; r < o.ranks; ++r) {
    if (o.focus >= 0 && r != o.focus) continue;  // a per-rank compile: its rank only
    ir::Rank rank;
    rank.id = r;
    rank.inputChunks = o.inplace && ip == lang::InPlace::kInputInOutput ? 0 : m.inputChunks;
    rank.outputChunks = o.inplace && ip != lang::InPlace::kInputInOutput ? 0 : m.outputChunks;
    rank.scratchChunks = scratch;
    rank.tbs.resize(static_cast<size_t>(m.tbCount[static_cast<size_t>(r)]));
    for (size_t t = 0; t < rank.tbs.size(); ++t) rank.tbs[t].id = static_cast<int>(t);
    std::vector<size_t> length(rank.tbs.size(), 0);  // steps, nops included (exact)
    for (const Instr& x : m.ranks[static_cast<size_t>(r)])
      if (!x.dead) length[static_cast<size_t>(x.tb)] = static_cast<size_t>(x.step) + 1;
    for (size_t t = 0; t < rank.tbs.size(); ++t) rank.tbs[t].steps.reserve(length[t]);
    for (const Instr& x : m.ranks[static_cast<size_t>(r)]) {
      if (x.dead) continue;
      ir::Threadblock& tb = rank.tbs[static_cast<size_t>(x.tb)];
      if (x.sendPeer >= 0) tb.sendPeer = x.sendPeer;
      if (x.recvPeer >= 0) tb.recvPeer = x.recvPeer;
      if (x.sendPeer >= 0 || x.recvPeer >= 0) tb.channel = x.channel;
      ir::Step s;
      s.type = x.type;
      s.count = x.count;
      s.lag = static_cast<uint16_t>(x.hints.lag);
      s.pos = {x.line, x.column};
      buffer(ir::readsSrc(x.type) || x.type == ir::StepType::kSend ? x.srcBuf : -1, x.srcIdx,
             &s.srcBuf, &s.srcOff);
      buffer(ir::writesDst(x.type) ? x.dstBuf : -1, x.dstIdx, &s.dstBuf, &s.dstOff);
      if (s.srcOff < 0) s.srcBuf = s.dstBuf;
      if (s.dstOff < 0) s.dstBuf = s.srcBuf;
      for (size_t d = 1; d < x.deps.size(); ++d) {
        ir::Step nop;
        nop.type = ir::StepType::kNop;
        nop.depTb = x.deps[d].first;
        nop.depStep = x.deps[d].second;
        nop.lag = s.lag;
        nop.pos = s.pos;
        tb.steps.push_back(nop);
      }
      if (!x.deps.empty()) {
        s.depTb = x.deps[0].first;
        s.depStep = x.deps[0].second;
      }
      tb.steps.push_back(s);
    }
    for (ir::Threadblock& tb : rank.tbs)
      for (const ir::Step& s : tb.steps)
        if (s.depTb >= 0)
          rank.tbs[static_cast<size_t>(s.depTb)].steps[static_cast<size_t>(s.depStep)].hasDep =
              true;
    a.ranks.push_back(std::move(rank));
  }
  return a;
}

}  // namespace chorus::compiler
