// engine/compiled/waves.h: a compiled program's instructions in waves that run side by side on
// the pool (Program's schedule at two threads or more).
//
// Inter-op parallelism, from the program's dependencies: each instruction gets a level after
// every instruction it must follow (it reads what they write, or writes what they read or
// write: gradients accumulated into one buffer keep their order), first as early as it can be,
// then as late (so nothing is made long before it is used and kept live), never more than
// kWindow instructions from where it was. A level's instructions are independent: those that
// split over the pool themselves run one after another, the rest side by side as a wave, each
// whole on one thread (a parallel_for inside it runs inline) in at most `threads` contiguous
// parts of even modelled work, or in order when a part would be under side_by_side elements'
// work. Each computes what it would alone, so a step's bits do not change. The planner sees
// each wave as one instruction; the program keeps its own order unless some wave runs in parts
// at a small cost in memory (dev/notes.md, "Inter-op").
// Tests: engine/compiled/compiled_test.cc (bitwise the one-thread step at 2 to 4 threads).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/compiled/lowered.h"
#include "engine/compiled/planner.h"
#include "engine/runtime/threads.h"

namespace bp {

template <class T>
class Waves {
 public:
  using Lowered = program_ir::Lowered<T>;
  using Pending = program_ir::Pending<T>;
  using Ref = program_ir::Ref<T>;
  struct Wave {
    uint32_t begin, end;  // positions in order
    uint32_t parts = 1;
    uint32_t cut_at = 0;  // parts + 1 positions in cuts
  };
  // Runs waves [first, last) of `code`.
  template <class Instruction>
  void run(const std::vector<Instruction>& code, size_t first, size_t last) const {
    for (size_t w = first; w < last; w++) {
      const Wave& v = waves[w];
      if (v.parts == 1) {
        for (uint32_t at = v.begin; at < v.end; at++) code[order[at]].run(code[order[at]].args);
        continue;
      }
      const uint32_t* cut = &cuts[v.cut_at];
      thread_pool().run(int(v.parts), [&](int part, int) {
        for (uint32_t at = cut[part]; at < cut[part + 1]; at++)
          code[order[at]].run(code[order[at]].args);
      });
    }
  }
  // Groups the lowered program `l` for `threads` threads (none under a memory budget: its
  // recomputation was chosen for the program's own order), and gives its buffers lifetimes in
  // waves; or leaves it as it is (no waves).
  void group(Lowered& l, int32_t loss_buffer, int pool_threads, bool budgeted) {
    threads = pool_threads;
    waves.clear(), cuts.clear(), order.clear(), forward_waves = 0;
    // Under a memory budget the program keeps its order: recomputation was chosen for it.
    if (threads < 2 || budgeted) return;
    const uint32_t n = uint32_t(l.code.size());
    const std::vector<int32_t> level = levels_of(l);
    std::vector<double> work(n);
    std::vector<bool> alone(n);
    for (uint32_t i = 0; i < n; i++) {
      bool a = false;
      work[i] = work_of(l.code[i], &a), alone[i] = a;
    }
    // Levels in order (a counting sort); in each, the instructions that split themselves first,
    // then the wave of the rest.
    const int32_t top = n ? *std::max_element(level.begin(), level.end()) : -1;
    std::vector<uint32_t> level_start(size_t(top + 2), 0), by_level(n);
    for (uint32_t i = 0; i < n; i++) level_start[size_t(level[i]) + 1]++;
    for (size_t v = 1; v < level_start.size(); v++) level_start[v] += level_start[v - 1];
    {
      std::vector<uint32_t> next(level_start.begin(), level_start.end() - 1);
      for (uint32_t i = 0; i < n; i++) by_level[next[size_t(level[i])]++] = i;
    }
    std::vector<uint32_t> together;
    for (size_t v = 0; v + 1 < level_start.size(); v++) {
      const std::span<const uint32_t> members(by_level.data() + level_start[v],
                                              level_start[v + 1] - level_start[v]);
      if (!members.empty() && members[0] >= l.forward_end && order.size() == l.forward_end &&
          forward_waves == 0)
        forward_waves = waves.size();
      together.clear();
      for (const uint32_t& i : members)
        if (alone[i])
          add_wave({&i, 1}, work);
        else
          together.push_back(i);
      if (!together.empty()) add_wave(together, work);
    }
    if (l.forward_end == n) forward_waves = waves.size();
    // Lifetimes in waves: every buffer an instruction touches is live through its wave. Kept only
    // if some wave runs in parts and the bytes live at once grow by at most kWaveMemory (the
    // order moved things; a wave keeps all its buffers live): else the program's own order.
    bool parallel = false;
    std::vector<int32_t> wave_of(n);
    for (size_t w = 0; w < waves.size(); w++) {
      parallel |= waves[w].parts > 1;
      for (uint32_t at = waves[w].begin; at < waves[w].end; at++) wave_of[order[at]] = int32_t(w);
    }
    const std::vector<int32_t> first = l.first, last = l.last;
    const size_t in_order = plan_memory_bound(program_ir::lifetimes(l, nullptr), int32_t(n));
    std::fill(l.first.begin(), l.first.end(), -1), std::fill(l.last.begin(), l.last.end(), -1);
    std::vector<Touch> t;
    for (uint32_t i = 0; i < n; i++) {
      touches_of(l, l.code[i], t);
      for (const Touch& x : t)
        if (x.buffer >= 0) {
          int32_t& f = l.first[x.buffer];
          f = f < 0 ? wave_of[i] : std::min(f, wave_of[i]);
          l.last[x.buffer] = std::max(l.last[x.buffer], wave_of[i]);
        }
    }
    l.last[program_ir::find(l.buffers, loss_buffer)] =
        int32_t(waves.size()) - 1;  // read after the step
    if (!parallel || double(plan_memory_bound(program_ir::lifetimes(l, nullptr), time_slots(l))) >
                         kWaveMemory * double(in_order)) {
      l.first = first, l.last = last;
      waves.clear(), cuts.clear(), order.clear(), forward_waves = 0;
    }
  }
  static constexpr double kWaveMemory = 1.02;
  // The planner's clock: instructions, or waves when they run side by side.
  int32_t time_slots(const Lowered& l) const {
    return int32_t(waves.empty() ? l.code.size() : waves.size());
  }

