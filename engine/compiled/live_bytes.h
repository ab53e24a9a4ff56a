// engine/compiled/live_bytes.h: the bytes a lowered program holds at each instruction, as a model
// that dropping one more activation for recomputation updates in a few range additions.
//
// Under a memory budget, choosing what to recompute by lowering the whole program for every
// candidate, every round, is candidates^2 x program: an unrolled RNN's compile ran for minutes.
// This model starts from the program lowered with nothing recomputed and follows each buffer the
// emitter made (a raw buffer, before ops in place merge them) as one or two intervals of
// instructions:
//  - kept: [first touch, last touch], stretched to the last recomputation that reads it;
//  - dropped (its node recomputed): [first touch, last forward touch], and its copy
//    [recomputation point, last touch]. The point is the first backward read of the node's
//    outputs, or earlier where a dropped consumer's recomputation needs it first (as
//    Program::lower places them);
//  - an op in place shares its operand's bytes at the instruction that writes it, while the
//    operand ends there; a recomputation that reads the operand later breaks the pair (as the
//    lowering would no longer merge them).
// Live bytes per instruction are a segment tree (range add, global max), so a drop and its undo
// cost O(reads x log program). Recomputations are counted at the instruction they precede, and a
// merge that dropping would newly allow is not found: the model may hold a little more than the
// lowering; the plan's own retry loop (Program::compile) makes up the rest. Its start is exact
// (the lowering's own lower bound), checked on every budgeted compile (choose_under_budget): the
// budget tests of compiled_test.cc and fusion_test.cc run it on mini_gpt, mini_gpt_wide,
// lstm_tensor, gmm_d10_tensor and char_rnn.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/compiled/lowered.h"

namespace bp::program_ir {

// Range add over [0, n), the maximum over all of it, the value at one point. Depth log2(n).
class MaxTree {
 public:
  explicit MaxTree(int32_t n) : n_(std::max(n, 1)), max_(4 * size_t(n_), 0), add_(max_.size(), 0) {}
  void add(int32_t lo, int32_t hi, int64_t v) {  // inclusive
    if (lo <= hi) add(1, 0, n_ - 1, lo, hi, v);
  }
  int64_t max() const { return max_[1]; }
  int64_t at(int32_t t) const {
    int64_t v = 0;
    for (size_t node = 1, lo = 0, hi = size_t(n_) - 1;;) {
      v += add_[node];
      if (lo == hi) return v;
      const size_t mid = (lo + hi) / 2;
      if (size_t(t) <= mid)
        node = 2 * node, hi = mid;
      else
        node = 2 * node + 1, lo = mid + 1;
    }
  }
  // An instruction holding the maximum (the leftmost).
  int32_t argmax() const {
    size_t node = 1, lo = 0, hi = size_t(n_) - 1;
    int64_t below = max_[1];
    while (lo < hi) {
      below -= add_[node];
      const size_t mid = (lo + hi) / 2;
      if (max_[2 * node] == below)
        node = 2 * node, hi = mid;
      else
        node = 2 * node + 1, lo = mid + 1;
    }
    return int32_t(lo);
  }

 private:
  void add(size_t node, int32_t lo, int32_t hi, int32_t l, int32_t r, int64_t v) {
    if (l <= lo && hi <= r) {
      max_[node] += v, add_[node] += v;
      return;
    }
    const int32_t mid = (lo + hi) / 2;
    if (l <= mid) add(2 * node, lo, mid, l, r, v);
    if (r > mid) add(2 * node + 1, mid + 1, hi, l, r, v);
    max_[node] = std::max(max_[2 * node], max_[2 * node + 1]) + add_[node];
  }
  int32_t n_;
  std::vector<int64_t> max_, add_;
};

template <class T>
class LiveBytes {
 public:
  // `l0`: e lowered with nothing recomputed; `first_node`: the program's first node (after the
  // parameters), by which e's per-node vectors are indexed.
  LiveBytes(const Emitted<T>& e, const Lowered<T>& l0, uint32_t first_node);

  size_t peak() const { return size_t(tree_.max()); }
  int64_t sum() const { return sum_; }  // live bytes summed over every instruction
  int32_t peak_at() const { return tree_.argmax(); }
  size_t bytes_at(int32_t t) const { return size_t(tree_.at(t)); }
  bool dropped(uint32_t node) const { return nodes_[node - first_node_].dropped; }

  void drop(uint32_t node);  // and every pull it causes; undone by undo() up to the last keep()
  void keep() { log_.clear(); }
  void undo();

