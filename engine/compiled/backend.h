// engine/compiled/backend.h: the compiled mode of our engine, as the benchmark backend `compiled`.
//
// The first training step is captured: the workload's own code runs against a record-only
// TensorGraph (engine/core/tensor.h), which checks every operand as the eager engine does and
// records the ops and shapes without memory or arithmetic. At that step's backward() the recording
// is compiled into a Program (engine/compiled/program.h: forward, generated backward, one planned
// arena), or built from a cached plan (engine/compiled/plan_cache.h), and run. Every later step
// replays it: the workload's code runs again, but each call only checks that it is the captured op
// with the captured shapes (a guard) and binds the step's inputs (its batch's constant, its token
// and target indices) into the program's slots; backward() runs the program, optimizer_step() the
// update. A step that differs from the captured one (another op, shape, operand or argument) is
// refused with one line saying where and how.
//
// The optimizer is the eager engine's (engine/core/optimizer.h), over the same flat buffers: one
// check of every gradient, then one pass in place, or the step skipped exactly and counted.
//
// Scalar graphs: engine/compiled/compiled_scalar.h, the same idea for one number per value; a
// scalar graph has no inputs, so after its captured step the program alone is the step.
//
// Memory: the program's arena is planned by liveness; with a budget (budget_bytes, or
// budget_fraction of the plan's own peak) activations are dropped after the forward and
// recomputed before the backward that needs them until the plan fits (engine/compiled/program.h).
//
// Kernels: chosen per op at compile time by `dialects` (engine/dialects/dialects.h): by priority
// (the eager engine's own), by timing every candidate on the op's shape (auto), or forced per
// family; under a memory budget, among kernels that open no library unless one is forced; without
// one, auto keeps a library only while its resident memory fits in what the plan saves over the
// eager tape (libraries_within_saving). The choice of every op is reported (kernel_report) and
// carried into the results.
//
// Not here: a step whose graph changes from step to step is refused, never recaptured.
// Tests: engine/compiled/compiled_test.cc (gradients bitwise equal to the eager engine on every
// workload, with and without a memory budget; the guard; the plan's invariants).
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "engine/backend.h"
#include "engine/compiled/compiled_scalar.h"
#include "engine/compiled/plan_cache.h"
#include "engine/compiled/program.h"
#include "engine/core/tensor.h"
#include "workloads/backend.h"

namespace bp {

// R: the tensors' type, float (the bench's model rows) or double (bp_gradbench's tensor forms in
// float64); scalar graphs are double either way.
template <class R>
struct CompiledBackendOf : EngineTensorInputs {
  static constexpr std::string_view name =
      std::is_same_v<R, float> ? "compiled" : "compiled_double";
  static constexpr Implements implements = Implements::both;
  // ---- scalar graphs, double precision: captured once, replayed
  // (engine/compiled/compiled_scalar.h) ----
  using Scalar = CompiledScalar::Value;
  CompiledScalar scalars;

  Scalar param(double v) { return scalars.param(v); }
  Scalar pow(Scalar x, double k) { return scalars.pow(x, k); }
  Scalar relu(Scalar x) { return scalars.unary(ScalarOp::relu, x); }
  Scalar tanh(Scalar x) { return scalars.unary(ScalarOp::tanh, x); }
  Scalar exp(Scalar x) { return scalars.unary(ScalarOp::exp, x); }
  Scalar log(Scalar x) { return scalars.unary(ScalarOp::log, x); }
  void backward(Scalar root) { scalars.backward(root); }
  double value(Scalar x) { return scalars.value(x); }
  double grad(Scalar x) { return scalars.grad(x); }
  void reset() { scalars.reset(); }
  // After the captured step, the whole step without the workload's code (compiled_scalar.h).
  bool can_replay_scalar_step() const { return scalars.can_replay(); }
  double replay_scalar_step(std::span<double> grads) { return scalars.replay(grads); }

