// Test support: one list of op test cases for every backend, in the manner of ggml's
// test-backend-ops. A case makes seeded inputs on the CPU, runs its op forward and backward on a
// Context of any device (inputs cross with Tensor::to, every output comes back to the CPU), and
// computes the same outputs in float64 from tests/support's references. The CPU is checked
// against the references (tests/unit/test_backend_ops.cpp) and every other backend against the
// CPU (tests/gpu/test_backend_ops.cpp), each with the tolerances written in the case: a new op
// gets its GPU test by adding one case here.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "scaletrain/backend/context.hpp"
#include "scaletrain/tensor/tensor.hpp"

namespace scaletrain::test {

// Named tensors in a fixed order: a case's inputs, or its outputs on the CPU.
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
// Named float64 values: a case's reference outputs, in the layouts of the op's outputs.
using NamedValues = std::vector<std::pair<std::string, std::vector<double>>>;

// An element passes when |got - want| <= abs + rel * |want| (closeness() in gradcheck.hpp).
struct Tolerance {
  double abs = 0.0;
  double rel = 0.0;
};

// How one output is judged. `reference` is empty where the float64 references have no value
// for the output: it is then compared between backends only, and the case says why.
struct OutputTolerance {
  std::string output;
  std::optional<Tolerance> reference;  // the CPU against the float64 reference
  Tolerance backend;                   // another backend against the CPU
};

// A backward output that finite differences of the forward can check on the CPU: `gradient` (an
// output of run()) is d<cotangent, output>/d input, where `output` is a forward output of run()
// and `cotangent` the input that backward took as d(loss)/d(output); an empty cotangent means a
// scalar output (a loss) differentiated directly.
struct GradientSpec {
  std::string input;
  std::string gradient;
  std::string output;
  std::string cotangent;
};

struct OpCase {
  std::string name;                           // "conv2d k7 s2 p3 N1 C3->O13"
  std::vector<std::string> ops;               // the op functions run() calls, e.g. "conv2d_forward"
  std::function<NamedTensors()> make_inputs;  // seeded, on the CPU
  // Runs the ops on ctx.device() and returns every output on the CPU; inputs are not modified.
  std::function<NamedTensors(Context& ctx, const NamedTensors& inputs)> run;
  std::function<NamedValues(const NamedTensors& inputs)> reference;
  std::vector<OutputTolerance> outputs;  // one per output of run(), in its order
  // The gradients unit.backend_ops checks against central differences of run()'s forward outputs
  // (float32 inputs only; none for ops without a gradient, such as count_correct).
  std::vector<GradientSpec> gradients;
  // Non-empty: why the case runs on the CPU only (parameters another backend refuses by design,
  // such as conv2d's per-side padding on cuDNN). The GPU harness skips it and says why.
  std::string cpu_only;
};

// Every case, built once.
const std::vector<OpCase>& op_cases();

// The values of a CPU tensor of dtype f32, i32, i64 or u8, as doubles.
std::vector<double> tensor_values(const Tensor& t);

// The verdict on one output of one case.
struct OutputCheck {
  std::string output;
  bool ok = false;
  double max_abs = 0.0;  // largest |got - want|
  double max_rel = 0.0;  // largest |got - want| / |want| over elements with want != 0
  double ratio = 0.0;    // largest |got - want| / (abs + rel * |want|); ok means <= 1
  Tolerance tolerance;
  std::string detail;  // the worst element, or why the output could not be compared
};

// Compares two value lists element by element; sizes must match, NaN never passes.
OutputCheck compare_values(const std::string& output, const std::vector<double>& got, const std::vector<double>& want,
                           const Tolerance& tolerance);

// The CPU's outputs of `c` against its float64 reference: one check per output the reference
// has, and a failed check for any output that run() did not produce or the reference names
// without a tolerance.
std::vector<OutputCheck> compare_with_reference(const OpCase& c, const NamedTensors& got, const NamedValues& want);

// Another backend's outputs of `c` against the CPU's, with the backend tolerances: one check per
// output in c.outputs (a missing output, or a shape or dtype that differs, fails). With `amp_unit`
// (amp_unit_of a mixed precision, both runs in it), an output whose tolerance is not exact may
// also differ by kAmpBackendUnits of that unit times the CPU output's largest magnitude: each
// backend rounds its fp32 result to 16 bits, and a result a hair apart can round a unit apart,
// which the ops downstream in the case carry on.
std::vector<OutputCheck> compare_backends(const OpCase& c, const NamedTensors& got, const NamedTensors& cpu,
                                          double amp_unit = 0.0);
constexpr double kAmpBackendUnits = 2.0;
// The 16-bit format's unit in the last place at 1: 2^-10 for amp-fp16, 2^-7 for amp-bf16; 0 for fp32.
double amp_unit_of(Precision precision);
// Every f32 tensor of `inputs` rounded to the precision's 16-bit format (what the ops before the
// case would have stored); unchanged in fp32.
void round_inputs_to(Precision precision, NamedTensors& inputs);

// "dx: max abs 1.2e-06, max rel 3.4e-07 (tolerance abs 1e-05 rel 1e-05)" and the detail.
std::string describe(const OutputCheck& check);

}  // namespace scaletrain::test
