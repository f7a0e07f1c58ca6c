// The registered programs, by family (one file each).
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include "lang/registry.h"

namespace chorus::lang {

void addRingPrograms(std::vector<ProgramEntry>& out);
void addAllToAllPrograms(std::vector<ProgramEntry>& out);
void addAllPairsPrograms(std::vector<ProgramEntry>& out);
void addRecursivePrograms(std::vector<ProgramEntry>& out);
void addTreePrograms(std::vector<ProgramEntry>& out);
void addHierarchicalPrograms(std::vector<ProgramEntry>& out);
void addNvidiaPrograms(std::vector<ProgramEntry>& out);
void addAllToNextPrograms(std::vector<ProgramEntry>& out);

// GPUs per node from --gpus-per-node (unset: all ranks on one node); 0,
// with a problem recorded at the caller's line, when they do not divide the
// ranks. Rank r is GPU r % G of node r / G.
int gpusPerNode(Program& p, Where where = std::source_location::current());

// Per-rank forms (docs/scale.md, rank_ring.cc). A ring of `size` members,
// member i being rank `rank(i)`; `focus` is the member that is
// Program::focus() (-1: the focus is not on it).
struct RingOf {
  int size = 0;
  std::function<int(int)> rank;
  int focus = -1;
};
// One rank alone, out of place: its input copied to its output (depth 1),
// as the allreduce programs' whole forms do for n == 1.
void aloneRank(Program& p);

// A place on a ring member.
struct Held {
  int member;
  Buffer buffer;
  int index;
};
// The focus's part of a reduction of chunks [index, index + count) of
// `from` around `ring` from member `start`: at step s (1..size-1) member
// start + s reduces its own chunks with the partial sum that member
// start + s - 1 holds, into where(member) (the start's partial sum is its
// `from` chunks). Step s has depth first + s.
void reduceAroundRank(Program& p, const RingOf& ring, Buffer from, int index, int count, int start,
                      Hints h, const std::function<std::pair<Buffer, int>(int)>& where, int first);
// The focus's part of a copy of what `origin` holds (count chunks) around
// `ring` into every other member's output at `at`: step s (1..size-1)
// copies from member origin + s - 1 (the origin's own place at s = 1) to
// origin + s, with depth first + s.
void copyAroundRank(Program& p, const RingOf& ring, Held origin, int at, int count, Hints h,
                    int first);

}  // namespace chorus::lang
