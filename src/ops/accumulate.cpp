// accumulate_gradient: argument checks and the dispatch point. Kernels in src/ops/<device>/.
#include "scaletrain/ops/accumulate.hpp"

#include "ops/op.hpp"

namespace scaletrain::ops {

using AccumulateGradientFn = void(Context& ctx, AccumulateStage stage, float scale, Tensor& sum, Tensor& grad);
namespace cpu {
AccumulateGradientFn accumulate_gradient;
}
namespace cuda {
AccumulateGradientFn accumulate_gradient;
}
const Op<AccumulateGradientFn> accumulate_gradient_op{
    "accumulate_gradient",
    {cpu::accumulate_gradient},
    {ST_CUDA_KERNEL(cuda::accumulate_gradient)},
    AmpOutputs::none()};  // the sums of the micro-batches' gradients are fp32

void accumulate_gradient(Context& ctx, AccumulateStage stage, float scale, Tensor& sum, Tensor& grad) {
  check_tensor(ctx, grad, "accumulate_gradient", "grad");
  check_tensor(ctx, sum, grad.shape(), "accumulate_gradient", "sum");
  accumulate_gradient_op(ctx, stage, scale, sum, grad);
}

}  // namespace scaletrain::ops
