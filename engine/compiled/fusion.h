// engine/compiled/fusion.h: chains of elementwise and row-wise ops of a compiled program run as
// one loop over tiles of rows, each tile through every op of the chain while it is in cache.
//
// From the op table, not pattern by pattern: an op is fusable where its rule says each output row
// comes from the same row of its operands alone (OpRule::elementwise, OpRule::row_wise), forward
// and backward, its kernel is the engine's own (a library's may not split the same way), and no
// operand it broadcasts has a gradient (that gradient is a sum down every row). Zero fills join
// too. Consecutive such instructions of one phase form a group while each reads what an earlier
// one wrote; a member that would write what another reads whole (a broadcast row) ends it.
//
// A group of rows R_1..R_m runs in T tiles, T dividing every R_i: tile t is rows [t R_i / T,
// (t + 1) R_i / T) of member i, the same elements of every buffer any two members share, so each
// tile sees exactly what the whole-array calls would have: the same kernel on a range of rows
// computes each element as it would on all of them (the row splits of engine/core/ops.h, which
// the thread tests hold bitwise at any split). A buffer the group alone touches (written and read
// inside it, not the loss) is planned one tile long and takes no more arena bytes than that. Its
// tile keeps 64-byte alignment (tile lengths of elementwise operands and of such buffers are
// multiples of 16 elements), so vector loops peel and split as in the unfused program.
//
// One thread only for now (the kernels split their own rows over the pool; the waves schedule
// instructions side by side): with more, or under waves, the program runs unfused. Tests:
// engine/compiled/fusion_test.cc (every model workload and random chains bitwise the eager
// engine in small tiles; gmm's groups and the bytes they save).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <unordered_set>
#include <vector>

#include "engine/compiled/lowered.h"

namespace bp {

// A group's sizes, in elements of its largest operand: tiles of about `tile` (two of float32's
// 48 KB L1 with a tile of each operand); groups under `least` stay unfused (in cache anyway). One
// place, so that tests can make every chain of their small shapes a group.
struct FusionSizes {
  size_t tile = 8192, least = 32768;
};
inline FusionSizes& fusion_sizes() {
  static FusionSizes sizes;
  return sizes;
}

template <class T>
class Fusion {
 public:
  static constexpr int kPointers = 10;       // out, dout, aux, scratch, in[3], din[3]
  static constexpr size_t kAlignElems = 16;  // 64 bytes of float; more of double

  struct Group {
    uint32_t begin, end;  // instructions [begin, end) of the program
    uint32_t tiles;
  };
  struct Member {              // one instruction of a group, per tile
    int32_t rows, cols;        // its shape's rows (a fill's columns) in one tile
    uint32_t step[kPointers];  // each pointer's advance per tile, in elements (0: not moved)
  };

  bool empty() const { return groups_.empty(); }
  void clear() {
    groups_.clear(), member_at_.clear(), members_.clear();
    saved_bytes_ = 0, fused_ = 0;
  }
  size_t groups() const { return groups_.size(); }
  size_t fused_instructions() const { return fused_; }  // members of every group
  size_t saved_bytes() const { return saved_bytes_; }   // of bytes_moved: the internal buffers'

  // Groups `l`'s instructions and shrinks each group's internal buffers to one tile.
  void find(program_ir::Lowered<T>& l, int32_t loss_buffer);

  // Where the code can stop after instruction i: the end of its group, or i + 1 outside one.
  size_t end_after(size_t i) const {
    const size_t g = next_group(i + 1);  // the first group that begins after i
    if (g > 0 && groups_[g - 1].begin <= i && i < groups_[g - 1].end) return groups_[g - 1].end;
    return i + 1;
  }

  // Runs instructions [first, last) of `code`, each group's members tile by tile.
  template <class Instruction>
  void run(const std::vector<Instruction>& code, size_t first, size_t last) const {
    size_t g = next_group(first);
    for (size_t i = first; i < last;) {
      if (g < groups_.size() && groups_[g].begin == i) {
        run_group(code, groups_[g++]);
        i = groups_[g - 1].end;
      } else {
        code[i].run(code[i].args), i++;
      }
    }
  }