  // ---- tensors, in R ----
  using Real = R;
  using Tensor = bp::Tensor;
  using Indices = IndexSpan;
  using Node = typename TensorGraph<R>::Node;
  TensorGraph<R> graph{256, /*record_only=*/true};  // parameters; the capture
  Program<R> program;
  // At two threads or more, once other work on the machine has made the pool run a step's jobs
  // alone (ThreadPool::step_done): the step planned for one thread, which the pool's caller runs
  // quicker than the waves planned for several (dev/notes.md, "Beside a busy process"); the same
  // bits, as every plan at every thread count. Run, in a ThreadPool::Serial scope, in the steps
  // the pool runs alone.
  // Compiled at the end of the captured step (at two threads or more, without a memory budget),
  // without the plan cache; its arena is untouched, so not resident, until a step runs it.
  std::optional<Program<R>> one_thread_program;
  bool on_one_thread = false;  // this step runs one_thread_program
  int64_t steps = 0, steps_on_one_thread = 0;
  double one_thread_compile_seconds = 0;
  std::vector<Node> captured;  // the captured step's nodes from the first op to the loss
  uint32_t root = 0;           // the loss
  uint32_t cursor = 0;         // ops replayed in this step
  bool ran_forward = false, ran_backward = false;
  // Rematerialisation (engine/compiled/program.h): the planned arena's budget, in bytes, or as a
  // fraction of the arena the program plans without one, at its threads (0: no budget).
  size_t budget_bytes = 0;
  double budget_fraction = 0;
  DialectSpec dialects;  // how kernels are chosen (engine/dialects/dialects.h); priority unless set
  // Auto keeps a library only while its resident memory fits in what the plan saves over the
  // eager tape, so that this mode never holds more than eager; false: whenever it is faster.
  bool libraries_within_saving = true;
  // Chains of elementwise and row-wise ops run as tiled groups (engine/compiled/fusion.h).
  bool fuse = true;
  double selection_seconds = 0;  // of compile_seconds, what choosing kernels took
  std::string
      libraries_left_out;  // by auto, as not worth their memory (engine/dialects/dialects.h)
  // Time to first step: from the first op of the captured step to its program being ready
  // (capture, planning), and to the end of its first backward (running it once too).
  std::chrono::steady_clock::time_point capture_started;
  double compile_seconds = 0, first_step_seconds = 0;
  // The plan cache (engine/compiled/plan_cache.h): its directory ("": off), and what the compile
  // found there: "off", "miss" (compiled cold, then stored) or "hit" (compiled from the plan).
  std::string plan_cache_dir;
  std::string plan_cache = "off";

  bool compiled() const { return !captured.empty(); }

  Tensor param(int32_t rows, int32_t cols, std::span<const R> v) {
    return graph.param(rows, cols, v);
  }
  Tensor constant(int32_t rows, int32_t cols, std::span<const R> v) {
    return graph.constant(rows, cols, v);
  }

