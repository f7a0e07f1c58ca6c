// Journeys around a ring, as per-rank forms record them (programs.h): of a
// chunk's size - 1 hops, the focus takes part in at most two, the one that
// reaches it and the one that leaves it. The hop at step s is at depth
// first + s in the whole program's schedule: each hop reads what the one
// before wrote, and nothing else the journey does touches its places.
#include "lang/programs/programs.h"

namespace chorus::lang {

namespace {
int member(const RingOf& ring, int from, int step) { return (from + step) % ring.size; }
// The focus's steps of a journey from `origin`: the one that reaches it and the one after.
template <typename At>
void focusSteps(const RingOf& ring, int origin, At at) {
  if (ring.focus < 0) return;
  const int s = (ring.focus - origin + ring.size) % ring.size;
  if (s >= 1) at(s);
  if (s + 1 <= ring.size - 1) at(s + 1);
}
}  // namespace

void aloneRank(Program& p) {
  if (p.options().inplace) return;
  p.depth(1);
  p.chunk(0, kInput, 0).copy(0, kOutput, 0);
}

void reduceAroundRank(Program& p, const RingOf& ring, Buffer from, int index, int count, int start,
                      Hints h, const std::function<std::pair<Buffer, int>(int)>& where, int first) {
  auto held = [&](int step) {
    const int m = member(ring, start, step);
    if (step == 0) return Held{m, from, index};
    auto [buffer, at] = where(m);
    return Held{m, buffer, at};
  };
  focusSteps(ring, start, [&](int step) {
    const Held before = held(step - 1), after = held(step);
    p.depth(first + step);
    p.chunk(ring.rank(after.member), from, index, count)
        .reduce(p.chunk(ring.rank(before.member), before.buffer, before.index, count), after.buffer,
                after.index, h);
  });
}

void copyAroundRank(Program& p, const RingOf& ring, Held origin, int at, int count, Hints h,
                    int first) {
  focusSteps(ring, origin.member, [&](int step) {
    p.depth(first + step);
    Chunk c = step == 1
                  ? p.chunk(ring.rank(origin.member), origin.buffer, origin.index, count)
                  : p.chunk(ring.rank(member(ring, origin.member, step - 1)), kOutput, at, count);
    c.copy(ring.rank(member(ring, origin.member, step)), kOutput, at, h);
  });
}

}  // namespace chorus::lang