 private:
  struct Raw {         // a buffer as emitted
    size_t bytes = 0;  // aligned as planned
    int32_t first = -1, last = -1, last_forward = -1, first_backward = -1;
    int32_t pred = -1, succ = -1;  // in place: the operand it writes over, what writes over it
    int32_t owner = -1;            // the candidate whose forward writes it (out, aux, scratch)
    int32_t stretch = -1;          // the last recomputation reading it
  };
  struct Node {
    int32_t at = -1;    // its forward in l0
    int32_t point = 0;  // where its recomputation runs, if dropped
    bool dropped = false;
  };
  struct Undo {
    int32_t index;  // a raw buffer (stretch) or, if is_node, a node (dropped, point)
    bool is_node, dropped;
    int32_t value;
  };

  int32_t end_of(const Raw& b) const {
    return b.owner >= 0 && nodes_[b.owner].dropped ? b.last_forward : std::max(b.last, b.stretch);
  }
  // Adds (sign +1) or removes (-1) buffer b's intervals.
  void count(int32_t b, int64_t sign);
  // Buffers whose intervals a change to node n (or to raw b) moves: its own and what is in place
  // over them.
  void affected_by_node(int32_t n, std::vector<int32_t>& out) const;
  void set_node(int32_t n, bool dropped, int32_t point, bool log);
  void set_stretch(int32_t b, int32_t stretch, bool log);
  template <class F>
  void for_each_input(int32_t n, F&& f) const {
    const Pending<T>& p = code_[nodes_[n].at];
    for (int k = 0; k < 3; k++)
      if (p.in[k].buffer >= 0) f(p.in[k].buffer);
  }