  Tensor linear(Tensor x, Tensor w, Tensor b) {
    if (!compiled()) return capture(graph.linear(x, w, b));
    return replay(TensorOp::linear, {x, w, b}, {0, 0, 0});
  }
  Tensor linear(Tensor x, Tensor w) {
    if (!compiled()) return capture(graph.matmul(x, w, true));
    return replay(TensorOp::matmul, {x, w}, {1, 0, 0});
  }
  Tensor linear_relu(Tensor x, Tensor w, Tensor b) {
    if (!compiled()) return capture(graph.linear(x, w, b, true));
    return replay(TensorOp::linear, {x, w, b}, {1, 0, 0});
  }
  Tensor embedding(Tensor table, Indices idx) {
    if (!compiled()) return capture(graph.embedding(table, idx));
    return replay(TensorOp::embedding, {table}, {0, 0, 0}, idx);
  }
  Tensor view(Tensor x, int32_t rows, int32_t cols) {
    if (!compiled()) return capture(graph.view(x, rows, cols));
    return replay(TensorOp::view, {x}, {0, 0, 0}, {}, rows, cols);
  }
  Tensor add(Tensor x, Tensor y) {
    if (!compiled()) return capture(graph.add(x, y));
    return replay(TensorOp::add, {x, y}, {0, 0, 0});
  }
  Tensor tanh(Tensor x) {
    if (!compiled()) return capture(graph.tanh(x));
    return replay(TensorOp::tanh, {x}, {0, 0, 0});
  }
  Tensor relu(Tensor x) {
    if (!compiled()) return capture(graph.relu(x));
    return replay(TensorOp::relu, {x}, {0, 0, 0});
  }
  Tensor mul(Tensor x, Tensor y) {
    if (!compiled()) return capture(graph.mul(x, y));
    return replay(TensorOp::mul, {x, y}, {0, 0, 0});
  }
  Tensor sub(Tensor x, Tensor y) {
    if (!compiled()) return capture(graph.sub(x, y));
    return replay(TensorOp::sub, {x, y}, {0, 0, 0});
  }
  Tensor div(Tensor x, Tensor y) {
    if (!compiled()) return capture(graph.div(x, y));
    return replay(TensorOp::div, {x, y}, {0, 0, 0});
  }
  Tensor sigmoid(Tensor x) {
    if (!compiled()) return capture(graph.sigmoid(x));
    return replay(TensorOp::sigmoid, {x}, {0, 0, 0});
  }
  Tensor exp(Tensor x) {
    if (!compiled()) return capture(graph.exp(x));
    return replay(TensorOp::exp, {x}, {0, 0, 0});
  }
  Tensor log(Tensor x) {
    if (!compiled()) return capture(graph.log(x));
    return replay(TensorOp::log, {x}, {0, 0, 0});
  }
  Tensor sum(Tensor x) {
    if (!compiled()) return capture(graph.sum(x));
    return replay(TensorOp::sum, {x}, {0, 0, 0});
  }
  Tensor sum_rows(Tensor x) {
    if (!compiled()) return capture(graph.sum_rows(x));
    return replay(TensorOp::sum_rows, {x}, {0, 0, 0});
  }
  Tensor logsumexp(Tensor x) {
    if (!compiled()) return capture(graph.logsumexp(x));
    return replay(TensorOp::logsumexp, {x}, {0, 0, 0});
  }
  Tensor layernorm(Tensor x, Tensor g, Tensor b) {
    if (!compiled()) return capture(graph.layernorm(x, g, b));
    return replay(TensorOp::layernorm, {x, g, b}, {0, 0, 0});
  }
  Tensor attention(Tensor qkv, int32_t B, int32_t T, int32_t H) {
    if (!compiled()) return capture(graph.attention(qkv, B, T, H));
    return replay(TensorOp::attention, {qkv}, {B, T, H});
  }
  Tensor cross_entropy(Tensor logits, Indices targets) {
    if (!compiled()) return capture(graph.cross_entropy(logits, targets));
    return replay(TensorOp::cross_entropy, {logits}, {0, 0, 0}, targets);
  }
  Tensor transpose(Tensor x) {
    if (!compiled()) return capture(graph.transpose(x));
    return replay(TensorOp::transpose, {x}, {0, 0, 0});
  }
  Tensor log_softmax(Tensor x) {
    if (!compiled()) return capture(graph.log_softmax(x));
    return replay(TensorOp::log_softmax, {x}, {0, 0, 0});
  }
  Tensor nll(Tensor logp, Indices targets) {
    if (!compiled()) return capture(graph.nll(logp, targets));
    return replay(TensorOp::nll, {logp}, {0, 0, 0}, targets);
  }

  // After the captured step, zeroing is the program's: its first writers write the parameters'
  // gradients fresh instead (Program::start_gradients); until then they read as zeros.
  bool gradients_zeroed = false;
  void zero_grad() {
    if (compiled())
      gradients_zeroed = true;
    else
      graph.zero_grad();
  }

