// engine/dialects/dialects.h: operator dialects, several kernels per op and the choice among them.
//
// RAF's dialects (arXiv 2303.04759, section 4): every op may have several implementations, each
// with a priority and a rule saying where it can run; the compiler picks one per op before the
// program runs, a dialect can be forced, and nothing falls back silently. Here a Kernel is one
// dialect of one TensorOp: a forward and a backward over the op's OpArgs (the same aux layout and
// backward reads as the op's rule, so the planner's facts hold for every dialect), its scratch,
// whether the build has it, and whether it can run a given shape in T.
//
// Dialects by op family (`--dialect=FAMILY:NAME`):
//   matmul (matmul and linear): engine (register-tiled, engine/kernels/products.h), generated
//       (code made for a small product's shape, the engine's bits: engine/kernels/product_jit.h),
//       reference, openblas, blis, libxsmm, onednn (engine/kernels/library.h): the op's own code
//       around the product.
//   attention, layernorm, softmax, cross_entropy, eltwise (add mul tanh relu gelu exp log):
//       engine (fused and vectorised) and reference (engine/dialects/kernels_reference.h).
// embedding, sum and mean have the engine's kernel only.
//
// Choice per node, by DialectSpec: `priority` takes the highest-priority kernel available (the
// engine's own first, so a priority program is the eager engine's arithmetic, bitwise); `auto`
// times every available candidate but the reference on the node's own shape (forward then
// backward, interleaved rounds, the fastest unless a higher-priority kernel is within 10% of it)
// and keeps the verdict per shape for the rest of the process (so a second setup runs the same
// kernels, bit for bit); a forced FAMILY:NAME takes that kernel or refuses with one line
// (DialectError). Before a program's kernels are chosen, auto weighs each library over the whole
// program (weigh_libraries): one that gains under 2% of the step is left out, so that its
// resident memory is not paid for nothing; and for the compiled backend, whose programs may hold
// no more than the eager tape would, one whose resident memory does not fit what the plan saves
// (keep_libraries_within_saving). Library candidates may be timed in a child process (a program's
// ProcessHooks::run_apart), so that an unchosen library never enters this one. A selector told to
// leave libraries out (a program under a memory budget) chooses only among the kernels that run
// no library's code.
// Tests: engine/dialects/dialects_test.cc.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "engine/dialects/kernels.h"

namespace bp {

// What the selector asks of the process it runs in, which the engine does not do itself (it
// forks nothing and reads nothing of /proc): a program sets these (apps/bench_compiled.cc, from
// harness/common/proc.h). Unset, auto times every kernel in this process and measures no
// library's resident memory (such a library counts as unmeasured, and under the saving rule is
// left out).
struct ProcessHooks {
  size_t (*resident_bytes)() = nullptr;  // this process's resident memory now (VmRSS)
  // Runs `work` in a child process made for it and returns its result, or nothing if the child
  // failed. Set, auto times library candidates in such a child while this process has run no
  // library's code (a library's threads would not survive a fork), so that a library it does not
  // choose never enters this process, and each library's resident memory is measured there.
  std::optional<std::string> (*run_apart)(const std::function<std::string()>& work) = nullptr;
};
inline ProcessHooks& process_hooks() {
  static ProcessHooks hooks;
  return hooks;
}

// Chooses every node's kernel under one spec; auto's measurements are cached per op and shape.
template <class T>
class DialectSelector {
 public:
  // libraries = false: auto and priority leave out the kernels that run a library's code (a
  // forced one is still taken). A program under a memory budget chooses so: an opened library is
  // resident memory outside the plan (dev/notes.md, "Libraries under a memory budget").
  explicit DialectSelector(DialectSpec spec = {}, bool libraries = true)
      : spec_(std::move(spec)), libraries_(libraries) {}
  double seconds_measuring() const { return seconds_measuring_; }  // auto's timing, in all
  // Auto's verdicts are kept for the process (below); this forgets them, so that the next
  // program measures again (time to first step, measured from cold). The shared lines are read
  // again from their start: what other processes measured is not forgotten.
  static void forget_verdicts() { verdicts().clear(), exchange().cursor = 0, sought().clear(); }
  // Forgets every library's resident memory, measured or reported (for the tests).
  static void forget_resident_memory() { resident_here().clear(), resident_reported().clear(); }
  // Where auto's verdicts are shared with other processes (a run's file, kept by the harness:
  // harness/driver/shared_lines.h): `read` gives the lines shared after `cursor` and moves it
  // past them (a cursor of 0: from the first line; only the reader knows what it counts), so a
  // shape with no verdict costs a look at what is new, not a read of every line (dev/notes.md,
  // "Shared verdicts read from where the last read stopped"). `publish` offers one of this
  // process's. Null functions: the process keeps its verdicts to itself.
  using ReadShared = std::function<std::vector<std::string>(size_t& cursor)>;
  using PublishShared = std::function<void(const std::string&)>;
  static void exchange_verdicts(ReadShared read, PublishShared publish) {
    exchange() = {std::move(read), std::move(publish), 0};
    sought().clear();
  }