 private:
  using Pending = program_ir::Pending<T>;
  using Ref = program_ir::Ref<T>;
  static const Ref* ref_at(const Pending& p, int k) {
    const Ref* refs[kPointers] = {&p.out,   &p.dout,  &p.aux,    &p.scratch, &p.in[0],
                                  &p.in[1], &p.in[2], &p.din[0], &p.din[1],  &p.din[2]};
    return refs[k];
  }
  static T** pointer_at(OpArgs<T>& a, int k) {
    T* const* in = const_cast<T* const*>(a.in);
    T** refs[kPointers] = {&a.out,
                           &a.dout,
                           &a.aux,
                           &a.scratch,
                           const_cast<T**>(&in[0]),
                           const_cast<T**>(&in[1]),
                           const_cast<T**>(&in[2]),
                           &a.din[0],
                           &a.din[1],
                           &a.din[2]};
    return refs[k];
  }
  size_t next_group(size_t first) const {
    size_t g = 0;
    while (g < groups_.size() && groups_[g].begin < first) g++;
    return g;
  }
  template <class Instruction>
  void run_group(const std::vector<Instruction>& code, const Group& group) const {
    const Member* m = &members_[member_at_[&group - groups_.data()]];
    for (uint32_t t = 0; t < group.tiles; t++)
      for (uint32_t i = group.begin; i < group.end; i++) {
        const Member& s = m[i - group.begin];
        OpArgs<T> a = code[i].args;
        a.rows = s.rows, a.cols = s.cols;
        for (int k = 0; k < kPointers; k++)
          if (T** p = pointer_at(a, k); *p && s.step[k]) *p += size_t(t) * s.step[k];
        code[i].run(a);
      }
  }

  // An instruction's view for grouping: its rows, each pointer's elements and whether it moves
  // with the rows (else it is read whole, a broadcast row), or not fusable at all.
  struct Shape {
    bool fusable = false, elementwise = false;
    int64_t rows = 0;
    int64_t elems[kPointers] = {};
    bool by_rows[kPointers] = {};
  };
  static Shape shape_of(const Pending& p, const std::vector<program_ir::Buffer>& buffers);