  // The first step's backward compiles the capture; every step's runs the program.
  void backward(Tensor loss) {
    if (!compiled()) {
      graph.backward(loss);  // checks the root as the eager engine does; records nothing
      if (loss.id < graph.num_params())
        refuse("backward", "from parameter %u itself: the step has no op to compile", loss.id);
      root = loss.id;
      for (uint32_t i = uint32_t(graph.num_params()); i <= root; i++)
        captured.push_back(graph.node_at(i));
      program = compile_program();
      compile_seconds = seconds_since(capture_started);
      cursor = root + 1 - uint32_t(graph.num_params());
    } else {
      check_handle(loss, "backward");
      if (loss.id != root || cursor != captured.size())
        refuse("backward",
               "backward from node %u after %u ops; the captured step ran %zu ops "
               "and took its backward from node %u",
               loss.id, cursor, captured.size(), root);
      if (ran_backward)
        refuse("backward",
               "called twice in one step (every gradient would be added twice); call "
               "end_step() between steps");
    }
    if (!ran_forward) run_forward();
    std::optional<ThreadPool::Serial> serial;
    if (on_one_thread) serial.emplace(thread_pool());
    Program<R>& p = step_program();
    p.start_gradients(gradients_zeroed);
    gradients_zeroed = false;
    if (graph.gradients_listened_to())  // data parallel: each gradient summed once it is final
      p.backward([this](uint32_t j) { graph.gradient_is_final(j); });
    else
      p.backward();
    ran_forward = ran_backward = true;
    if (first_step_seconds == 0) first_step_seconds = seconds_since(capture_started);
    if (after_backward) after_backward();
  }
  // Data parallel (apps/bench_ranks.cc --mode=compiled), as the eager engine's
  // (engine/backend.h): after_backward sums the gradients over the ranks once the program's
  // backward has made them all; loss_over_ranks, in its check, makes a loss every rank's mean.
  // sharded_step, when set (--zero=1), takes the optimizer's step in place of the graph's.
  std::function<void()> after_backward;
  std::function<double(double)> loss_over_ranks;
  std::function<void(const AdamWConfig* adamw, double lr)> sharded_step;
  void optimizer_step() {
    if (sharded_step) return sharded_step(adamw ? &adamw_config : nullptr, sgd_lr);
    adamw ? graph.adamw_step(adamw_config) : graph.sgd_step(sgd_lr);
  }
  int64_t skipped_steps() const { return graph.skipped_steps(); }
  void end_step() {
    // after the captured step's, while its graph still holds the step (end_step rewinds it); not
    // under a memory budget, which a second arena would not keep, nor where the program runs a
    // library's kernel: the one-thread program runs ours only, whose bits are not the library's
    const bool budgeted = budget_bytes > 0 || budget_fraction > 0;
    if (compiled() && !one_thread_program && thread_pool().size() > 1 && !budgeted &&
        !runs_a_library(program)) {
      const auto start = std::chrono::steady_clock::now();
      compile_one_thread_program();
      one_thread_compile_seconds = seconds_since(start);
      thread_pool().leave_out_of_window(one_thread_compile_seconds);  // no step's time
    }
    graph.end_step();  // the pool's step_done: whether the next step runs alone
    cursor = 0;
    ran_forward = ran_backward = false;
  }
  double loss_value(Tensor loss) {
    if (!compiled())
      refuse("loss_value",
             "before the first step's backward(): the compiled mode "
             "captures a step up to its backward");
    check_handle(loss, "loss_value");
    if (loss.id != root)
      refuse("loss_value", "of node %u; the program's loss is node %u", loss.id, root);
    if (!ran_forward) run_forward(), ran_forward = true;
    const R value = step_program().loss();
    return loss_over_ranks ? loss_over_ranks(value) : value;
  }
  void read_grad(Tensor p, std::span<R> out) const {
    graph.read_grad(p, out);
    if (gradients_zeroed) std::fill(out.begin(), out.end(), 0.0f);
  }

  // Which kernel served the ops of the step, per op and dialect in the order first met:
  // "auto: linear=blis x3, matmul=engine x2, ...". For scalar graphs, which executor runs the
  // step ("scalar: threaded", "scalar: generated code (12 KB)"). Empty before the first compile.
  std::string kernel_report() const {
    if (scalars.compiled()) return "scalar: " + scalars.executor();
    if (!compiled()) return "";
    std::vector<std::pair<std::string, int>> uses;
    for (const auto& k : program.kernels()) {
      const std::string key =
          std::string(tensor_op_names[int(k.op)]) + "=" + k.choice.kernel->dialect;
      auto it = std::find_if(uses.begin(), uses.end(), [&](auto& u) { return u.first == key; });
      if (it == uses.end())
        uses.push_back({key, 1});
      else
        it->second++;
    }
    std::string text = dialects.text + ":";
    for (size_t i = 0; i < uses.size(); i++)
      text += (i ? ", " : " ") + uses[i].first + " x" + std::to_string(uses[i].second);
    if (!libraries_left_out.empty()) text += " (left out: " + libraries_left_out + ")";
    return text;
  }