  // A library is resident memory from its first use (megabytes of code and tables), so auto
  // takes one for a program only if it pays: before the program's kernels are chosen, each
  // library's ops are weighed by what auto measured (the verdicts, or timing now what has none):
  // the seconds they would take on the fastest kernel that runs no library's code, less their own.
  // Under kLibraryGain of the program's timed kernels, the library is left out and its ops take
  // that kernel.
  static constexpr double kLibraryGain = 0.02;
  void weigh_libraries(const std::vector<std::pair<TensorOp, OpArgs<T>>>& nodes);
  // The libraries left out, each with why, for results.
  const std::map<std::string, std::string>& libraries_left_out() const { return excluded_; }

  // A library's resident memory (code, tables, first buffers): VmRSS's growth across its
  // opening and its first run on each shape, where it was timed (this process, the child that
  // timed for it, or another process of the run); nullopt when none has timed it.
  static std::optional<size_t> resident_bytes(const std::string& dialect) {
    if (!resident_reported().count(dialect)) read_shared_verdicts();
    if (auto r = resident_reported().find(dialect); r != resident_reported().end())
      return r->second;
    if (auto r = resident_here().find(dialect); r != resident_here().end()) return r->second;
    return std::nullopt;
  }
  // The compiled mode never holds more than the eager engine would (issue 32): the libraries a
  // program uses may add, in all, no more resident memory than its plan saves over the eager
  // tape. Told so, weigh_libraries leaves out what costs more than the whole tape, and choose()
  // takes a library's verdict without opening it; once the program is planned, keep_what_fits
  // keeps the libraries that gain most while they fit in its saving and opens them. True if it
  // left one out: the program is then made again (the verdicts kept, nothing timed again).
  void keep_libraries_within_saving() { within_saving_ = true; }
  struct LibraryUse {
    TensorOp op;
    OpArgs<T> shape;
    const Kernel<T>* kernel;
  };
  bool keep_what_fits(const std::vector<LibraryUse>& uses, size_t saving) {
    std::vector<std::string> used;
    for (const LibraryUse& u : uses)
      if (u.kernel->library && spec_.forced[size_t(family_of(u.op))].empty() &&
          std::find(used.begin(), used.end(), u.kernel->dialect) == used.end())
        used.push_back(u.kernel->dialect);
    const size_t before = excluded_.size();
    leave_out_what_does_not_fit(used, saving, "the plan saves over the eager tape");
    if (excluded_.size() != before) return true;
    for (const LibraryUse& u : uses)
      if (u.kernel->library && !can_run(*u.kernel, u.shape)) {
        excluded_.emplace(u.kernel->dialect, "cannot run " + shape_text(u.op, u.shape));
        return true;
      }
    return false;
  }

  // `a` carries the node's shapes, arguments and indices (pointers to data are not read).
  KernelChoice<T> choose(TensorOp op, const OpArgs<T>& a);
  // Why `c` is a choice choose() could not have made for `op` on `a` under this spec, empty if it
  // could: a forced dialect, else with timings the near-tie rule's pick among them (or among the
  // kernels that run no library's), else the first kernel in priority order that can run. A plan
  // cache's decisions are checked so (its checksum finds damage, not an edit): nothing is timed
  // and no library is opened.
  std::string why_not_chosen(TensorOp op, const OpArgs<T>& a, const KernelChoice<T>& c) const;

 private:
  // Auto's verdicts shared by the processes of a run: a shape measured by one process (the
  // check, which runs first) is not measured again by the others, whose peak memory then holds
  // only the libraries they use. One line per shape: the key's twelve numbers, the chosen
  // dialect, then dialect=seconds for each candidate timed.
  struct Exchange {
    ReadShared read;
    PublishShared publish;
    size_t cursor = 0;  // where `read` stopped
  };
  static Exchange& exchange() {
    static Exchange e;
    return e;
  }

