// backend ops: every case of tests/support/op_cases.cpp on the CPU against its float64
// reference, with the tolerances written in the case; every case in amp-fp16 and amp-bf16
// against fp32 on the same 16-bit inputs; that the list covers every op and is seeded; and that
// the comparisons the GPU test relies on (tests/gpu/test_backend_ops.cpp) do fail: a perturbed,
// NaN, missing or reshaped output is reported, by name.
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "scaletrain/core/half.hpp"
#include "scaletrain/core/rng.hpp"
#include "scaletrain/ops/registry.hpp"
#include "support/op_cases.hpp"

namespace st = scaletrain;
using st::test::NamedTensors;
using st::test::OpCase;
using st::test::OutputCheck;

namespace {

const OpCase& case_named(const std::string& name) {
  for (const OpCase& c : st::test::op_cases())
    if (c.name == name) return c;
  BOOST_FAIL("no op case named " << name);
  throw;  // not reached
}

bool all_ok(const std::vector<OutputCheck>& checks) {
  for (const auto& check : checks)
    if (!check.ok) return false;
  return true;
}

// The failed checks' outputs, for messages.
std::string failures(const std::vector<OutputCheck>& checks) {
  std::string out;
  for (const auto& check : checks)
    if (!check.ok) out += (out.empty() ? "" : ", ") + check.output;
  return out;
}

// A deep copy of CPU outputs, so that one can be changed without touching the other.
NamedTensors copy_of(const NamedTensors& outputs) {
  NamedTensors copy;
  for (const auto& [name, t] : outputs) copy.emplace_back(name, t.clone());
  return copy;
}

st::Tensor& output(NamedTensors& outputs, const std::string& name) {
  for (auto& [n, t] : outputs)
    if (n == name) return t;
  BOOST_FAIL("no output named " << name);
  throw;  // not reached
}

}  // namespace

BOOST_AUTO_TEST_SUITE(backend_ops)