  // Counters: every arena this backend holds, and the plan's own figures.
  size_t arena_bytes() const {
    return scalars.arena_bytes() + graph.arena_bytes() + program.memory().arena_bytes +
           (one_thread_program ? one_thread_program->memory().arena_bytes : 0);
  }
  std::vector<std::pair<const char*, double>> extra_counters() const {
    if (!compiled()) return scalars.counters();
    const MemoryPlan& m = program.memory();
    return {{"planned_arena_bytes", double(m.arena_bytes)},
            {"lower_bound_bytes", double(m.lower_bound_bytes)},
            {"unplanned_bytes", double(m.unplanned_bytes)},
            {"instructions", double(program.num_instructions())},
            {"bytes_moved", double(program.bytes_moved())},
            {"bytes_moved_unfused", double(program.bytes_moved_unfused())},
            {"fused_groups", double(program.fusion().groups())},
            {"fused_instructions", double(program.fusion().fused_instructions())},
            {"side_by_side_instructions", double(program.side_by_side())},
            {"memory_budget_bytes", double(program.budget_bytes())},
            {"recomputed_nodes", double(m.recomputed_nodes)},
            {"compile_seconds", compile_seconds},
            {"dialect_selection_seconds", selection_seconds},
            {"first_step_seconds", first_step_seconds},
            {"plan_cache_hit", plan_cache == "hit" ? 1.0 : 0.0},
            // the share of steps the one-thread program ran (the pool alone on a busy machine)
            {"steps_on_one_thread_plan", steps ? double(steps_on_one_thread) / double(steps) : 0},
            {"one_thread_plan_arena_bytes",
             one_thread_program ? double(one_thread_program->memory().arena_bytes) : 0.0},
            {"one_thread_plan_compile_seconds", one_thread_compile_seconds}};
  }