  // Resident memory per library: measured in this process, and reported by others (a child
  // that timed for it, the run's shared lines). Stored as the largest figure seen.
  static std::map<std::string, size_t>& resident_here() {
    static std::map<std::string, size_t> bytes;
    return bytes;
  }
  static std::map<std::string, size_t>& resident_reported() {
    static std::map<std::string, size_t> bytes;
    return bytes;
  }
  // f(), with what VmRSS grew by charged to k's library when k runs one whose memory no other
  // process reported (the hook reads /proc each time: not once the child has measured it).
  template <class F>
  static auto charge_resident(const Kernel<T>& k, F&& f) {
    size_t (*resident)() = process_hooks().resident_bytes;
    if (!k.library || !resident || resident_reported().count(k.dialect)) return f();
    struct Charge {
      const char* dialect;
      size_t (*resident)();
      size_t before;
      ~Charge() {
        const size_t now = resident();
        if (now > before) resident_here()[dialect] += now - before;
      }
    } charge{k.dialect, resident, resident()};
    return f();
  }
  // Asking a library kernel whether it can run opens its library (charged to it).
  static bool can_run(const Kernel<T>& k, const OpArgs<T>& a) {
    return charge_resident(k, [&] { return k.available(a); });
  }
  void publish_resident() {
    static std::map<std::string, size_t> published;
    for (const auto& [d, b] : resident_here())
      if (!resident_reported().count(d) && published[d] != b) {
        published[d] = b;
        if (exchange().publish) exchange().publish("resident " + d + " " + std::to_string(b));
      }
  }

  static size_t aligned(size_t elems) {  // as the planner places buffers: on whole cache lines
    return (elems * sizeof(T) + 63) / 64 * 64 / sizeof(T);
  }
  static std::string bytes_text(double b) {
    char text[32];
    std::snprintf(text, sizeof text, b >= 1e5 ? "%.1f MB" : "%.1f kB",
                  b >= 1e5 ? b / 1e6 : b / 1e3);
    return text;
  }
  // Most gain first, each library kept while the resident memory of those kept fits `headroom`.
  void leave_out_what_does_not_fit(std::vector<std::string> used, size_t headroom,
                                   const char* what) {
    std::stable_sort(used.begin(), used.end(), [&](const std::string& x, const std::string& y) {
      return gains_[x] > gains_[y];
    });
    size_t taken = 0;
    for (const std::string& d : used) {
      const std::optional<size_t> r = resident_bytes(d);
      if (r && taken + *r <= headroom) {
        taken += *r;
        continue;
      }
      excluded_.emplace(d, r ? bytes_text(double(*r)) + " resident, more than " + what + " (" +
                                   bytes_text(double(headroom - taken)) + ")"
                             : std::string("resident memory not measured"));
    }
  }

  // Times, in a child process, every node of `nodes` that has no verdict and a library among its
  // candidates; the child sends back its verdicts and the libraries' resident memory, one line
  // each (the shared lines' format), which this process takes and shares as its own. A child
  // that fails leaves the timing to this process, with one line.
  void time_in_child(const std::vector<std::pair<TensorOp, OpArgs<T>>>& nodes);

  // A shape at a thread count: the kernels split by threads, and so may their ranking (the pool's
  // Serial scope plans for one thread in a process of several: engine/compiled/backend.h).
  struct Key {
    TensorOp op;
    int32_t rows, cols;
    std::array<int32_t, 3> in_rows, in_cols, arg;
    int32_t threads = 1;
    bool operator<(const Key& o) const {
      return std::tie(op, rows, cols, in_rows, in_cols, arg, threads) <
             std::tie(o.op, o.rows, o.cols, o.in_rows, o.in_cols, o.arg, o.threads);
    }
  };

