// engine/checkpoint/checkpoint.h: backpropagation through time in bounded memory, for a chain of
// steps state_0 -> state_1 -> ... -> state_n (a recurrent model over a sequence of length n).
//
// Three strategies, each a variant of our engine's results (`--strategy`):
//  - store_all: every state and activation kept, autograd over the unrolled sequence (the engine's
//    plain mode; not here).
//  - revolve: Revolve's schedule (engine/checkpoint/revolve.h) with c snapshots in memory: t(n, c)
//  steps
//    advanced, the least possible with c snapshots, growing like r n with r ~ n^(1/c).
//  - multistage (Kukreja, Hückelheim and Gorman, arXiv 1806.01117): the forward sweep hands every
//    k-th state to a writer thread that stores it in a file while the computation goes on; the
//    reverse sweep goes interval by interval from the last, a reader thread fetching the previous
//    interval's checkpoint while this one is reversed by Revolve with c snapshots. The extra work
//    per step is bounded by k and c, not by n; memory is c + 5 states and four file records at
//    any n. k is measured (write time against step time) or given; the forward sweep never
//    needs n.
//
// A chain is the model's step on some engine (engine/backend.h's runs a recurrent workload's cell
// on its graph):
//   size_t state_size() const;                                      floats per state
//   void initial_state(float* h);
//   void advance(int64_t t, const float* h, float* next);           step t without a tape
//   double reverse(int64_t t, const float* h, float* dstate);       step t with its tape, then its
//       backward: dstate holds dL/d state_{t+1} on entry and dL/d state_t on return; the step's
//       parameter gradients are added; returns the step's term of the loss.
// Every step is reversed once, in the order store-all reverses them, from bitwise the same state:
// the gradients are bitwise those of store-all (engine/checkpoint/checkpoint_test.cc checks it).
//
// Counters of the last sequence (BpttStats) go into the results: steps advanced, most snapshots
// alive, bytes written and read, seconds the computation waited on the writer or the reader.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/checkpoint/io.h"
#include "engine/checkpoint/revolve.h"

