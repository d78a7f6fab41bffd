// Adam update on the flat buffers: the op adam_update (ops/adam.hpp), one pass on any device.
// The bias corrections are computed in double once per step, as PyTorch computes them in Python
// floats; the per-element arithmetic is float, operation for operation as torch.optim.Adam's
// single-tensor CPU path (exp_avg.mul_(b1).add_(g, alpha=1-b1), exp_avg_sq.mul_(b2)
// .addcmul_(g, g, value=1-b2), denom = sqrt(exp_avg_sq) / sqrt(bc2) + eps,
// w.addcdiv_(exp_avg, denom, value=-lr/bc1)), so a step agrees with it to float rounding.
#include "scaletrain/optim/adam.hpp"

#include <cmath>

#include "scaletrain/core/error.hpp"
#include "scaletrain/ops/adam.hpp"

namespace scaletrain::optim {
namespace {

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

ops::AdamUpdateParams Adam::update_params(double lr) const {
  ST_CHECK(std::isfinite(lr), "learning rate " << lr << " is not finite");
  const double t = static_cast<double>(steps() + 1);
  ops::AdamUpdateParams p;
  p.beta1 = static_cast<float>(options_.beta1);
  p.one_minus_beta1 = static_cast<float>(1.0 - options_.beta1);
  p.beta2 = static_cast<float>(options_.beta2);
  p.one_minus_beta2 = static_cast<float>(1.0 - options_.beta2);
  p.epsilon = static_cast<float>(options_.epsilon);
  p.bias_correction2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(options_.beta2, t)));
  p.neg_step_size = static_cast<float>(-lr / (1.0 - std::pow(options_.beta1, t)));
  return p;
}

void Adam::step(Context& ctx, double lr) {
  const ops::AdamUpdateParams p = update_params(lr);
  for (const auto& r : params_.trained_ranges()) {
    Tensor values = range_of(params_.flat_values(), r), m = range_of(momentum_, r), v = range_of(second_moment_, r);
    ops::adam_update(ctx, p, values, range_of(params_.flat_grads(), r), m, v);
  }
  count_step();
}

ops::OpNames Adam::ops() const { return {"adam_update"}; }

// Adam over the dense parameters (in merged ranges, as Adam::step), then each trained lookup-only
// table row by row.
void LazyAdam::step(Context& ctx, double lr) {
  const ops::AdamUpdateParams p = update_params(lr);
  Tensor& m_flat = momentum_buffer();
  Tensor& v_flat = second_moment_buffer();
  for (const auto& r : params_.trained_dense_ranges()) {
    Tensor values = range_of(params_.flat_values(), r), m = range_of(m_flat, r), v = range_of(v_flat, r);
    ops::adam_update(ctx, p, values, range_of(params_.flat_grads(), r), m, v);
  }
  for (int i = 0; i < params_.num_parameters(); ++i) {
    if (!params_.lookup_only(i) || params_.frozen(i)) continue;
    const nn::TensorInfo& info = params_.parameter_info(i);
    const std::pair<int64_t, int64_t> r{info.offset, info.offset + shape_numel(info.shape)};
    Tensor values = range_of(params_.flat_values(), r), m = range_of(m_flat, r), v = range_of(v_flat, r);
    ops::lazy_adam_update(ctx, p, values, range_of(params_.flat_grads(), r), m, v, info.shape[1]);
  }
  count_step();
}

ops::OpNames LazyAdam::ops() const { return {"adam_update", "lazy_adam_update"}; }

Json Adam::describe() const {
  Json j = Json::object();
  j.set("name", name());
  j.set("beta1", options_.beta1);
  j.set("beta2", options_.beta2);
  j.set("epsilon", options_.epsilon);
  return j;
}

}  // namespace scaletrain::optim
