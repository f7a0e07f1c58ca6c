#include "ir/validate.h"

#include <map>
#include <set>
#include <string>
#include <tuple>

namespace chorus::ir {
namespace {

constexpr int kMsccLMaxChannels = 32;
constexpr int kMscclMaxTbsPerChannel = 32;
constexpr int kMscclMaxCount = 71;
constexpr int kMscclMaxOffset = 32767;
constexpr int kMscclMaxDepTb = 127;

std::string operand(Buffer b, int off, int cnt) {
  return std::string(1, bufferLetter(b)) + "[" + std::to_string(off) +
         (cnt == 1 ? "" : ".." + std::to_string(off + cnt - 1)) + "]";
}

void checkOperand(const Algorithm& a, const Rank& r, const Threadblock& tb, int si,
                  const char* role, Buffer buf, int off, int cnt, DiagnosticList& out) {
  if (off < 0) {
    out.add(DiagCode::kUnusedOperand, siteLocation(a, r.id, tb.id, si),
            std::string(stepTypeName(tb.steps[si].type)) + " uses its " + role + " operand but " +
                role + "off is " + std::to_string(off));
    return;
  }
  int declared = r.chunks(buf);
  if (static_cast<long long>(off) + cnt > declared) {
    out.add(DiagCode::kOffsetRange, siteLocation(a, r.id, tb.id, si),
            std::string(role) + " " + operand(buf, off, cnt) + " is past the " +
                std::to_string(declared) + " chunk(s) rank " + std::to_string(r.id) +
                " declares for buffer '" + bufferLetter(buf) + "' (" + bufferLetter(buf) +
                "_chunks=" + std::to_string(declared) + ")");
  }
}

void validatePeer(const Algorithm& a, const Rank& r, const Threadblock& tb, const char* dir,
                  int peer, DiagnosticList& out) {
  if (peer == -1) return;
  if (peer == r.id) {
    out.add(DiagCode::kPeerSelf, siteLocation(a, r.id, tb.id),
            std::string(dir) + " peer is the rank itself");
  } else if (peer < 0 || peer >= a.ngpus) {
    out.add(DiagCode::kPeerRange, siteLocation(a, r.id, tb.id),
            std::string(dir) + " peer " + std::to_string(peer) +
                " is not a rank (ngpus=" + std::to_string(a.ngpus) + ")");
  }
}

// docs/spec/IR.md section 2: consecutive re steps with the same dstbuf, dstoff,
// srcbuf and cnt and no dependency of their own may run fused as one
// multi-source reduction. Fused, every source is read before the
// destination is written; one by one, a later step reads what an earlier one
// wrote. The two agree unless a later step's source overlaps the destination.
void checkFusedReduceRuns(const Algorithm& a, const Rank& r, const Threadblock& tb,
                          DiagnosticList& out) {
  const auto& steps = tb.steps;
  for (size_t i = 1; i < steps.size(); ++i) {
    const Step& head = steps[i - 1];
    const Step& s = steps[i];
    bool fusable = head.type == StepType::kReduce && s.type == StepType::kReduce && s.depTb == -1 &&
                   !head.hasDep && s.dstBuf == head.dstBuf && s.dstOff == head.dstOff &&
                   s.srcBuf == head.srcBuf && s.count == head.count;
    if (!fusable || s.srcBuf != s.dstBuf || s.count <= 0) continue;
    bool overlap = s.srcOff < s.dstOff + s.count && s.dstOff < s.srcOff + s.count;
    if (!overlap) continue;
    out.add(DiagCode::kFusionHazard, siteLocation(a, r.id, tb.id, static_cast<int>(i)),
            "re reads " + operand(s.srcBuf, s.srcOff, s.count) +
                ", which the fusable run it belongs to writes; fused (as the MSCCL executor may "
                "run it) and one by one give different results. Add a dependency or separate "
                "the steps");
  }
}

}  // namespace

Location siteLocation(const Algorithm& a, int rank, int tb, int step) {
  Location l;
  l.file = a.sourceFile;
  l.rank = rank;
  l.tb = tb;
  l.step = step;
  SourcePos p = a.pos;
  if (rank >= 0 && rank < static_cast<int>(a.ranks.size())) {
    const Rank& r = a.ranks[rank];
    p = r.pos;
    if (tb >= 0 && tb < static_cast<int>(r.tbs.size())) {
      p = r.tbs[tb].pos;
      if (step >= 0 && step < static_cast<int>(r.tbs[tb].steps.size())) {
        p = r.tbs[tb].steps[step].pos;
      }
    }
  }
  l.line = p.line;
  l.column = p.column;
  return l;
}

void validateStructure(const Algorithm& a, DiagnosticList& out) {
  Location top = siteLocation(a, -1);
  if (a.ngpus < 1) out.add(DiagCode::kBadAlgoAttribute, top, "ngpus must be at least 1");
  if (a.nchannels < 1) out.add(DiagCode::kBadAlgoAttribute, top, "nchannels must be at least 1");
  if (a.nchunksPerLoop < 1)
    out.add(DiagCode::kBadAlgoAttribute, top, "nchunksperloop must be at least 1");
  if (a.maxBytes != 0 && a.minBytes > a.maxBytes)
    out.add(DiagCode::kBadAlgoAttribute, top,
            "minBytes=" + std::to_string(a.minBytes) + " > maxBytes=" + std::to_string(a.maxBytes) +
                ": no call size selects this algorithm");
  if (!a.inplace && !a.outofplace)
    out.add(DiagCode::kBadAlgoAttribute, top,
            "inplace=0 and outofplace=0: no call form can use this algorithm");
  if (a.sliceBytes % 16 != 0)
    out.add(DiagCode::kBadAlgoAttribute, top,
            "sliceBytes=" + std::to_string(a.sliceBytes) +
                " is not a multiple of 16 bytes (0: the protocol's slice)");

  // Rank ids: exactly 0..ngpus-1 (ranks are sorted by id).
  if (static_cast<int>(a.ranks.size()) != a.ngpus) {
    out.add(DiagCode::kRankIds, top,
            "ngpus=" + std::to_string(a.ngpus) + " but there are " +
                std::to_string(a.ranks.size()) + " <gpu> elements");
  }
  for (size_t i = 0; i < a.ranks.size(); ++i) {
    const Rank& r = a.ranks[i];
    if (r.id < 0 || r.id >= a.ngpus) {
      Location l = siteLocation(a, -1);
      l.line = r.pos.line;
      l.column = r.pos.column;
      out.add(DiagCode::kRankIds, l,
              "gpu id " + std::to_string(r.id) + " is outside 0.." + std::to_string(a.ngpus - 1));
    } else if (i > 0 && a.ranks[i - 1].id == r.id) {
      Location l = siteLocation(a, -1);
      l.line = r.pos.line;
      l.column = r.pos.column;
      out.add(DiagCode::kRankIds, l, "gpu id " + std::to_string(r.id) + " appears twice");
    }
  }
  // Later checks index ranks by id; stop here if that is unsafe.
  for (size_t i = 0; i < a.ranks.size(); ++i) {
    if (a.ranks[i].id != static_cast<int>(i)) {
      if (!out.contains(DiagCode::kRankIds))
        out.add(DiagCode::kRankIds, top, "gpu ids are not exactly 0..ngpus-1");
      return;
    }
  }

  for (const Rank& r : a.ranks) {
    bool countsOk = true;
    for (Buffer b : {Buffer::kInput, Buffer::kOutput, Buffer::kScratch}) {
      if (r.chunks(b) >= 0) continue;
      out.add(DiagCode::kBadAttribute, siteLocation(a, r.id),
              std::string(1, bufferLetter(b)) + "_chunks=" + std::to_string(r.chunks(b)) +
                  " is negative");
      countsOk = false;
    }
    if (!countsOk) continue;
    bool tbIdsOk = true;
    for (size_t t = 0; t < r.tbs.size(); ++t) {
      if (r.tbs[t].id != static_cast<int>(t)) {
        Location l = siteLocation(a, r.id);
        l.line = r.tbs[t].pos.line;
        l.column = r.tbs[t].pos.column;
        out.add(DiagCode::kTbIds, l,
                "tb id " + std::to_string(r.tbs[t].id) + " found where id " + std::to_string(t) +
                    " is expected (ids must be 0.." + std::to_string(r.tbs.size() - 1) +
                    ", each once)");
        tbIdsOk = false;
        break;
      }
    }
    if (!tbIdsOk) continue;  // dependencies below index tbs by id

    // (channel, peer, direction) -> owning tb.
    std::map<std::tuple<int, int, int>, int> owner;
    for (const Threadblock& tb : r.tbs) {
      validatePeer(a, r, tb, "send", tb.sendPeer, out);
      validatePeer(a, r, tb, "recv", tb.recvPeer, out);
      if (tb.channel < 0 || tb.channel >= a.nchannels) {
        out.add(DiagCode::kChannelRange, siteLocation(a, r.id, tb.id),
                "channel " + std::to_string(tb.channel) + " is outside 0.." +
                    std::to_string(a.nchannels - 1));
      }
      for (int dir = 0; dir < 2; ++dir) {
        int peer = dir == 0 ? tb.sendPeer : tb.recvPeer;
        if (peer < 0) continue;
        auto [it, inserted] = owner.emplace(std::tuple{tb.channel, peer, dir}, tb.id);
        if (!inserted) {
          out.add(DiagCode::kDuplicateConnection, siteLocation(a, r.id, tb.id),
                  std::string(dir == 0 ? "sends to" : "receives from") + " rank " +
                      std::to_string(peer) + " on channel " + std::to_string(tb.channel) +
                      ", which tb " + std::to_string(it->second) + " already does");
        }
      }

      checkFusedReduceRuns(a, r, tb, out);
      int nopRun = 0;
      for (int si = 0; si < static_cast<int>(tb.steps.size()); ++si) {
        const Step& s = tb.steps[si];
        Location here = siteLocation(a, r.id, tb.id, si);
        std::string type(stepTypeName(s.type));
        if (sends(s.type) && tb.sendPeer < 0)
          out.add(DiagCode::kMissingPeer, here, type + " sends but the tb has send=-1");
        if (receives(s.type) && tb.recvPeer < 0)
          out.add(DiagCode::kMissingPeer, here, type + " receives but the tb has recv=-1");
        if (s.count < 0) {
          out.add(DiagCode::kNegativeCount, here, "cnt=" + std::to_string(s.count));
        } else if (s.type != StepType::kNop) {
          if (readsSrc(s.type)) checkOperand(a, r, tb, si, "src", s.srcBuf, s.srcOff, s.count, out);
          if (writesDst(s.type) || readsDst(s.type))
            checkOperand(a, r, tb, si, "dst", s.dstBuf, s.dstOff, s.count, out);
        }

        bool hasDepRef = s.depTb != -1 || s.depStep != -1;
        if (hasDepRef) {
          if (s.depTb < 0 || s.depTb >= static_cast<int>(r.tbs.size()) || s.depStep < 0 ||
              s.depStep >= static_cast<int>(r.tbs[s.depTb].steps.size())) {
            out.add(DiagCode::kBadDependency, here,
                    "depends on tb " + std::to_string(s.depTb) + " step " +
                        std::to_string(s.depStep) + ", which does not exist");
            hasDepRef = false;
          } else if (s.depTb == tb.id) {
            out.add(DiagCode::kBadDependency, here,
                    "depends on step " + std::to_string(s.depStep) +
                        " of its own threadblock (program order already orders them, or it "
                        "waits forever)");
          } else if (!r.tbs[s.depTb].steps[s.depStep].hasDep) {
            out.add(DiagCode::kDependencyWithoutHasdep, here,
                    "depends on tb " + std::to_string(s.depTb) + " step " +
                        std::to_string(s.depStep) +
                        ", which has hasdep=0 and so never publishes its completion");
          } else if (const int theirs = r.tbs[s.depTb].steps[s.depStep].lag; theirs > s.lag) {
            // It would wait for a slice the other runs later, in a later
            // iteration of its own: a cycle through the threadblocks' loops.
            out.add(DiagCode::kLagDependency, here,
                    "lag " + std::to_string(s.lag) + " depends on tb " + std::to_string(s.depTb) +
                        " step " + std::to_string(s.depStep) + ", of lag " +
                        std::to_string(theirs) +
                        " (a dependency's lag must be at most the step's)");
          }
        }
        if (s.type == StepType::kNop) {
          if (!hasDepRef && s.depTb == -1 && s.depStep == -1)
            out.add(DiagCode::kNopWithoutDependency, here, "nop with depid=-1 does nothing");
          ++nopRun;
        } else {
          if (nopRun > 0 && s.depTb == -1 && s.depStep == -1) {
            out.add(DiagCode::kNopRunWithoutDependency, here,
                    "follows " + std::to_string(nopRun) +
                        " nop(s) carrying extra dependencies but has no dependency of its own "
                        "(the first dependency belongs on the step itself)");
          }
          nopRun = 0;
        }
      }
    }
  }
}

bool isExecutorLimit(DiagCode code) {
  switch (code) {
    case DiagCode::kLimitChannels:
    case DiagCode::kLimitTbsPerChannel:
    case DiagCode::kLimitCount:
    case DiagCode::kLimitOffset:
    case DiagCode::kLimitDepTb:
    case DiagCode::kLimitSteps:
    case DiagCode::kLimitAttributes:
      return true;
    default:
      return false;
  }
}

void checkExecutorLimits(const Algorithm& a, DiagnosticList& out) {
  Location top = siteLocation(a, -1);
  if (a.legacyAttributes) {
    out.add(DiagCode::kLimitAttributes, top,
            "<algo> lacks ngpus, outofplace, minBytes or maxBytes; the current MSCCL executor "
            "refuses such files (chorus convert writes all ten attributes)");
  }
  if (a.collective == CollectiveKind::kCustom) {
    out.add(DiagCode::kLimitAttributes, top,
            "coll=\"" + a.collectiveName +
                "\" is not a collective the MSCCL executor knows; it refuses the file");
  }
  if (a.sliceBytes > 0) {
    out.add(DiagCode::kSliceIgnored, top,
            "sliceBytes=" + std::to_string(a.sliceBytes) +
                " is Chorus's: the MSCCL executor ignores it and cuts its protocol's slices (" +
                std::to_string(defaultSliceBytes(a.protocol)) +
                " bytes): the result is the same, the pipeline this schedule was made for is lost "
                "there");
  }
  {
    // Once, at the first lagged step, with how many there are.
    size_t lagged = 0;
    Location first;
    for (const Rank& r : a.ranks)
      for (const Threadblock& tb : r.tbs)
        for (size_t si = 0; si < tb.steps.size(); ++si)
          if (tb.steps[si].lag != 0 && lagged++ == 0)
            first = siteLocation(a, r.id, tb.id, static_cast<int>(si));
    if (lagged > 0)
      out.add(DiagCode::kLagIgnored, first,
              std::to_string(lagged) +
                  " step(s) have a lag, Chorus's: the MSCCL executor ignores it and moves slice j "
                  "in every step of iteration j: the result is the same, the order this schedule "
                  "was made for is lost there");
  }
  if (a.nchannels > kMsccLMaxChannels) {
    out.add(DiagCode::kLimitChannels, top,
            "nchannels=" + std::to_string(a.nchannels) + " > " + std::to_string(kMsccLMaxChannels));
  }
  // First finding per code, and how many more there are (and on how many ranks).
  std::map<DiagCode, std::pair<Location, std::string>> first;
  std::map<DiagCode, int> more;
  std::map<DiagCode, std::set<int>> ranksWith;
  auto note = [&](DiagCode c, Location l, std::string msg) {
    ranksWith[c].insert(l.rank);
    if (first.emplace(c, std::pair{std::move(l), std::move(msg)}).second) return;
    ++more[c];
  };
  for (const Rank& r : a.ranks) {
    std::map<int, std::pair<int, int>> perChannel;  // channel -> (#send tbs, #recv tbs)
    for (const Threadblock& tb : r.tbs) {
      if (tb.sendPeer >= 0) ++perChannel[tb.channel].first;
      if (tb.recvPeer >= 0) ++perChannel[tb.channel].second;
      if (static_cast<int>(tb.steps.size()) > kMscclMaxSteps) {
        note(DiagCode::kLimitSteps, siteLocation(a, r.id, tb.id),
             std::to_string(tb.steps.size()) + " steps > " + std::to_string(kMscclMaxSteps) +
                 " (older executors allow 256)");
      }
      for (int si = 0; si < static_cast<int>(tb.steps.size()); ++si) {
        const Step& s = tb.steps[si];
        if (s.count > kMscclMaxCount) {
          note(DiagCode::kLimitCount, siteLocation(a, r.id, tb.id, si),
               "cnt=" + std::to_string(s.count) + " > " + std::to_string(kMscclMaxCount));
        }
        if (s.srcOff > kMscclMaxOffset || s.dstOff > kMscclMaxOffset) {
          note(DiagCode::kLimitOffset, siteLocation(a, r.id, tb.id, si),
               "offset " + std::to_string(std::max(s.srcOff, s.dstOff)) + " > " +
                   std::to_string(kMscclMaxOffset));
        }
        if (s.depTb > kMscclMaxDepTb) {
          note(DiagCode::kLimitDepTb, siteLocation(a, r.id, tb.id, si),
               "depid=" + std::to_string(s.depTb) + " > " + std::to_string(kMscclMaxDepTb));
        }
      }
    }
    for (const auto& [chan, counts] : perChannel) {
      if (counts.first > kMscclMaxTbsPerChannel || counts.second > kMscclMaxTbsPerChannel) {
        note(DiagCode::kLimitTbsPerChannel, siteLocation(a, r.id),
             "channel " + std::to_string(chan) + " has " + std::to_string(counts.first) +
                 " sending and " + std::to_string(counts.second) + " receiving tbs (max " +
                 std::to_string(kMscclMaxTbsPerChannel) + " each)");
      }
    }
  }
  for (auto& [code, lm] : first) {
    std::string msg = lm.second;
    if (more[code] > 0) {
      msg += " (and " + std::to_string(more[code]) + " more on " +
             std::to_string(ranksWith[code].size()) + " rank(s))";
    }
    out.add(code, lm.first, msg);
  }
}

}  // namespace chorus::ir