namespace bp {

enum class Bptt { store_all, revolve, multistage };
inline constexpr const char* bptt_names[] = {"store_all", "revolve", "multistage"};

struct BpttConfig {
  Bptt strategy = Bptt::store_all;
  int32_t snapshots = 8;  // c: in-memory snapshots (revolve; multistage within an interval)
  int64_t interval = 0;   // k (multistage): a checkpoint every k states; 0: from measured times
  std::string directory = "/var/tmp";  // multistage: where the checkpoint file goes
};

// What the last sequence did.
struct BpttStats {
  int64_t steps = 0, advanced = 0, most_snapshots = 0, interval = 0;
  double advance_seconds = 0, reverse_seconds = 0;
  double sweep_seconds = 0;  // one untaped forward sweep of n steps, timed apart
  int64_t records = 0, bytes_written = 0, bytes_read = 0;
  double write_wait_seconds = 0, read_wait_seconds = 0;
  // multistage's choice of k: one record's write and one untaped step, measured once
  double write_seconds = 0, step_seconds = 0;
};

// The states Revolve keeps: c snapshots, two to advance between, the gradient carried back.
struct RevolveWorkspace {
  std::vector<float> slots, work, dstate;  // (c, S), (2, S), (S): S floats a state
  size_t floats = 0;                       // S
  void size_for(size_t state_floats, int32_t c) {
    floats = state_floats;
    slots.assign(size_t(c) * floats, 0.f);
    work.assign(2 * floats, 0.f);
    dstate.assign(floats, 0.f);
  }
  float* slot(int32_t i) { return slots.data() + size_t(i) * floats; }
};

// Reverses steps [first, first + n) of the chain with c snapshots, from `start` (state `first`,
// read until this returns); ws.dstate holds dL/d state_{first+n} on entry, dL/d state_first on
// return. Returns the sum of the steps' losses, last step first.
template <class Chain>
double revolve_reverse(Chain& chain, int64_t first, int64_t n, int32_t c, const float* start,
                       RevolveWorkspace& ws, BpttStats& st) {
  using Clock = std::chrono::steady_clock;
  revolve::Schedule schedule(n, c);
  const size_t bytes = ws.floats * sizeof(float);
  const float* at = start;  // the state in memory: state `at_step` (relative to first)
  int64_t at_step = 0;
  int alive = 0, next_work = 0;
  double loss = 0;
  for (;;) {
    const revolve::Move m = schedule.next();
    switch (m.action) {
      case revolve::Action::store:
        std::memcpy(ws.slot(m.slot), at, bytes);
        st.most_snapshots = std::max<int64_t>(st.most_snapshots, ++alive);
        break;
      case revolve::Action::restore: at = ws.slot(m.slot), at_step = m.step; break;
      case revolve::Action::free: alive--; break;
      case revolve::Action::advance: {
        const auto t0 = Clock::now();
        st.advanced += m.step - at_step;
        for (; at_step < m.step; at_step++) {
          float* next = ws.work.data() + size_t(next_work) * ws.floats;
          next_work ^= 1;
          chain.advance(first + at_step, at, next);
          at = next;
        }
        st.advance_seconds += seconds_since(t0);
        break;
      }
      case revolve::Action::reverse: {
        const auto t0 = Clock::now();
        loss += chain.reverse(first + m.step, at, ws.dstate.data());
        st.reverse_seconds += seconds_since(t0);
        break;
      }
      case revolve::Action::done: return loss;
    }
  }
}

// Runs one strategy of backpropagation through time for a chain, keeping what it needs between
// sequences (snapshots, the checkpoint file and its threads, the chosen k).
class BpttRunner {
 public:
  explicit BpttRunner(BpttConfig config) : cfg_(std::move(config)) {
    if (cfg_.snapshots < 1) usage("--snapshots", std::to_string(cfg_.snapshots), "at least 1");
    if (cfg_.interval < 0)
      usage("--interval", std::to_string(cfg_.interval), "at least 1, or auto");
  }
  const BpttConfig& config() const { return cfg_; }
  const BpttStats& stats() const { return stats_; }
  const char* io_mode() const { return file_ ? file_->io_mode() : ""; }
  const CheckpointFile* file() const { return file_.get(); }
  // Called between the forward and the reverse sweep of multistage (tests change the file here).
  std::function<void()> after_forward;

  // The loss of the sequence of n steps, its gradients added to the chain's parameters.
  template <class Chain>
  double run(Chain& chain, int64_t n) {
    if (n < 1) usage("sequence length", std::to_string(n), "at least 1 step");
    stats_ = BpttStats{};
    stats_.steps = n;
    if (ws_.floats != chain.state_size()) ws_.size_for(chain.state_size(), cfg_.snapshots);
    start_.resize(chain.state_size());
    chain.initial_state(start_.data());
    std::fill(ws_.dstate.begin(), ws_.dstate.end(), 0.f);  // nothing after the last state
    if (sweep_steps_ != n) time_sweep(chain, n);
    stats_.sweep_seconds = sweep_seconds_;
    if (cfg_.strategy == Bptt::revolve)
      return revolve_reverse(chain, 0, n, cfg_.snapshots, start_.data(), ws_, stats_);
    return multistage(chain, n);
  }

 private:
  [[noreturn]] static void usage(const char* flag, const std::string& value, const char* valid) {
    std::fprintf(stderr, "error: %s=%s: need %s\n", flag, value.c_str(), valid);
    std::exit(2);
  }

  // One plain forward sweep of n steps, untaped: what the seconds spent advancing are measured
  // against. Timed once per length (in the first sequence, a warm-up one) as the median of three
  // sweeps of up to 10^5 steps, scaled to n: a step's cost does not depend on n.
  template <class Chain>
  void time_sweep(Chain& chain, int64_t n) {
    const int64_t m = std::min<int64_t>(n, 100000);
    double sweeps[3];
    for (double& seconds : sweeps) {
      const auto t0 = std::chrono::steady_clock::now();
      const float* at = start_.data();
      for (int64_t t = 0; t < m; t++) {
        float* next = ws_.work.data() + size_t(t & 1) * ws_.floats;
        chain.advance(t, at, next);
        at = next;
      }
      seconds = seconds_since(t0) * double(n) / double(m);
    }
    std::sort(sweeps, sweeps + 3);
    sweep_seconds_ = sweeps[1], sweep_steps_ = n;
  }

