// baselines/adolc/backend.h: ADOL-C (Debian libadolc-dev 2.7.2) as a ScalarBackend
// (workloads/backend.h), used as its manual and GradBench's adol-c tool use it: the step is taped
// between trace_on and trace_off, parameters declared with `<<=` and the result with `>>=`, and
// the gradient is ADOL-C's driver `gradient()` (a forward sweep over the tape keeping its values,
// then a first-order reverse sweep).
//
// Two ways, our compiled and eager modes' counterparts:
//  - tape once (the default): the first step is taped; every later step replays the tape from the
//    same parameters without the workload's code (ReplaysScalarSteps), as GradBench times it;
//  - --taping=every_step: every step is taped anew, then differentiated.
// A value is an adouble that the backend keeps (a deque: its elements never move, and copying an
// adouble would tape an assignment); a Scalar names one. Parameters are the first of them, so
// that a new tape declares the same locations independent again.
// The tape's buffers are sized for the whole tape in memory: ADOL-C writes a tape that outgrows
// them to files in the working directory, which the backend refuses with one line instead.
#pragma once

#include <adolc/adouble.h>
#include <adolc/drivers/drivers.h>
#include <adolc/interfaces.h>
#include <adolc/taping.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "workloads/backend.h"

namespace bp {

// ADOL-C's elementary functions are found by argument-dependent lookup, which the backend's own
// members of the same names would hide.
inline adub adolc_pow(const badouble& x, double k) { return pow(x, k); }
inline adub adolc_tanh(const badouble& x) { return tanh(x); }
inline adub adolc_exp(const badouble& x) { return exp(x); }
inline adub adolc_log(const badouble& x) { return log(x); }

class AdolcBackend {
 public:
  static constexpr std::string_view name = "adolc";
  static constexpr Implements implements = Implements::scalar_graphs;

  struct Scalar {
    AdolcBackend* be = nullptr;
    uint32_t at = 0;
    const adouble& a() const { return be->values_[at]; }
    friend Scalar operator+(Scalar x, Scalar y) { return x.be->keep(x.a() + y.a()); }
    friend Scalar operator-(Scalar x, Scalar y) { return x.be->keep(x.a() - y.a()); }
    friend Scalar operator*(Scalar x, Scalar y) { return x.be->keep(x.a() * y.a()); }
    friend Scalar operator/(Scalar x, Scalar y) { return x.be->keep(x.a() / y.a()); }
    friend Scalar operator-(Scalar x) { return x.be->keep(-x.a()); }
    friend Scalar operator+(Scalar x, double c) { return x.be->keep(x.a() + c); }
    friend Scalar operator+(double c, Scalar x) { return x.be->keep(c + x.a()); }
    friend Scalar operator-(Scalar x, double c) { return x.be->keep(x.a() - c); }
    friend Scalar operator-(double c, Scalar x) { return x.be->keep(c - x.a()); }
    friend Scalar operator*(Scalar x, double c) { return x.be->keep(x.a() * c); }
    friend Scalar operator*(double c, Scalar x) { return x.be->keep(c * x.a()); }
    friend Scalar operator/(Scalar x, double c) { return x.be->keep(x.a() / c); }
    friend Scalar operator/(double c, Scalar x) { return x.be->keep(c / x.a()); }
  };

  AdolcBackend() : tag_(next_tag_++) {}
  ~AdolcBackend() {
    if (taping_ == this) trace_off(), taping_ = nullptr;
    if (tape_started_) removeTape(tag_, ADOLC_REMOVE_FROM_CORE);  // ADOL-C keeps every tape
  }
  AdolcBackend(const AdolcBackend&) = delete;  // Scalars point here
  AdolcBackend& operator=(const AdolcBackend&) = delete;

  // --taping=every_step (apps/bench_adolc.cc).
  bool tape_every_step = false;
  // The first tape's buffers, in operations (later tapes are sized by the last one's counts).
  size_t first_tape_entries = size_t(1) << 26;

  Scalar param(double v) {
    if (values_.size() != params_.size())
      throw std::logic_error("adolc: param() after ops of a step; create every parameter first");
    if (!taping_) start_tape();
    values_.emplace_back();
    values_.back() <<= v;
    params_.push_back(v);
    return {this, uint32_t(values_.size() - 1)};
  }
  Scalar pow(Scalar x, double k) { return keep(adolc_pow(x.a(), k)); }
  Scalar relu(Scalar x) {
    adouble out, zero = 0.0;
    condassign(out, x.a(), x.a(), zero);  // x > 0 ? x : 0
    return keep_copy(out);
  }
  Scalar tanh(Scalar x) { return keep(adolc_tanh(x.a())); }
  Scalar exp(Scalar x) { return keep(adolc_exp(x.a())); }
  Scalar log(Scalar x) { return keep(adolc_log(x.a())); }