  std::vector<Group> groups_;
  std::vector<size_t> member_at_;  // per group: its first in members_
  std::vector<Member> members_;
  size_t saved_bytes_ = 0, fused_ = 0;
};

template <class T>
auto Fusion<T>::shape_of(const Pending& p, const std::vector<program_ir::Buffer>& buffers)
    -> Shape {
  Shape s;
  const program_ir::OpShape& a = p.args;
  const bool fill = p.run == program_kernels::zero_fill<T>;
  if (!fill) {
    if (p.op == TensorOp::count) return s;  // the loss's seed
    const OpRule<T>& rule = op_rules<T>()[int(p.op)];
    if (!(rule.elementwise || rule.row_wise)) return s;
    if (p.run != (p.backward && !p.recompute ? rule.backward : rule.forward)) return s;
    s.elementwise = rule.elementwise;
  } else {
    s.elementwise = true;
  }
  // A fill is one row of `cols`: as many rows of one element each.
  s.rows = fill ? int64_t(a.cols) : int64_t(a.rows);
  if (s.rows < 1) return s;
  const int64_t out = int64_t(a.rows) * a.cols;
  for (int k = 0; k < kPointers; k++) {
    const Ref& r = *ref_at(p, k);
    if (!r.present()) continue;
    if (k == 3) continue;  // scratch: a workspace, the same for every tile
    int64_t elems = out;
    bool by_rows = true;
    if (k == 2) {
      elems = int64_t(buffers[r.buffer].elems);
      by_rows = elems % s.rows == 0;
      if (!by_rows) return s;
    } else if (k >= 4) {
      const int j = (k - 4) % 3;
      elems = int64_t(a.in_rows[j]) * a.in_cols[j];
      by_rows = a.in_rows[j] == a.rows || fill;
      if (!by_rows && (a.in_rows[j] != 1 || k >= 7)) return s;  // broadcast with a gradient
    }
    s.elems[k] = elems, s.by_rows[k] = by_rows;
  }
  s.fusable = true;
  return s;
}

template <class T>
void Fusion<T>::find(program_ir::Lowered<T>& l, int32_t loss_buffer) {
  clear();
  const uint32_t n = uint32_t(l.code.size());
  const int32_t loss = program_ir::find(l.buffers, loss_buffer);
  // A memory location's key: its root buffer, or an outside index (negative).
  auto key_of = [&](const Ref& r) {
    return r.buffer >= 0 ? int64_t(program_ir::find(l.buffers, r.buffer)) : -2 - int64_t(r.outside);
  };
  auto writes = [](int k) { return k <= 3 || k >= 7; };

  // The tiles for members [begin, end): T dividing every member's rows, every elementwise
  // operand's tile a multiple of kAlignElems, the largest operand's tile nearest sizes.tile (not
  // under an eighth of it); 0: none. `whole`: the group as it is closed, at least sizes.least.
  // Shapes are kept for the group being formed only: an unrolled RNN has 10^5 instructions.
  auto tiles_for = [&](const std::vector<Shape>& shapes, bool whole) -> uint32_t {
    int64_t g = 0, most = 0;
    for (const Shape& s : shapes) {
      g = std::gcd(g, s.rows);
      for (int k = 0; k < kPointers; k++) most = std::max(most, s.elems[k]);
    }
    const FusionSizes& sizes = fusion_sizes();
    if (whole && most < int64_t(sizes.least)) return 0;
    if (!whole) return g >= 2 ? 1 : 0;  // some common divisor may yet serve
    uint32_t best = 0;
    double best_distance = 1e300;
    for (int64_t t = 2; t <= g && t <= most / std::max<int64_t>(1, int64_t(sizes.tile / 8)); t++) {
      if (g % t) continue;
      bool aligned = true;
      for (const Shape& s : shapes)
        for (int k = 0; k < kPointers; k++)
          if (s.elems[k] && s.by_rows[k] && s.elementwise &&
              (s.elems[k] / t) % int64_t(kAlignElems))
            aligned = false;
      if (!aligned) continue;
      const double distance = std::abs(std::log(double(most) / double(t) / double(sizes.tile)));
      if (distance < best_distance) best_distance = distance, best = uint32_t(t);
    }
    return best;
  };

  // Spans of consecutive fusable instructions of one phase, each op (after the first) reading what
  // an earlier one wrote, none writing what another reads whole or reading whole what one wrote.
  std::vector<std::pair<uint32_t, uint32_t>> spans;
  std::unordered_set<int64_t> written, read_whole;
  std::vector<Shape> members;  // of the group being formed
  uint32_t begin = 0, ops = 0;
  bool open = false;
  auto close = [&](uint32_t end) {
    if (open && ops >= 2) spans.push_back({begin, end});
    written.clear(), read_whole.clear(), members.clear(), ops = 0, open = false;
  };
  for (uint32_t i = 0; i < n; i++) {
    const Pending& p = l.code[i];
    const Shape s = shape_of(p, l.buffers);
    const bool fill = p.run == program_kernels::zero_fill<T>;
    bool joins = open && s.fusable && (begin < l.forward_end) == (i < l.forward_end);
    if (joins && !fill) {
      bool connected = ops == 0;
      for (int k = 0; k < kPointers && joins; k++) {
        const Ref& r = *ref_at(p, k);
        if (k == 3 || !r.present()) continue;
        const int64_t key = key_of(r);
        connected |= written.count(key) > 0;
        if (writes(k) && read_whole.count(key)) joins = false;
        if (!s.by_rows[k] && written.count(key)) joins = false;
      }
      members.push_back(s);
      joins = joins && connected && tiles_for(members, false) > 0;
      members.pop_back();
    }
    if (!joins) {
      close(i);
      if (!s.fusable) continue;
      begin = i, open = true;
    }
    for (int k = 0; k < kPointers; k++) {
      const Ref& r = *ref_at(p, k);
      if (k == 3 || !r.present()) continue;
      if (writes(k)) written.insert(key_of(r));
      if (!s.by_rows[k]) read_whole.insert(key_of(r));
    }
    members.push_back(s);
    ops += !fill;
  }
  close(n);

  // Each span's tiles; its fills before its first op are left out (their buffers are planned
  // whole: a fill of a buffer the group does not read first gains nothing).
  for (auto [b, e] : spans) {
    while (b < e && l.code[b].run == program_kernels::zero_fill<T>) {
      // keep a fill whose buffer the group's first op uses
      bool used = false;
      for (uint32_t i = b + 1; i < e && !used; i++)
        program_ir::for_each_ref(l.code[i], [&](const Ref& r) {
          used |= r.buffer >= 0 && program_ir::find(l.buffers, r.buffer) ==
                                       program_ir::find(l.buffers, l.code[b].out.buffer);
        });
      if (used) break;
      b++;
    }
    std::vector<Shape> shapes(e - b);
    for (uint32_t i = b; i < e; i++) shapes[i - b] = shape_of(l.code[i], l.buffers);
    const uint32_t tiles = tiles_for(shapes, true);
    if (!tiles) continue;
    member_at_.push_back(members_.size());
    groups_.push_back({b, e, tiles});
    fused_ += e - b;
    // Internal buffers: touched inside the group alone, by rows, aligned, not the loss.
    std::unordered_set<int32_t> internal, not_internal;
    for (uint32_t i = b; i < e; i++)
      for (int k = 0; k < kPointers; k++) {
        const Ref& r = *ref_at(l.code[i], k);
        if (r.buffer < 0) continue;
        const int32_t root = program_ir::find(l.buffers, r.buffer);
        const bool ok = k != 3 && shapes[i - b].by_rows[k] && l.first[root] >= int32_t(b) &&
                        l.last[root] < int32_t(e) && root != loss &&
                        (l.buffers[root].elems / tiles) % kAlignElems == 0 &&
                        l.buffers[root].elems % tiles == 0;
        (ok ? internal : not_internal).insert(root);
      }
    for (int32_t root : not_internal) internal.erase(root);
    for (uint32_t i = b; i < e; i++) {
      const Pending& p = l.code[i];
      const Shape& s = shapes[i - b];
      const bool fill = p.run == program_kernels::zero_fill<T>;
      Member m{
          fill ? 1 : int32_t(s.rows / tiles), fill ? int32_t(s.rows / tiles) : p.args.cols, {}};
      for (int k = 0; k < kPointers; k++) {
        const Ref& r = *ref_at(p, k);
        if (!s.elems[k] || !s.by_rows[k]) continue;
        const bool inside = r.buffer >= 0 && internal.count(program_ir::find(l.buffers, r.buffer));
        if (inside)
          saved_bytes_ +=
              size_t(s.elems[k]) * sizeof(T) * ((k >= 7 && !(p.args.fresh >> (k - 7) & 1)) ? 2 : 1);
        m.step[k] = inside ? 0 : uint32_t(s.elems[k] / tiles);
      }
      members_.push_back(m);
    }
    for (int32_t root : internal) l.buffers[root].elems /= tiles;
    // Tile by tile, every buffer the group touches is in use from its first member to its last:
    // one that would have died at the first may not lend its bytes to one born at the last.
    for (uint32_t i = b; i < e; i++)
      program_ir::for_each_ref(l.code[i], [&](const Ref& r) {
        if (r.buffer < 0) return;
        const int32_t root = program_ir::find(l.buffers, r.buffer);
        l.first[root] = std::min(l.first[root], int32_t(b));
        l.last[root] = std::max(l.last[root], int32_t(e) - 1);
      });
  }
}

}  // namespace bp
