// workloads/contracts_compile_test.cc: mistakes that must not compile. ctest compiles this
// file once per CASE (CMakeLists.txt) and passes only if the compiler stops with the expected
// diagnostic; CASE 0 is the same code without a mistake, which must compile, so that a failure of
// the others proves the contract and not a typo in this file.
//   ctest -R contract --output-on-failure
#include "engine/backend.h"
#include "workloads/registry.h"
#if CASE == 0 || CASE == 5  // the others stop before a backend binary would be instantiated
#include "harness/driver/backend_main.h"
#endif

namespace {

// A correct scalar workload, the base of the mistakes below.
struct Good {
  static constexpr std::string_view name = "good";
  static constexpr std::string_view times = "a*b";
  static constexpr bp::Sizes sizes = bp::unsized;
  static constexpr bp::Tolerance tolerance{1e-9, 1.0};
#if CASE == 1  // a misspelt fact: num_grad for num_grads
  static constexpr int num_grad = 2;
#else
  static constexpr int num_grads = 2;
#endif
#if CASE != 2  // CASE 2 leaves a fact out: no known answer stated
  static constexpr bp::KnownAnswer known = bp::no_known_answer;
#endif
  template <bp::ScalarBackend B>
  struct Run {
    typename B::Scalar a, b;
    Run(B& be, int64_t) : a(be.param(2.0)), b(be.param(3.0)) {}
    double step(B& be, std::span<double, 2> grads) {
#if CASE == 3  // one gradient too few for num_grads = 2
      return bp::finish_step(be, a * b, grads, a);
#else
      return bp::finish_step(be, a * b, grads, a, b);
#endif
    }
  };
};

#if CASE == 4  // a default size outside the range --sizes accepts
constexpr bp::Sizes bad_sizes{"nodes", {10, 100}, 1, 50};
#endif

// A backend that claims models but drifted out of TensorBackend (its attention is gone).
struct Drifted : bp::EngineBackend {
#if CASE == 5
  void attention() = delete;
#endif
};

}  // namespace

static_assert(bp::is_one_kind<Good>());

int main(int argc, char** argv) {
  bp::EngineBackend be;
  Good::Run<bp::EngineBackend> run(be, 0);
  std::array<double, 2> grads;
  run.step(be, grads);
#if CASE == 0 || CASE == 5
  return bp::backend_main<Drifted>(argc, argv, bp::BackendHooks<Drifted>{});
#else
  (void)argc, (void)argv;
  return 0;
#endif
}