  const std::vector<Pending<T>>& code_;
  uint32_t first_node_;
  std::vector<Raw> raw_;
  std::vector<Node> nodes_;                      // node - first_node
  std::vector<int32_t> reader_begin_, readers_;  // per raw: candidates whose forward reads it
  MaxTree tree_;
  int64_t sum_ = 0;
  std::vector<Undo> log_;
  std::vector<int32_t> scratch_list_;
};

template <class T>
LiveBytes<T>::LiveBytes(const Emitted<T>& e, const Lowered<T>& l0, uint32_t first_node)
    : code_(l0.code),
      first_node_(first_node),
      raw_(l0.buffers.size()),
      nodes_(e.cost.size()),
      tree_(int32_t(l0.code.size())) {
  const int32_t n = int32_t(l0.code.size()), forward_end = int32_t(l0.forward_end);
  for (size_t b = 0; b < raw_.size(); b++)
    raw_[b].bytes = plan_aligned(l0.buffers[b].elems * sizeof(T));
  for (int32_t t = 0; t < n; t++)
    for_each_ref(l0.code[t], [&](const Ref<T>& r) {
      if (r.buffer < 0) return;
      Raw& b = raw_[size_t(r.buffer)];
      if (b.first < 0) b.first = t;
      b.last = t;
      if (t < forward_end) b.last_forward = t;
      if (t >= forward_end && b.first_backward < 0) b.first_backward = t;
    });
  raw_[size_t(e.loss_buffer)].last = n - 1;  // read after the step
  // In place: an elementwise forward whose output was merged into an operand's buffer.
  for (int32_t b = 0; b < int32_t(raw_.size()); b++) {
    if (l0.buffers[b].parent < 0 || raw_[b].first < 0) continue;
    const Pending<T>& p = l0.code[raw_[b].first];
    for (int k = 0; k < 3; k++)
      if (const int32_t in = p.in[k].buffer; in >= 0 && raw_[in].last == raw_[b].first &&
                                             find(l0.buffers, in) == l0.buffers[b].parent) {
        raw_[b].pred = in, raw_[in].succ = b;
        break;
      }
  }
  for (uint32_t c : e.candidates) nodes_[c - first_node].at = -2;  // found below
  for (int32_t t = 0; t < forward_end; t++) {
    const Pending<T>& p = l0.code[t];
    if (p.op == TensorOp::count || p.backward || p.node < first_node) continue;
    Node& node = nodes_[p.node - first_node];
    if (node.at != -2) continue;
    node.at = t;
    const int32_t owner = int32_t(p.node - first_node);
    for (int32_t b : {p.out.buffer, p.aux.buffer, p.scratch.buffer})
      if (b >= 0) raw_[b].owner = owner;
  }
  for (Node& node : nodes_)
    if (node.at == -2) node.at = -1;  // no forward of its own (cannot happen; never dropped)
  // Forward readers by raw buffer, as a compressed list.
  reader_begin_.assign(raw_.size() + 1, 0);
  for (int32_t c = 0; c < int32_t(nodes_.size()); c++)
    if (nodes_[c].at >= 0) for_each_input(c, [&](int32_t b) { reader_begin_[b + 1]++; });
  for (size_t b = 0; b < raw_.size(); b++) reader_begin_[b + 1] += reader_begin_[b];
  readers_.resize(size_t(reader_begin_.back()));
  std::vector<int32_t> fill(reader_begin_.begin(), reader_begin_.end() - 1);
  for (int32_t c = 0; c < int32_t(nodes_.size()); c++)
    if (nodes_[c].at >= 0) for_each_input(c, [&](int32_t b) { readers_[fill[b]++] = c; });
  for (int32_t b = 0; b < int32_t(raw_.size()); b++) count(b, +1);
}

template <class T>
void LiveBytes<T>::count(int32_t b, int64_t sign) {
  const Raw& r = raw_[b];
  if (r.first < 0) return;
  const int64_t bytes = sign * int64_t(r.bytes);
  auto add = [&](int32_t lo, int32_t hi) {
    if (lo > hi) return;
    tree_.add(lo, hi, bytes);
    sum_ += bytes * (hi - lo + 1);
  };
  const int32_t start = r.first + (r.pred >= 0 && end_of(raw_[r.pred]) == r.first);
  if (r.owner >= 0 && nodes_[r.owner].dropped) {
    const int32_t point = nodes_[r.owner].point;
    add(start, r.last_forward);
    add(point, std::max({r.last, r.stretch, point}));
  } else {
    add(start, std::max(r.last, r.stretch));
  }
}

template <class T>
void LiveBytes<T>::affected_by_node(int32_t n, std::vector<int32_t>& out) const {
  out.clear();
  const Pending<T>& p = code_[nodes_[n].at];
  for (int32_t b : {p.out.buffer, p.aux.buffer, p.scratch.buffer}) {
    if (b < 0 || std::find(out.begin(), out.end(), b) != out.end()) continue;
    out.push_back(b);
    if (raw_[b].succ >= 0) out.push_back(raw_[b].succ);
  }
}

template <class T>
void LiveBytes<T>::set_node(int32_t n, bool dropped, int32_t point, bool log) {
  if (log) log_.push_back({n, true, nodes_[n].dropped, nodes_[n].point});
  affected_by_node(n, scratch_list_);
  for (int32_t b : scratch_list_) count(b, -1);
  nodes_[n].dropped = dropped, nodes_[n].point = point;
  for (int32_t b : scratch_list_) count(b, +1);
}

template <class T>
void LiveBytes<T>::set_stretch(int32_t b, int32_t stretch, bool log) {
  if (log) log_.push_back({b, false, false, raw_[b].stretch});
  const int32_t succ = raw_[b].succ;
  count(b, -1);
  if (succ >= 0) count(succ, -1);
  raw_[b].stretch = stretch;
  count(b, +1);
  if (succ >= 0) count(succ, +1);
}

template <class T>
void LiveBytes<T>::drop(uint32_t node) {
  const int32_t n = int32_t(node - first_node_);
  if (nodes_[n].at < 0 || nodes_[n].dropped) return;
  // Its recomputation runs before the first backward read of its outputs, or before a dropped
  // consumer's recomputation, whichever is first.
  const Pending<T>& p = code_[nodes_[n].at];
  int32_t point = int32_t(code_.size()) - 1;
  for (int32_t b : {p.out.buffer, p.aux.buffer}) {
    if (b < 0) continue;
    if (raw_[b].first_backward >= 0) point = std::min(point, raw_[b].first_backward);
    for (int32_t i = reader_begin_[b]; i < reader_begin_[b + 1]; i++)
      if (nodes_[readers_[i]].dropped) point = std::min(point, nodes_[readers_[i]].point);
  }
  set_node(n, true, point, true);
  // Its inputs are read at the point: kept ones live until then, dropped ones are recomputed by
  // then (which moves their own inputs' reads earlier: a walk with a stack, not recursion).
  std::vector<int32_t> stack{n};
  while (!stack.empty()) {
    const int32_t x = stack.back();
    stack.pop_back();
    const int32_t at = nodes_[x].point;
    for_each_input(x, [&](int32_t b) {
      if (raw_[b].stretch < at) set_stretch(b, at, true);
      const int32_t owner = raw_[b].owner;
      if (owner >= 0 && nodes_[owner].dropped && nodes_[owner].point > at) {
        set_node(owner, true, at, true);
        stack.push_back(owner);
      }
    });
  }
}

template <class T>
void LiveBytes<T>::undo() {
  while (!log_.empty()) {
    const Undo u = log_.back();
    log_.pop_back();
    if (u.is_node)
      set_node(u.index, u.dropped, u.value, false);
    else
      set_stretch(u.index, u.value, false);
  }
}

}  // namespace bp::program_ir
