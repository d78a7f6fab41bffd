// Gradient accumulation (gradient_accumulation.hpp).
#include "scaletrain/train/gradient_accumulation.hpp"

#include "scaletrain/core/error.hpp"
#include "scaletrain/ops/accumulate.hpp"

namespace scaletrain::train {

GradientAccumulator::GradientAccumulator(Context& ctx, nn::ParameterSet& params, int micro_batches,
                                         std::function<void(int)> ready)
    : ctx_(ctx), params_(params), micro_batches_(micro_batches), ready_(std::move(ready)) {
  ST_CHECK(micro_batches_ >= 1, "internal: " << micro_batches_ << " micro-batches per step");
  if (micro_batches_ > 1) sum_ = Tensor::empty(params_.flat_grads().shape(), DType::f32, params_.flat_grads().device());
}

void GradientAccumulator::on_grad_ready(int i) {
  if (micro_batches_ == 1) {
    ready_(i);
    return;
  }
  const nn::TensorInfo& info = params_.parameter_info(i);
  Tensor g = Tensor::view_of(params_.flat_grads(), info.offset, info.shape);
  Tensor s = Tensor::view_of(sum_, info.offset, info.shape);
  const ops::AccumulateStage stage = micro_ == 0           ? ops::AccumulateStage::first
                                     : !last_micro_batch() ? ops::AccumulateStage::middle
                                                           : ops::AccumulateStage::last;
  ops::accumulate_gradient(ctx_, stage, 1.0f / static_cast<float>(micro_batches_), s, g);
  if (stage == ops::AccumulateStage::last) ready_(i);
}

}  // namespace scaletrain::train