  template <class Chain>
  double multistage(Chain& chain, int64_t n) {
    const size_t floats = chain.state_size(), bytes = floats * sizeof(float);
    if (!file_) open_file(chain);
    BpttStats& st = stats_;
    st.interval = k_;
    st.write_seconds = write_seconds_, st.step_seconds = step_seconds_;
    st.write_wait_seconds += writer_->restart();
    // Forward: every k-th state to the writer; the last one kept in memory as well, since the
    // reverse sweep starts from it.
    std::vector<float>& tail = tail_;
    tail.resize(floats);
    const float* at = start_.data();
    int64_t records = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t t = 0; t < n; t++) {
      if (t % k_ == 0) {
        st.write_wait_seconds += writer_->put(records++, t, at);
        std::memcpy(tail.data(), at, bytes);
      }
      float* next = ws_.work.data() + size_t(t & 1) * floats;
      chain.advance(t, at, next);
      at = next;
    }
    st.advance_seconds += seconds_since(t0);
    st.advanced += n;
    st.records = records;
    st.bytes_written = records * int64_t(file_->record_bytes());
    if (after_forward) {
      st.write_wait_seconds += writer_->drain();
      after_forward();
    }
    // Reverse: interval j from its checkpoint, the reader fetching interval j - 1's meanwhile.
    double loss = 0;
    for (int64_t j = records - 1; j >= 0; j--) {
      const float* from = tail.data();
      if (j < records - 1) {
        double waited = 0;
        from = reader_->take(j, &waited);
        st.read_wait_seconds += waited;
        st.bytes_read += int64_t(file_->record_bytes());
      }
      if (j > 0) reader_->request(j - 1, (j - 1) * k_);
      const int64_t first = j * k_, length = std::min(n, first + k_) - first;
      loss += revolve_reverse(chain, first, length, cfg_.snapshots, from, ws_, st);
      if (j < records - 1) reader_->release(j);
    }
    return loss;
  }

  // The file, its threads, and k: given, or the smallest whole number of steps that outlasts two
  // record writes, so that the writer is at most half busy and the computation never waits.
  template <class Chain>
  void open_file(Chain& chain) {
    file_ = std::make_unique<CheckpointFile>(cfg_.directory, chain.state_size());
    writer_ = std::make_unique<CheckpointThread>(*file_, 2);
    reader_ = std::make_unique<CheckpointThread>(*file_, 2, writer_.get());
    // One write and one untaped step, each the median of a few (on the state of step 0).
    std::vector<double> writes, steps;
    void* probe = file_->new_buffer();
    std::memcpy(CheckpointFile::state_of(probe), start_.data(), chain.state_size() * 4);
    std::vector<float> next(chain.state_size());
    for (int i = 0; i < 5; i++) {
      auto t0 = std::chrono::steady_clock::now();
      file_->write(i, 0, probe);
      writes.push_back(seconds_since(t0));
      t0 = std::chrono::steady_clock::now();
      for (int s = 0; s < 8; s++) chain.advance(0, start_.data(), next.data());
      steps.push_back(seconds_since(t0) / 8);
    }
    std::free(probe);
    std::sort(writes.begin(), writes.end()), std::sort(steps.begin(), steps.end());
    write_seconds_ = writes[2], step_seconds_ = steps[2];
    k_ = cfg_.interval > 0
             ? cfg_.interval
             : std::max<int64_t>(
                   1, int64_t(std::ceil(2 * write_seconds_ / std::max(step_seconds_, 1e-9))));
  }

  BpttConfig cfg_;
  BpttStats stats_;
  RevolveWorkspace ws_;
  std::vector<float> start_, tail_;
  std::unique_ptr<CheckpointFile> file_;
  std::unique_ptr<CheckpointThread> writer_, reader_;  // reader_ declared last: joined first
  int64_t k_ = 0, sweep_steps_ = 0;
  double write_seconds_ = 0, step_seconds_ = 0, sweep_seconds_ = 0;
};

}  // namespace bp