 private:
  Program<R>& step_program() { return on_one_thread ? *one_thread_program : program; }
  // A step's forward, on the program the pool's state chose for the step.
  void run_forward() {
    on_one_thread = one_thread_program && thread_pool().alone();
    steps++, steps_on_one_thread += on_one_thread;
    graph.refresh_halves();
    std::optional<ThreadPool::Serial> serial;
    if (on_one_thread) serial.emplace(thread_pool());
    step_program().forward();
  }
  // The step planned for one thread, as compile_program makes any but without the plan cache;
  // what it reports of the compile stays the main program's. The next step's replay binds its
  // inputs.
  void compile_one_thread_program() {
    const std::string cache = plan_cache, cache_dir = plan_cache_dir, left_out = libraries_left_out;
    const double selection = selection_seconds;
    plan_cache_dir.clear();
    ThreadPool::Serial serial(thread_pool());
    one_thread_program = compile_program(/*libraries=*/false);
    plan_cache = cache, plan_cache_dir = cache_dir, libraries_left_out = left_out;
    selection_seconds = selection;
  }
  // The program, under the budget if there is one. A budget no plan meets ends the process with
  // one line naming the smallest this planner reached: exit 2, as for any bad flag, before any
  // arithmetic of the step has run.
  // libraries: whether auto may choose a library's kernel (false for the one-thread program:
  // this process's verdicts are its thread count's, and choosing anew would open and time every
  // library here, tens of MB resident beside the plans).
  Program<R> compile_program(bool libraries = true) {
    try {
      // Under a memory budget no library is opened unless forced: its resident code and tables
      // would sit outside the budget (engine/dialects/dialects.h).
      const bool budgeted = budget_bytes > 0 || budget_fraction > 0;
      DialectSelector<R> selector(dialects, !budgeted && libraries);
      const ArenaBudget budget{budget_bytes, budget_fraction, true, fuse};
      PlanCache cache(plan_cache_dir);
      PlanKey key;
      if (cache.on()) {
        key = PlanCache::key(graph, root,
                             PlanOptions{budget_bytes, budget_fraction,
                                         dialects.text + (libraries_within_saving ? "" : " any") +
                                             (fuse ? "" : " unfused"),
                                         !budgeted, thread_pool().size()},
                             PlanCache::this_machine());
        if (const std::optional<PlanDecisions> d = cache.load(key)) {
          try {
            Program<R> p(graph, root, budget, &selector, &*d);
            libraries_left_out = d->libraries_left_out;
            plan_cache = "hit";
            return p;
          } catch (const PlanMismatch& m) {
            cache.reject(key, m.why);
          }
        }
      }
      if (dialects.timed && !budgeted && libraries_within_saving)
        selector.keep_libraries_within_saving();
      Program<R> p(graph, root, budget, &selector);
      // Made again while a library is left out (each time one more: few times at most).
      while (dialects.timed && !budgeted && libraries_within_saving &&
             !keep_libraries_that_fit(p, selector))
        p = Program<R>(graph, root, budget, &selector);
      selection_seconds = selector.seconds_measuring();
      for (const auto& [library, why] : selector.libraries_left_out())
        libraries_left_out += (libraries_left_out.empty() ? "" : "; ") + library + " (" + why + ")";
      if (cache.on()) {
        PlanDecisions d = p.decisions();
        d.libraries_left_out = libraries_left_out;
        plan_cache = cache.store(key, d) ? "miss" : "off";
      }
      return p;
    } catch (const DialectError& e) {
      std::fprintf(stderr, "error: --dialect=%s: %s\n", dialects.text.c_str(), e.message.c_str());
      std::exit(2);
    } catch (const BudgetError& e) {
      std::fprintf(stderr,
                   "error: memory budget %zu bytes cannot be met: recomputing activations, the "
                   "smallest plan of this step needs %zu bytes (%.3f of its %zu without a "
                   "budget); give at least that\n",
                   e.budget, e.smallest, double(e.smallest) / double(e.unbudgeted), e.unbudgeted);
      std::exit(2);
    }
  }
  // Whether any of p's kernels runs a library's code.
  static bool runs_a_library(const Program<R>& p) {
    for (const auto& k : p.kernels())
      if (k.choice.kernel->library) return true;
    return false;
  }
  // Auto keeps a library only while its resident memory fits in what the plan saves over the
  // eager tape (engine/dialects/dialects.h, keep_what_fits): false if it left one out.
  static bool keep_libraries_that_fit(const Program<R>& p, DialectSelector<R>& selector) {
    std::vector<typename DialectSelector<R>::LibraryUse> uses;
    for (const auto& k : p.kernels())
      if (k.choice.kernel->library)
        uses.push_back({k.op, program_ir::args_of<R>(k.shape), k.choice.kernel});
    const MemoryPlan& m = p.memory();
    const size_t saving = m.unplanned_bytes > m.arena_bytes ? m.unplanned_bytes - m.arena_bytes : 0;
    return uses.empty() || !selector.keep_what_fits(uses, saving);
  }
  Tensor capture(Tensor t) {
    if (t.id == graph.num_params()) capture_started = std::chrono::steady_clock::now();
    return t;
  }

  [[noreturn]] __attribute__((format(printf, 3, 4))) void refuse(const char* op, const char* format,
                                                                 ...) const {
    char where[64];
    std::snprintf(where, sizeof where, "bp::CompiledBackend::%s", op);
    va_list args;
    va_start(args, format);
    engine_vfail(where, format, args);
  }
  // A handle of this graph: a parameter or constant, or made earlier in this step.
  void check_handle(Tensor t, const char* op) const {
    if (t.graph != graph.serial())
      refuse(op, t.graph == 0 ? "an operand is an empty Tensor handle (default-constructed)"
                              : "an operand belongs to another backend");
    const uint32_t P = uint32_t(graph.num_params());
    if (t.id >= P && (t.step != graph.step_count() || t.id >= P + cursor))
      refuse(op,
             "an operand was made before the last end_step(); only parameters and constants "
             "outlive a step");
  }
  static const char* text(const Node& n, char (&buf)[32]) {
    std::snprintf(buf, sizeof buf, "(%d, %d)", n.rows, n.cols);
    return buf;
  }