  static Key key_of(TensorOp op, const OpArgs<T>& a) {
    return Key{op,
               a.rows,
               a.cols,
               {a.in_rows[0], a.in_rows[1], a.in_rows[2]},
               {a.in_cols[0], a.in_cols[1], a.in_cols[2]},
               {a.arg[0], a.arg[1], a.arg[2]},
               thread_pool().size()};
  }
  // Auto's verdict on this shape, if there is one (opens no library).
  static std::optional<KernelChoice<T>> verdict(TensorOp op, const OpArgs<T>& a) {
    const Key key = key_of(op, a);
    seek_shared(key);
    const auto hit = verdicts().find(key);
    if (hit == verdicts().end()) return std::nullopt;
    return hit->second;
  }
  static double seconds_of(const KernelChoice<T>& c, std::string_view dialect) {
    for (const auto& [d, sec] : c.seconds)
      if (dialect == d) return sec;
    return 0;
  }
  // Among the kernels a verdict timed, the one auto would have chosen had no library been
  // there (the same near-tie rule: a higher priority within kNearTie of the fastest wins).
  static const Kernel<T>* fastest_without_libraries(TensorOp op, const KernelChoice<T>& c) {
    double fastest = 1e300;
    for (const auto& [d, sec] : c.seconds)
      if (const Kernel<T>* k = kernel_named(op, d); k && !k->library)
        fastest = std::min(fastest, sec);
    for (const auto& [d, sec] : c.seconds)  // in priority order
      if (const Kernel<T>* k = kernel_named(op, d);
          k && !k->library && sec <= fastest * (1 + kNearTie))
        return k;
    return nullptr;
  }

  // Every candidate's forward then backward on buffers of the node's shapes, in interleaved
  // rounds (so the machine's drift falls on all alike), until each has run kRounds times and at
  // least kMinSeconds in all (at most 1000 rounds); the fastest single run decides.
  // Timed apart from the step, a kernel can look faster than it runs inside it (dev/notes.md,
  // "Auto's near-tie"), so a higher-priority kernel (the engine's first) keeps its place unless
  // another is faster by more than kNearTie.
  static constexpr double kNearTie = 0.10;
  static KernelChoice<T> time_candidates(TensorOp op, const OpArgs<T>& shape,
                                         const std::vector<const Kernel<T>*>& candidates);

  // Auto's verdicts, for the whole process: a shape is timed once, and every later program
  // (another setup of the same workload) gets the same kernels, so its arithmetic repeats
  // exactly. Timings differ between processes, and so may the choice.
  static std::map<Key, KernelChoice<T>>& verdicts() {
    static std::map<Key, KernelChoice<T>> measured;
    return measured;
  }
  static const Kernel<T>* kernel_named(TensorOp op, std::string_view dialect) {
    for (const Kernel<T>& k : kernels_of<T>(op))
      if (k.dialect == dialect) return &k;
    return nullptr;
  }
  static void read_shared_verdicts() {
    if (!exchange().read) return;
    for (const std::string& line : exchange().read(exchange().cursor)) take_line(line);
  }
  // A shape with no verdict here is looked for in what is new in the shared lines once: an
  // unrolled RNN asks for its few shapes thousands of times, and a read is three system calls.
  static std::set<Key>& sought() {
    static std::set<Key> keys;
    return keys;
  }
  // The shared lines are the process's own thread count's: nothing there for a Serial scope's.
  static void seek_shared(const Key& key) {
    if (thread_pool().serial()) return;
    if (!verdicts().count(key) && sought().insert(key).second) read_shared_verdicts();
  }
  // One shared line: a verdict (kept unless this process has one for the shape) or a library's
  // resident memory ("resident DIALECT BYTES", the largest kept). True if it told this process
  // something new.
  static bool take_line(const std::string& line);
  // The key's twelve numbers, the chosen dialect, then dialect=seconds for each candidate timed.
  static std::string verdict_line(const Key& k, const KernelChoice<T>& c) {
    char buf[256];
    std::snprintf(buf, sizeof buf, "%d %d %d %d %d %d %d %d %d %d %d %d %s", int(k.op), k.rows,
                  k.cols, k.in_rows[0], k.in_cols[0], k.in_rows[1], k.in_cols[1], k.in_rows[2],
                  k.in_cols[2], k.arg[0], k.arg[1], k.arg[2], c.kernel->dialect);
    std::string line = buf;
    for (const auto& [d, sec] : c.seconds) {
      std::snprintf(buf, sizeof buf, " %s=%.9g", d, sec);
      line += buf;
    }
    return line;
  }
  static void publish_verdict(const Key& k, const KernelChoice<T>& c) {
    if (exchange().publish && !thread_pool().serial()) exchange().publish(verdict_line(k, c));
  }