  void backward(Scalar root) {
    if (taping_ != this) throw std::logic_error("adolc: backward() with no step taped");
    double y = 0;
    values_[root.at] >>= y;
    trace_off();
    taping_ = nullptr;
    refuse_files();
    grads_.assign(params_.size(), 0.0);
    value_ = differentiate(grads_.data());
    taped_once_ = true;
  }
  double value(Scalar x) const {
    if (taping_ == this) return values_[x.at].getValue();  // a value read while taping
    return value_;                                         // after backward: the root's
  }
  double grad(Scalar x) {
    if (x.at >= params_.size()) return 0.0;  // not a parameter: no gradient of its own
    if (!replay_ready_) grad_reads_.push_back(x.at);
    return grads_[x.at];
  }
  void reset() {
    values_.resize(params_.size());  // every value but the parameters
    if (taped_once_ && !tape_every_step) replay_ready_ = true;
    if (tape_every_step) start_tape();  // the next step is taped anew
  }

  // Tape once: later steps replay the tape (workloads/backend.h, ReplaysScalarSteps).
  bool can_replay_scalar_step() const { return replay_ready_; }
  double replay_scalar_step(std::span<double> grads) {
    const double y = differentiate(grads_.data());
    for (size_t i = 0; i < grads.size(); i++) grads[i] = grads_[grad_reads_[i]];
    return y;
  }

  size_t tape_operations() const { return operations_; }

  // A new value of the step (what every op of Scalar returns).
  Scalar keep(const adub& value) {
    values_.emplace_back(value);  // takes the location over: nothing more is taped
    return {this, uint32_t(values_.size() - 1)};
  }

 private:
  // ADOL-C keeps one tape being recorded per process: the backend recording now.
  static inline AdolcBackend* taping_ = nullptr;
  static inline short next_tag_ = 1;

  Scalar keep_copy(const adouble& value) {
    values_.emplace_back(value);
    return {this, uint32_t(values_.size() - 1)};
  }

  // Buffers for the whole tape in memory: the last tape's counts with room to spare, or before
  // any, first_tape_entries (untouched pages cost no resident memory), within the process's
  // address-space limit if it has one. An operation takes up to 3 locations (4 with room).
  void start_tape() {
    if (taping_ && taping_ != this)
      throw std::logic_error("adolc: two backends taping at once (ADOL-C records one tape)");
    size_t entries = first_tape_entries;
    if (operations_) entries = std::max<size_t>(2 * tape_entries_, 4096);
    rlimit limit{};
    if (getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY)
      entries = std::min<size_t>(entries, limit.rlim_cur / 64);  // 33 bytes an entry
    const unsigned small = unsigned(std::min<size_t>(entries, 0xffffffffu));
    const unsigned locations = unsigned(std::min<size_t>(4 * entries, 0xffffffffu));
    // Taylors are not kept while taping (keep 0): the gradient's own forward sweep keeps them,
    // and a tape too long to keep would write them to a file before it could be refused.
    trace_on(tag_, 0, small, locations, small, small);
    tape_started_ = true;
    taping_ = this;
    for (size_t i = 0; i < params_.size(); i++) values_[i] <<= params_[i];
  }
  void refuse_files() {
    size_t stats[STAT_SIZE];
    tapestats(tag_, stats);
    operations_ = stats[NUM_OPERATIONS];
    tape_entries_ = std::max(
        {stats[NUM_OPERATIONS], stats[NUM_LOCATIONS], stats[NUM_VALUES], stats[TAY_STACK_SIZE]});
    if (stats[OP_FILE_ACCESS] || stats[LOC_FILE_ACCESS] || stats[VAL_FILE_ACCESS] ||
        stats[TAY_STACK_SIZE] > stats[TAY_BUFFER_SIZE]) {
      removeTape(tag_, ADOLC_REMOVE_COMPLETELY);  // its files too
      throw std::runtime_error("adolc: a tape of " + std::to_string(operations_) +
                               " operations outgrew its in-memory buffers of " +
                               std::to_string(stats[OP_BUFFER_SIZE]) +
                               " (ADOL-C would write it to files)");
    }
  }
  // ADOL-C's gradient(): a zero-order forward sweep keeping its values, then a first-order
  // reverse sweep; written out to return the value as well. Returns the root's value.
  double differentiate(double* g) {
    double y = 0, one = 1.0;
    const int n = int(params_.size());
    if (zos_forward(tag_, 1, n, 1, params_.data(), &y) < 0 || fos_reverse(tag_, 1, n, &one, g) < 0)
      throw std::runtime_error("adolc: the tape cannot be evaluated at these parameters");
    return y;
  }

  short tag_;
  std::deque<adouble> values_;  // the parameters, then the step's values
  std::vector<double> params_, grads_;
  std::vector<uint32_t> grad_reads_;  // the parameters finish_step read, in its order
  double value_ = 0;
  size_t operations_ = 0, tape_entries_ = 0;
  bool tape_started_ = false, taped_once_ = false, replay_ready_ = false;
};

static_assert(ScalarBackend<AdolcBackend>);
static_assert(ReplaysScalarSteps<AdolcBackend>);

}  // namespace bp