  void bind_constant(uint32_t id, int k, const R* data) {
    program.bind_constant(id, k, data);
    if (one_thread_program) one_thread_program->bind_constant(id, k, data);
  }
  // One op of a replayed step: the guard, then the step's inputs into the program's slots.
  Tensor replay(TensorOp op, std::initializer_list<Tensor> operands, std::array<int32_t, 3> arg,
                IndexSpan idx = {}, int32_t rows = 0, int32_t cols = 0) {
    const char* name = tensor_op_names[int(op)];
    const uint32_t P = uint32_t(graph.num_params()), id = P + cursor;
    if (cursor >= captured.size())
      refuse(name,
             "op %u of the step, but the captured step has %zu ops up to its loss: a compiled "
             "step must repeat the captured one",
             cursor + 1, captured.size());
    const Node& c = captured[cursor];
    if (c.op != op)
      refuse(name,
             "op %u of the step is %s, but the captured step has %s there: a compiled step "
             "must repeat the captured one",
             cursor + 1, name, tensor_op_names[int(c.op)]);
    int k = 0;
    for (Tensor t : operands) {
      check_handle(t, name);
      if (t.id == c.in[k]) {
        if (t.id < P && !graph.node_at(t.id).needs_grad)  // a constant: this step's, again
          bind_constant(id, k, graph.data(t));
      } else {
        const Node &given = t.id < P ? graph.node_at(t.id) : captured[t.id - P],
                   &want = c.in[k] < P ? graph.node_at(c.in[k]) : captured[c.in[k] - P];
        const bool both_constants =
            t.id < P && c.in[k] < P && !given.needs_grad && !want.needs_grad;
        char a[32], b[32];
        if (!both_constants || given.rows != want.rows || given.cols != want.cols)
          refuse(name,
                 "op %u, operand %d is node %u %s, but the captured step used node %u %s; "
                 "only a constant of the same shape may change between steps",
                 cursor + 1, k, t.id, text(given, a), c.in[k], text(want, b));
        if (op == TensorOp::view)  // not an instruction: its readers hold the captured address
          refuse(name,
                 "op %u views constant %u, but the captured step viewed constant %u; a view's "
                 "constant cannot change between steps (pass the constant to an op instead)",
                 cursor + 1, t.id, c.in[k]);
        bind_constant(id, k, graph.data(t));
      }
      k++;
    }
    for (int i = 0; i < 3; i++)
      if (op != TensorOp::view && arg[i] != c.arg[i])
        refuse(name, "op %u, argument %d is %d; the captured step had %d", cursor + 1, i, arg[i],
               c.arg[i]);
    if (op == TensorOp::view && (rows != c.rows || cols != c.cols))
      refuse(name, "op %u views as (%d, %d); the captured step viewed as (%d, %d)", cursor + 1,
             rows, cols, c.rows, c.cols);
    if (tensor_op_takes_indices(op)) {
      if (idx.size != c.index.size)
        refuse(name, "op %u has %d indices; the captured step had %d", cursor + 1, idx.size,
               c.index.size);
      const Node& x = c.in[0] < P ? graph.node_at(c.in[0]) : captured[c.in[0] - P];
      if (op == TensorOp::embedding)
        TensorGraph<R>::check_embedding_indices(x, idx);
      else
        TensorGraph<R>::check_targets(x, idx, name);
      program.bind_index(id, idx);
      if (one_thread_program) one_thread_program->bind_index(id, idx);
    }
    cursor++;
    return Tensor{id, graph.serial(), graph.step_count()};
  }
};
using CompiledBackend = CompiledBackendOf<float>;
using CompiledDoubleBackend = CompiledBackendOf<double>;

}  // namespace bp