  DialectSpec spec_;
  bool libraries_;
  std::map<std::string, std::string> excluded_;  // libraries left out, and why
  std::map<std::string, double> gains_;  // seconds a step saves by each library (weigh_libraries)
  bool within_saving_ = false;           // keep_libraries_within_saving
  double seconds_measuring_ = 0;
};

// The selector's work, out of the class body: not inline, so that engine/dialects/dialects.cc
// makes it once (the extern declarations below).
template <class T>
void DialectSelector<T>::weigh_libraries(const std::vector<std::pair<TensorOp, OpArgs<T>>>& nodes) {
  if (!spec_.timed || !libraries_) return;
  if (process_hooks().run_apart && !libraries_entered()) time_in_child(nodes);
  std::map<std::string, double>& gain = gains_;
  gain.clear();
  double total = 0;
  for (const auto& [op, a] : nodes) {
    const OpFamily f = family_of(op);
    if (f == OpFamily::count || !spec_.forced[size_t(f)].empty() || bf16_op(op, a)) continue;
    std::optional<KernelChoice<T>> c = verdict(op, a);
    if (!c) {
      (void)choose(op, a);  // timed now, and kept as a verdict
      c = verdict(op, a);
    }
    if (!c || c->seconds.empty()) continue;
    const double own = seconds_of(*c, c->kernel->dialect);
    total += own;
    if (!c->kernel->library) continue;
    if (const Kernel<T>* k = fastest_without_libraries(op, *c))
      gain[c->kernel->dialect] += seconds_of(*c, k->dialect) - own;
  }
  for (const auto& [dialect, saved] : gain)
    if (saved < kLibraryGain * total)
      excluded_.emplace(dialect,
                        "gains under " + std::to_string(int(kLibraryGain * 100)) + "% of the step");
  if (within_saving_) {  // no plan saves more than the whole eager tape
    std::vector<std::string> kept;
    for (const auto& [dialect, saved] : gain)
      if (!excluded_.count(dialect)) kept.push_back(dialect);
    size_t tape = 0;
    for (const auto& [op, a] : nodes) {
      const size_t out = size_t(a.rows) * a.cols;
      tape += (2 * aligned(out) + aligned(op_rules_for<T>(a.precision)[int(op)].aux_elems(a))) *
              sizeof(T);
    }
    leave_out_what_does_not_fit(kept, tape, "the whole eager tape");
  }
  publish_resident();
}

template <class T>
auto DialectSelector<T>::choose(TensorOp op, const OpArgs<T>& a) -> KernelChoice<T> {
  const std::span<const Kernel<T>> all = kernels_of<T>(op);
  const OpFamily f = family_of(op);
  if (bf16_op(op, a)) {  // the bf16 table's kernel, not a float32 dialect (kernels.h)
    if (f != OpFamily::count && !spec_.forced[size_t(f)].empty())
      throw DialectError{"dialect " + std::string(op_family_names[size_t(f)]) + ":" +
                         spec_.forced[size_t(f)] + " is a float32 kernel; under --precision=bf16 " +
                         tensor_op_names[int(op)] +
                         " runs the bf16 table's (engine/core/ops_bf16.h)"};
    return {bf16_kernel_of<T>(op), {}};
  }
  if (f != OpFamily::count && !spec_.forced[size_t(f)].empty()) {
    for (const Kernel<T>& k : all)
      if (k.dialect == spec_.forced[size_t(f)]) {
        if (!k.available(a))
          throw DialectError{"dialect " + std::string(op_family_names[size_t(f)]) + ":" +
                             k.dialect + " cannot run " + shape_text(op, a) +
                             " (no kernel for this shape and type); force another or use auto"};
        return {&k, {}};
      }
  }
  // Asking a library kernel whether it can run opens its library: ask only as far as needed.
  std::vector<const Kernel<T>*> in_build;
  for (const Kernel<T>& k : all)
    if (k.in_build && (libraries_ || !k.library)) in_build.push_back(&k);
  std::stable_sort(in_build.begin(), in_build.end(),
                   [](auto* x, auto* y) { return x->priority > y->priority; });
  if (!spec_.timed || in_build.size() == 1) {
    for (const Kernel<T>* k : in_build)
      if (k->available(a)) return {k, {}};
  }
  const Key key = key_of(op, a);
  std::map<Key, KernelChoice<T>>& measured = verdicts();
  seek_shared(key);
  // (library first: asking a library kernel whether it can run opens the library)
  if (auto hit = measured.find(key); hit != measured.end()) {
    if (hit->second.kernel->library && libraries_ && excluded_.count(hit->second.kernel->dialect))
      if (const Kernel<T>* k = fastest_without_libraries(op, hit->second); k && k->available(a))
        return {k, hit->second.seconds};
    if ((libraries_ || !hit->second.kernel->library) &&
        ((within_saving_ && hit->second.kernel->library) || can_run(*hit->second.kernel, a)))
      return hit->second;
  }
  std::vector<const Kernel<T>*> candidates;
  for (const Kernel<T>* k : in_build)
    if (can_run(*k, a)) candidates.push_back(k);
  if (candidates.size() > 1 && candidates.back()->priority == 0)
    candidates.pop_back();  // the reference is the floor to check against, not a candidate
  if (candidates.size() == 1) return {candidates[0], {}};
  const auto started = std::chrono::steady_clock::now();
  if (!libraries_) {  // a narrower choice than the verdicts', kept out of them
    KernelChoice<T> choice = time_candidates(op, a, candidates);
    seconds_measuring_ +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    return choice;
  }
  measured[key] = time_candidates(op, a, candidates);
  seconds_measuring_ +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  publish_verdict(key, measured[key]);
  return measured[key];
}

template <class T>
std::string DialectSelector<T>::why_not_chosen(TensorOp op, const OpArgs<T>& a,
                                               const KernelChoice<T>& c) const {
  if (bf16_op(op, a)) return c.kernel == bf16_kernel_of<T>(op) ? "" : "not the bf16 kernel";
  const std::string chosen = c.kernel->dialect;
  const OpFamily f = family_of(op);
  if (f != OpFamily::count && !spec_.forced[size_t(f)].empty())
    return chosen == spec_.forced[size_t(f)]
               ? ""
               : chosen + " where " + spec_.forced[size_t(f)] + " is forced";
  if (c.kernel->library && !libraries_) return chosen + " runs a library, which is left out";
  if (!c.seconds.empty()) {
    if (!spec_.timed) return chosen + " with timings, where the priority rule chooses";
    double fastest = 1e300;
    for (const auto& [d, sec] : c.seconds) fastest = std::min(fastest, sec);
    const Kernel<T>* near_tie = nullptr;
    for (const auto& [d, sec] : c.seconds)  // in priority order, as time_candidates lists them
      if (!near_tie && sec <= fastest * (1 + kNearTie)) near_tie = kernel_named(op, d);
    if (c.kernel == near_tie || c.kernel == fastest_without_libraries(op, c)) return "";
    return chosen + " where its timings choose " + (near_tie ? near_tie->dialect : "none");
  }
  std::vector<const Kernel<T>*> in_build;
  for (const Kernel<T>& k : kernels_of<T>(op))
    if (k.in_build && (libraries_ || !k.library)) in_build.push_back(&k);
  std::stable_sort(in_build.begin(), in_build.end(),
                   [](auto* x, auto* y) { return x->priority > y->priority; });
  for (const Kernel<T>* k : in_build) {
    if (k == c.kernel) return "";
    // A library kernel above it may have refused the shape when asked (can_run opens it).
    if (!k->library && k->available(a)) return chosen + " where " + k->dialect + " comes first";
  }
  return chosen + " is not a kernel this program may choose";
}

template <class T>
void DialectSelector<T>::time_in_child(const std::vector<std::pair<TensorOp, OpArgs<T>>>& nodes) {
  std::vector<std::pair<TensorOp, OpArgs<T>>> untimed;
  std::set<Key> shapes;  // each once: an unrolled RNN repeats its few shapes
  for (const auto& [op, a] : nodes) {
    const OpFamily f = family_of(op);
    if (f == OpFamily::count || !spec_.forced[size_t(f)].empty() || bf16_op(op, a) ||
        verdict(op, a) || !shapes.insert(key_of(op, a)).second)
      continue;
    for (const Kernel<T>& k : kernels_of<T>(op))
      if (k.library && k.in_build) {
        untimed.push_back({op, a});
        break;
      }
  }
  if (untimed.empty()) return;
  const auto started = std::chrono::steady_clock::now();
  std::fflush(nullptr);
  const std::optional<std::string> in = process_hooks().run_apart([&] {
    thread_pool().restart_after_fork();  // a fork carries no threads
    exchange() = {};
    std::string out;
    for (const auto& [op, a] : untimed) {
      (void)choose(op, a);
      if (std::optional<KernelChoice<T>> c = verdict(op, a))
        out += verdict_line(key_of(op, a), *c) + "\n";
    }
    for (const auto& [d, b] : resident_here())
      out += "resident " + d + " " + std::to_string(b) + "\n";
    return out;
  });
  if (!in) {
    std::fprintf(stderr, "warning: timing kernels in a child process failed; timing here\n");
    return;
  }
  std::istringstream lines(*in);
  for (std::string line; std::getline(lines, line);)
    if (take_line(line) && exchange().publish && !thread_pool().serial()) exchange().publish(line);
  seconds_measuring_ +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
}

template <class T>
auto DialectSelector<T>::time_candidates(TensorOp op, const OpArgs<T>& shape,
                                         const std::vector<const Kernel<T>*>& candidates)
    -> KernelChoice<T> {
  constexpr int kRounds = 5;
  constexpr double kMinSeconds = 2e-3;
  KernelBench<T> bench(op, shape, candidates);
  using clock = std::chrono::steady_clock;
  std::vector<double> best(candidates.size(), 1e300), total(candidates.size(), 0);
  auto once = [&](const Kernel<T>* k) {
    // The pool's workers woken first, as the op before in a step leaves them: a candidate timed
    // right after a slow one would otherwise pay their wake-up (tens of us), not its kernel.
    thread_pool().run(thread_pool().size(), [](int, int) {});
    const auto t0 = clock::now();
    bench.run(*k);
    return std::chrono::duration<double>(clock::now() - t0).count();
  };
  for (const Kernel<T>* k : candidates)  // warm caches, generate JIT kernels
    charge_resident(*k, [&] { once(k); });
  // A candidate at twice the best after two rounds is out of the running: it stops being timed.
  std::vector<bool> running(candidates.size(), true);
  for (int round = 0; round < 1000; round++) {
    for (size_t c = 0; c < candidates.size(); c++)
      if (running[c]) {
        const double s = once(candidates[c]);
        best[c] = std::min(best[c], s), total[c] += s;
      }
    const double fastest = *std::min_element(best.begin(), best.end());
    bool short_so_far = false;
    for (size_t c = 0; c < candidates.size(); c++) {
      running[c] = running[c] && (round == 0 || best[c] <= 2 * fastest);
      short_so_far |= running[c] && total[c] < kMinSeconds;
    }
    if (round + 1 >= kRounds && !short_so_far) break;
  }
  // Candidates come in priority order: the first within kNearTie of the fastest wins.
  KernelChoice<T> choice{candidates[0], {}};
  const double fastest = *std::min_element(best.begin(), best.end());
  for (size_t c = candidates.size(); c-- > 0;) {
    if (best[c] <= fastest * (1 + kNearTie)) choice.kernel = candidates[c];
  }
  for (size_t c = 0; c < candidates.size(); c++)
    choice.seconds.push_back({candidates[c]->dialect, best[c]});
  return choice;
}

template <class T>
auto DialectSelector<T>::take_line(const std::string& line) -> bool {
  std::istringstream fields(line);
  if (line.rfind("resident ", 0) == 0) {
    std::string word, dialect;
    size_t bytes = 0;
    if (!(fields >> word >> dialect >> bytes)) return false;
    size_t& kept = resident_reported()[dialect];
    const bool larger = bytes > kept;
    kept = std::max(kept, bytes);
    return larger;
  }
  int op;
  Key k{};
  std::string chosen;
  fields >> op >> k.rows >> k.cols;
  for (int i = 0; i < 3; i++) fields >> k.in_rows[i] >> k.in_cols[i];
  for (int i = 0; i < 3; i++) fields >> k.arg[i];
  fields >> chosen;
  if (!fields || op < 0 || op >= int(TensorOp::count)) return false;  // a foreign line
  k.op = TensorOp(op), k.threads = thread_pool().size();
  const Kernel<T>* kernel = kernel_named(k.op, chosen);
  if (!kernel || verdicts().count(k)) return false;
  KernelChoice<T> c{kernel, {}};
  for (std::string item; fields >> item;) {
    const size_t eq = item.find('=');
    if (const Kernel<T>* t = kernel_named(k.op, item.substr(0, eq)); t && eq != item.npos)
      c.seconds.push_back({t->dialect, std::atof(item.c_str() + eq + 1)});
  }
  verdicts()[k] = c;
  return true;
}

extern template class DialectSelector<float>;
extern template class DialectSelector<double>;

}  // namespace bp
