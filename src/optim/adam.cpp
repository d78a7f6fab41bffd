// Adam update on the flat buffers, in one vectorised OpenMP loop (see adam.hpp for the rule).
// The bias corrections are computed in double once per step, as PyTorch computes them in Python
// floats; the per-element arithmetic is float, operation for operation as torch.optim.Adam's
// single-tensor CPU path (exp_avg.mul_(b1).add_(g, alpha=1-b1), exp_avg_sq.mul_(b2)
// .addcmul_(g, g, value=1-b2), denom = sqrt(exp_avg_sq) / sqrt(bc2) + eps,
// w.addcdiv_(exp_avg, denom, value=-lr/bc1)), so a step agrees with it to float rounding.
#include "scaletrain/optim/adam.hpp"

#include <cmath>

#include "scaletrain/core/error.hpp"

namespace scaletrain::optim {
namespace {

constexpr int64_t kParallelMin = int64_t{1} << 15;  // parameters; the same bound as Sgd

void check_options(const AdamOptions& o) {
  ST_CHECK(o.beta1 >= 0.0 && o.beta1 < 1.0, "Adam beta1 must be in [0, 1) (MLPerf NCF: 0.9), got " << o.beta1);
  ST_CHECK(o.beta2 >= 0.0 && o.beta2 < 1.0, "Adam beta2 must be in [0, 1) (MLPerf NCF: 0.999), got " << o.beta2);
  ST_CHECK(o.epsilon > 0.0 && std::isfinite(o.epsilon),
           "Adam epsilon must be a finite value > 0 (MLPerf NCF: 1e-8), got " << o.epsilon);
}

}  // namespace

AdamOptions ncf_large_batch_adam_options() { return AdamOptions{0.25, 0.5, 1e-8}; }

Adam::Adam(nn::ParameterSet& params, const AdamOptions& options) : Optimizer(params), options_(options) {
  check_options(options);
  second_moment_ = Tensor::zeros(params.flat_values().shape(), DType::f32, params.flat_values().device());
}

void Adam::step(Context& ctx, double lr) {
  ST_CHECK(std::isfinite(lr), "learning rate " << lr << " is not finite");
  // Its kernels are host loops over the flat buffers: no GPU version yet (the CUDA backend's
  // first models train with SGD).
  ST_CHECK(ctx.device() == Device::cpu,
           "--optimizer adam runs on the CPU only; its parameters are on " << device_name(ctx.device()));
  const double t = static_cast<double>(steps() + 1);
  const double bias_correction1 = 1.0 - std::pow(options_.beta1, t);
  const double bias_correction2_sqrt = std::sqrt(1.0 - std::pow(options_.beta2, t));
  float* w = params_.flat_values().data<float>();
  const float* grad = params_.flat_grads().data<float>();
  float* m = momentum_.data<float>();
  float* v = second_moment_.data<float>();
  const int64_t n = params_.flat_values().numel();
  const float b1 = static_cast<float>(options_.beta1), one_minus_b1 = static_cast<float>(1.0 - options_.beta1);
  const float b2 = static_cast<float>(options_.beta2), one_minus_b2 = static_cast<float>(1.0 - options_.beta2);
  const float eps = static_cast<float>(options_.epsilon);
  const float bc2_sqrt = static_cast<float>(bias_correction2_sqrt);
  const float neg_step_size = static_cast<float>(-lr / bias_correction1);
#pragma omp parallel for simd schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i];
    const float mi = m[i] * b1 + one_minus_b1 * g;
    const float vi = v[i] * b2 + one_minus_b2 * (g * g);
    m[i] = mi;
    v[i] = vi;
    const float denom = std::sqrt(vi) / bc2_sqrt + eps;
    w[i] = w[i] + neg_step_size * (mi / denom);
  }
  count_step();
}

Json Adam::describe() const {
  Json j = Json::object();
  j.set("name", name());
  j.set("beta1", options_.beta1);
  j.set("beta2", options_.beta2);
  j.set("epsilon", options_.epsilon);
  return j;
}

}  // namespace scaletrain::optim