 private:
  // What an instruction touches: a logical buffer (its root) or memory outside the arena (a
  // parameter's values or gradient, an input), read or written.
  struct Touch {
    int32_t buffer;  // -1: outside, from `outside`
    int32_t outside;
    bool write;
  };
  static void touches_of(const Lowered& l, const Pending& p, std::vector<Touch>& t) {
    t.clear();
    auto add = [&](const Ref& r, bool write) {
      if (r.buffer >= 0)
        t.push_back({program_ir::find(l.buffers, r.buffer), -1, write});
      else if (r.outside >= 0)
        t.push_back({-1, r.outside, write});
    };
    add(p.out, true), add(p.dout, true), add(p.aux, true), add(p.scratch, true);
    for (int k = 0; k < 3; k++) add(p.in[k], false), add(p.din[k], true);
  }
  // Modelled work, in elements (a multiply-add is a sixteenth: the split thresholds' ratio), and
  // whether the kernel splits over the pool itself (or runs its backward's two products side by
  // side), as engine/core/ops.h decides.
  static double work_of(const Pending& p, bool* alone) {
    const program_ir::OpShape& a = p.args;
    const SplitThresholds& at = split_thresholds();
    const double out = double(a.rows) * a.cols;
    if (p.op == TensorOp::matmul || p.op == TensorOp::linear) {
      const bool two = p.backward && !p.recompute;
      const double macs = out * a.in_cols[0];
      *alone = macs >= double(two ? at.pair_macs : at.macs);
      return (two ? 2 : 1) * macs / 16;
    }
    *alone = out >= double(at.elems);
    return out;
  }
  static constexpr uint32_t kWindow = 8;
  // Each instruction's level: as early as its dependencies allow, then as late as those that
  // need it allow (so that nothing is made long before it is used, which would keep it live:
  // activations, zeroed gradients, recomputations), within kWindow instructions of its place;
  // the backward after the whole forward.
  std::vector<int32_t> levels_of(const Lowered& l) const {
    const uint32_t n = uint32_t(l.code.size());
    std::vector<int32_t> early(n);
    struct Since {
      int32_t write = -1, read = -1;  // the last write's level; the latest read's since it
      int32_t writer = -1;            // the last write's instruction
      std::vector<uint32_t> readers;  // the instructions that read since it
    };
    std::vector<Since> buffer_state(l.buffers.size());
    std::unordered_map<int32_t, Since> outside_state;
    std::vector<std::pair<uint32_t, uint32_t>> edges;  // (instruction, one it must follow)
    std::vector<Touch> t;
    int32_t floor = 0, top = -1, forward_top = -1;
    for (uint32_t i = 0; i < n; i++) {
      if (i == l.forward_end) forward_top = top, floor = top + 1;
      touches_of(l, l.code[i], t);
      int32_t at = std::max(floor, i >= kWindow ? early[i - kWindow] : 0);
      for (const Touch& x : t) {
        Since& s = x.buffer >= 0 ? buffer_state[x.buffer] : outside_state[x.outside];
        at = std::max(at, (x.write ? std::max(s.write, s.read) : s.write) + 1);
        if (s.writer >= 0) edges.push_back({i, uint32_t(s.writer)});
        if (x.write)
          for (uint32_t r : s.readers) edges.push_back({i, r});
      }
      for (const Touch& x : t) {
        Since& s = x.buffer >= 0 ? buffer_state[x.buffer] : outside_state[x.outside];
        if (x.write)
          s.write = at, s.read = -1, s.writer = int32_t(i), s.readers.clear();
        else
          s.read = std::max(s.read, at), s.readers.push_back(i);
      }
      early[i] = at, top = std::max(top, at);
    }
    if (l.forward_end >= n) forward_top = top;
    std::vector<int32_t> late(n);
    for (uint32_t i = 0; i < n; i++) late[i] = i < l.forward_end ? forward_top : top;
    size_t e = edges.size();
    for (uint32_t i = n; i-- > 0;) {
      if (i + kWindow < n && (i < l.forward_end) == (i + kWindow < l.forward_end))
        late[i] = std::min(late[i], late[i + kWindow]);
      late[i] = std::max(late[i], early[i]);
      for (; e > 0 && edges[e - 1].first == i; e--)
        late[edges[e - 1].second] = std::min(late[edges[e - 1].second], late[i] - 1);
    }
    return late;
  }
  // One wave of `members` (independent instructions, in order), cut into at most threads
  // contiguous parts of about even work, at least one instruction each; fewer parts while the
  // smallest would be under side_by_side.
  void add_wave(std::span<const uint32_t> members, const std::vector<double>& work) {
    Wave w{uint32_t(order.size()), uint32_t(order.size() + members.size())};
    double total = 0;
    for (uint32_t i : members) total += work[i];
    order.insert(order.end(), members.begin(), members.end());
    for (uint32_t parts = std::min<uint32_t>(uint32_t(threads), uint32_t(members.size()));
         parts > 1; parts--) {
      std::vector<uint32_t> cut{w.begin};
      double done = 0, last = 0, smallest = total;
      uint32_t k = 0;
      for (uint32_t part = 1; part < parts; part++) {
        do done += work[members[k++]];
        while (k < members.size() - (parts - part) && done < total * part / parts);
        cut.push_back(w.begin + k), smallest = std::min(smallest, done - last), last = done;
      }
      cut.push_back(w.end), smallest = std::min(smallest, total - last);
      if (smallest < double(split_thresholds().side_by_side)) continue;
      w.parts = parts, w.cut_at = uint32_t(cuts.size());
      cuts.insert(cuts.end(), cut.begin(), cut.end());
      break;
    }
    waves.push_back(w);
  }

 public:
  std::vector<Wave> waves;      // none at one thread, or when the program keeps its own order
  std::vector<uint32_t> order;  // the instructions in the order the waves run them
  std::vector<uint32_t> cuts;
  size_t forward_waves = 0;  // the forward's waves come first
  int threads = 1;

  bool empty() const { return waves.empty(); }
  // Instructions that run side by side with others (in waves of more than one part).
  size_t side_by_side() const {
    size_t n = 0;
    for (const Wave& w : waves) n += w.parts > 1 ? w.end - w.begin : 0;
    return n;
  }
};

}  // namespace bp