BOOST_AUTO_TEST_CASE(cpu_matches_float64_reference) {
  st::Context ctx;
  const auto start = std::chrono::steady_clock::now();
  for (const OpCase& c : st::test::op_cases()) {
    BOOST_TEST_CONTEXT(c.name) {
      const NamedTensors inputs = c.make_inputs();
      const NamedTensors got = c.run(ctx, inputs);
      const auto checks = st::test::compare_with_reference(c, got, c.reference(inputs));
      BOOST_TEST(!checks.empty(), "the reference gives no output");
      for (const OutputCheck& check : checks) {
        BOOST_TEST(check.ok, st::test::describe(check));
        BOOST_TEST_MESSAGE((check.ok ? "ok   " : "FAIL ") << c.name << " | " << st::test::describe(check));
      }
      // Every output also has a backend tolerance: compare_backends covers what run() returns.
      BOOST_TEST(all_ok(st::test::compare_backends(c, got, got)));
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  BOOST_TEST_MESSAGE(st::test::op_cases().size() << " op cases in " << seconds << " s");
}

// Every case in each mixed precision (docs/mixed-precision.md), on the CPU where it is emulated:
// its float inputs rounded to the 16-bit format (what the ops before it would have stored), then
// run in fp32 and in the mixed precision. Each float output must hold no NaN or inf that fp32's
// does not, and lie within kAmpUnits units in the last place of the format at 1 (2^-10 for fp16,
// 2^-7 for bf16) of fp32's, relative to the output's largest magnitude: one rounding of each
// output is at most half a unit, and the cases that chain forward and backward add the rounding
// of the forward's output that backward reads. Integer outputs (counts, masks) must equal fp32's.
// This is the contract the GPU's 16-bit kernels will be held to against this reference; an op
// that rounded a sum as it went would be far outside it. In a case of one op, each output must
// also be fp32's bit for bit, or fp32's rounded once. Measured 2026-11-27 (AMD EPYC): at most
// 0.63 units in fp16 and 0.66 in bf16 (masked_softmax's dx, which reads the rounded forward).
constexpr double kAmpUnits = 2.0;

// The largest difference of `got` from `want` (f32 tensors of one size) in units of `unit` times
// want's largest finite magnitude; fails the test for a NaN or inf that want does not have at that
// element, or the reverse.
double units_from(const std::string& output, const st::Tensor& got, const st::Tensor& want, double unit) {
  const float* g = got.data<float>();
  const float* w = want.data<float>();
  double largest = 0.0, diff = 0.0;
  bool same_non_finite = true;
  for (int64_t e = 0; e < want.numel(); ++e) {
    if (!std::isfinite(w[e])) {  // a NaN or inf the case planted: the same kind, not a value
      same_non_finite = same_non_finite && std::isnan(w[e]) == std::isnan(g[e]) && !std::isfinite(g[e]);
      continue;
    }
    same_non_finite = same_non_finite && std::isfinite(g[e]);
    largest = std::max(largest, std::fabs(static_cast<double>(w[e])));
    diff = std::max(diff, std::fabs(static_cast<double>(g[e]) - w[e]));
  }
  BOOST_TEST(same_non_finite, output << ": a NaN or inf where fp32 has none, or none where it has one");
  if (largest == 0.0) return diff == 0.0 ? 0.0 : std::numeric_limits<double>::infinity();
  return diff / (unit * largest);
}

// Whether got is want rounded to the format, element by element, bit for bit (NaN as NaN).
bool is_rounded(st::HalfFormat format, const st::Tensor& got, const st::Tensor& want) {
  const float* g = got.data<float>();
  const float* w = want.data<float>();
  for (int64_t e = 0; e < want.numel(); ++e) {
    const float r = st::round_to(format, w[e]);
    if (std::isnan(r) ? !std::isnan(g[e]) : std::memcmp(&r, &g[e], sizeof r) != 0) return false;
  }
  return true;
}

BOOST_AUTO_TEST_CASE(every_case_in_amp_is_fp32_rounded_to_16_bits) {
  struct Format {
    st::Precision precision;
    st::HalfFormat format;
    double unit;  // the format's unit in the last place at 1
    double worst = 0.0;
    std::string worst_at = "";
    int rounded_outputs = 0;  // of one-op cases, changed by the rounding
  };
  std::vector<Format> formats = {{st::Precision::amp_fp16, st::HalfFormat::fp16, std::ldexp(1.0, -10)},
                                 {st::Precision::amp_bf16, st::HalfFormat::bf16, std::ldexp(1.0, -7)}};
  st::Context fp32;
  for (const OpCase& c : st::test::op_cases()) {
    const NamedTensors made = c.make_inputs();
    for (Format& f : formats) {
      BOOST_TEST_CONTEXT(c.name << " in " << st::precision_name(f.precision)) {
        NamedTensors inputs = copy_of(made);
        for (auto& [name, t] : inputs)
          if (t.dtype() == st::DType::f32) st::round_in_place(f.format, t.data<float>(), t.numel());
        st::Context amp;
        amp.set_precision(f.precision);
        const NamedTensors want = c.run(fp32, inputs), got = c.run(amp, inputs);
        BOOST_TEST_REQUIRE(want.size() == got.size());
        for (std::size_t i = 0; i < want.size(); ++i) {
          const std::string& name = want[i].first;
          const st::Tensor &w = want[i].second, &g = got[i].second;
          BOOST_TEST_REQUIRE((w.dtype() == g.dtype() && w.bytes() == g.bytes()), name);
          if (w.dtype() != st::DType::f32) {
            BOOST_TEST(std::memcmp(w.raw(), g.raw(), w.bytes()) == 0,
                       name << ": an integer output differs from fp32's");
            continue;
          }
          const double units = units_from(name, g, w, f.unit);
          BOOST_TEST(units <= kAmpUnits, name << ": " << units << " units of the format from fp32's");
          if (units > f.worst) f.worst = units, f.worst_at = c.name + ", " + name;
          // A case of one op: each output is that op's, rounded once (a 16-bit output) or not at all.
          if (c.ops.size() == 1) {
            const bool rounded = is_rounded(f.format, g, w), kept = std::memcmp(g.raw(), w.raw(), w.bytes()) == 0;
            BOOST_TEST((rounded || kept), name << ": neither fp32's value rounded once nor fp32's value");
            f.rounded_outputs += rounded && !kept ? 1 : 0;
          }
        }
      }
    }
  }
  for (const Format& f : formats) {
    // The mixed precision changed something: a run that rounded nothing would pass the bound.
    BOOST_TEST(f.worst > 0.0);
    BOOST_TEST(f.rounded_outputs > 0);
    BOOST_TEST_MESSAGE(st::precision_name(f.precision)
                       << ": largest difference from fp32 " << f.worst << " units of the format, at " << f.worst_at
                       << "; " << f.rounded_outputs << " outputs of one-op cases rounded once");
  }
}

// Every gradient a case names, against central differences of its own forward output on the CPU
// (the forward and backward of one run must agree with each other, whatever the reference says):
// for a few seeded elements e of the input, (<cotangent, y(x + h e)> - <cotangent, y(x - h e)>) / 2h
// in double against the backward's element. float32 forwards make the difference noisy: h = 1e-2
// and a tolerance of 2% of the gradient plus 1% of its largest element. Elements within 2h of a
// kink (ReLU at 0, a max pool's tie) would differ by design: ReLU's inputs near 0 are skipped,
// and a max pool's windows in these cases have no values that close (seeded).
BOOST_AUTO_TEST_CASE(gradients_match_finite_differences) {
  st::Context ctx;
  constexpr double h = 1e-2;
  constexpr int kElements = 6;
  int checked = 0;
  for (const OpCase& c : st::test::op_cases()) {
    if (c.gradients.empty()) continue;
    const NamedTensors inputs = c.make_inputs();
    int64_t size = 0;
    for (const auto& [name, t] : inputs) size += t.numel();
    if (size > 200000) continue;  // the large cases check indexing, not calculus
    NamedTensors base = c.run(ctx, inputs);
    for (const st::test::GradientSpec& g : c.gradients) {
      BOOST_TEST_CONTEXT(c.name << ": d" << g.output << "/d" << g.input) {
        const std::vector<double> grad = st::test::tensor_values(output(base, g.gradient));
        NamedTensors inputs_copy = copy_of(inputs);
        const std::vector<double> cot =
            g.cotangent.empty() ? std::vector<double>{1.0} : st::test::tensor_values(output(inputs_copy, g.cotangent));
        double largest = 0.0;
        for (double v : grad) largest = std::max(largest, std::fabs(v));
        st::Rng rng(std::hash<std::string>{}(c.name + g.input) % 1000003);
        for (int k = 0; k < kElements; ++k) {
          NamedTensors plus = copy_of(inputs), minus = copy_of(inputs);
          st::Tensor& xp = output(plus, g.input);
          st::Tensor& xm = output(minus, g.input);
          const int64_t e = static_cast<int64_t>(rng.below(static_cast<uint64_t>(xp.numel())));
          const float x0 = xp.data<float>()[e];
          if (c.ops.front() == "relu_forward" && std::fabs(x0) < 2 * h) continue;
          xp.data<float>()[e] = static_cast<float>(x0 + h);
          xm.data<float>()[e] = static_cast<float>(x0 - h);
          const double step = static_cast<double>(xp.data<float>()[e]) - xm.data<float>()[e];  // as rounded
          NamedTensors out_plus = c.run(ctx, plus), out_minus = c.run(ctx, minus);
          const std::vector<double> yp = st::test::tensor_values(output(out_plus, g.output));
          const std::vector<double> ym = st::test::tensor_values(output(out_minus, g.output));
          double fd = 0.0;
          for (std::size_t i = 0; i < yp.size(); ++i) fd += cot[g.cotangent.empty() ? 0 : i] * (yp[i] - ym[i]);
          fd /= step;
          BOOST_TEST(std::fabs(fd - grad[e]) <= 2e-2 * std::fabs(grad[e]) + 1e-2 * largest + 1e-6,
                     "element " << e << ": finite difference " << fd << ", backward " << grad[e]);
          ++checked;
        }
      }
    }
  }
  BOOST_TEST(checked >= 100, checked << " elements checked");
}

// The list is read against the op registry: every registered op has at least two cases (forward
// and backward together where an op has both), and every case names registered ops only. An op
// added without a case fails here.
BOOST_AUTO_TEST_CASE(cases_cover_every_op_and_are_seeded) {
  std::set<std::string> ops;
  for (const st::ops::OpInfo& op : st::ops::registered_ops())
    if (op.name.rfind("test_only_", 0) != 0) ops.insert(op.name);  // unit.op_registry's own op has no case
  std::map<std::string, int> cases_per_op;
  std::set<std::string> names;
  for (const OpCase& c : st::test::op_cases()) {
    BOOST_TEST(names.insert(c.name).second, "two cases named " << c.name);
    BOOST_TEST(!c.outputs.empty(), c.name);
    for (const std::string& op : c.ops) {
      BOOST_TEST(ops.count(op) == 1, c.name << " names an unknown op " << op);
      ++cases_per_op[op];
    }
    // Seeded: a second call makes the same inputs.
    const NamedTensors a = c.make_inputs(), b = c.make_inputs();
    BOOST_TEST_REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      BOOST_TEST(a[i].first == b[i].first);
      // Bit for bit (a NaN planted in an input equals no value, itself included).
      BOOST_TEST((a[i].second.bytes() == b[i].second.bytes() &&
                  std::memcmp(a[i].second.raw(), b[i].second.raw(), a[i].second.bytes()) == 0),
                 c.name << ": input " << a[i].first << " differs between calls");
    }
  }
  for (const std::string& op : ops) BOOST_TEST(cases_per_op[op] >= 2, op << " has " << cases_per_op[op] << " case(s)");
}

BOOST_AUTO_TEST_CASE(runs_leave_inputs_unchanged) {
  // Running stats and add_inplace work on copies: a case runs on several backends from one set
  // of inputs, and the reference reads them after the run.
  st::Context ctx;
  for (const char* name : {"batch_norm training 2x5x5x17", "add 1x7x7x13", "relu 2x5x5x17 in place"}) {
    BOOST_TEST_CONTEXT(name) {
      const OpCase& c = case_named(name);
      const NamedTensors inputs = c.make_inputs();
      const NamedTensors before = copy_of(inputs);
      c.run(ctx, inputs);
      for (std::size_t i = 0; i < inputs.size(); ++i)
        BOOST_TEST(st::test::tensor_values(inputs[i].second) == st::test::tensor_values(before[i].second),
                   "input " << inputs[i].first << " changed");
    }
  }
}

BOOST_AUTO_TEST_CASE(comparison_reports_what_differs) {
  st::Context ctx;
  const OpCase& c = case_named("conv2d k7 s2 p3 N1 15x15 C3->O13");
  const NamedTensors inputs = c.make_inputs();
  const NamedTensors cpu = c.run(ctx, inputs);
  BOOST_TEST(all_ok(st::test::compare_backends(c, cpu, cpu)));

  // Within tolerance: half the allowed difference passes.
  NamedTensors close = copy_of(cpu);
  float& dx0 = output(close, "dx").data<float>()[5];
  const double allowed = c.outputs[1].backend.abs + c.outputs[1].backend.rel * std::fabs(dx0);
  BOOST_TEST_REQUIRE(c.outputs[1].output == "dx");
  dx0 = static_cast<float>(dx0 + 0.5 * allowed);
  BOOST_TEST(all_ok(st::test::compare_backends(c, close, cpu)));

  // One element of dw off by 1e-3: dw fails, y and dx pass, and the message names the element.
  NamedTensors perturbed = copy_of(cpu);
  output(perturbed, "dw").data<float>()[17] += 1e-3f;
  auto checks = st::test::compare_backends(c, perturbed, cpu);
  BOOST_TEST(failures(checks) == "dw");
  for (const OutputCheck& check : checks) {
    if (check.output != "dw") continue;
    BOOST_TEST(check.ratio > 1.0);
    BOOST_TEST(check.max_abs > 0.9e-3);
    BOOST_TEST(st::test::describe(check).find("worst element 17 of") != std::string::npos, st::test::describe(check));
  }
  // Against the float64 reference as well.
  checks = st::test::compare_with_reference(c, perturbed, c.reference(inputs));
  BOOST_TEST(failures(checks) == "dw");

  // NaN (an element the op left unwritten) never passes, even with a huge tolerance.
  NamedTensors unwritten = copy_of(cpu);
  output(unwritten, "y").data<float>()[0] = std::numeric_limits<float>::quiet_NaN();
  BOOST_TEST(failures(st::test::compare_backends(c, unwritten, cpu)) == "y");
  BOOST_TEST(!st::test::compare_values("y", {std::nan("")}, {1.0}, {1e30, 1e30}).ok);
  BOOST_TEST(!st::test::compare_values("y", {1.0}, {std::nan("")}, {1e30, 1e30}).ok);
  BOOST_TEST(!st::test::compare_values("y", {INFINITY}, {1.0}, {1e30, 1e30}).ok);

  // A missing output, a wrong shape, a wrong dtype and an output without a tolerance are failures.
  NamedTensors missing = copy_of(cpu);
  missing.erase(missing.begin() + 1);
  BOOST_TEST(failures(st::test::compare_backends(c, missing, cpu)) == "dx");
  BOOST_TEST(failures(st::test::compare_with_reference(c, missing, c.reference(inputs))) == "dx");
  NamedTensors reshaped = copy_of(cpu);
  output(reshaped, "y") = output(reshaped, "y").reshape({output(reshaped, "y").numel()});
  BOOST_TEST(failures(st::test::compare_backends(c, reshaped, cpu)) == "y");
  NamedTensors extra = copy_of(cpu);
  extra.emplace_back("dz", st::Tensor::zeros({1}));
  BOOST_TEST(failures(st::test::compare_backends(c, extra, cpu)) == "dz");

  // In a mixed precision a non-exact output may also differ by kAmpBackendUnits units of the
  // format at its largest magnitude (each backend rounds to 16 bits), no more; exact ones stay exact.
  const double unit = st::test::amp_unit_of(st::Precision::amp_fp16);
  BOOST_TEST(unit == std::ldexp(1.0, -10));
  BOOST_TEST(st::test::amp_unit_of(st::Precision::amp_bf16) == std::ldexp(1.0, -7));
  BOOST_TEST(st::test::amp_unit_of(st::Precision::fp32) == 0.0);
  BOOST_TEST_REQUIRE(c.outputs[0].output == "y");
  NamedTensors amp_close = copy_of(cpu);
  double largest = 0.0;
  for (double v : st::test::tensor_values(output(amp_close, "y"))) largest = std::max(largest, std::fabs(v));
  const float y5 = output(amp_close, "y").data<float>()[5];
  const double y_allowed = c.outputs[0].backend.abs + c.outputs[0].backend.rel * std::fabs(y5);
  output(amp_close, "y").data<float>()[5] = static_cast<float>(y5 + y_allowed + 1.5 * unit * largest);
  BOOST_TEST(failures(st::test::compare_backends(c, amp_close, cpu)) == "y");
  BOOST_TEST(all_ok(st::test::compare_backends(c, amp_close, cpu, unit)));
  NamedTensors amp_far = copy_of(cpu);
  output(amp_far, "y").data<float>()[5] = static_cast<float>(y5 + y_allowed + 2.5 * unit * largest);
  BOOST_TEST(failures(st::test::compare_backends(c, amp_far, cpu, unit)) == "y");
  const OpCase& rounding = case_named("round_to_half fp16 in place (ties, subnormals, overflow, inf, NaN)");
  const NamedTensors rounded = rounding.run(ctx, rounding.make_inputs());
  NamedTensors off = copy_of(rounded);
  float& r0 = output(off, "y").data<float>()[0];
  r0 = std::nextafter(r0, INFINITY);
  BOOST_TEST(failures(st::test::compare_backends(rounding, off, rounded, unit)) == "y");

  // Exact tolerances: one ulp is a failure.
  BOOST_TEST(st::test::compare_values("n", {3.0}, {3.0}, {0.0, 0.0}).ok);
  BOOST_TEST(!st::test::compare_values("n", {std::nextafter(3.0f, 4.0f)}, {3.0}, {0.0, 0.0}).ok);
  BOOST_TEST(!st::test::compare_values("n", {1.0, 2.0}, {1.0}, {1.0, 1.0}).ok);
}

BOOST_AUTO_TEST_SUITE_END()
