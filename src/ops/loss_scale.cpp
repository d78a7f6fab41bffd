// unscale_gradients: argument checks and the dispatch point. Kernels in src/ops/<device>/.
#include "scaletrain/ops/loss_scale.hpp"

#include <cmath>

#include "ops/op.hpp"
#include "scaletrain/core/error.hpp"

namespace scaletrain::ops {

using UnscaleGradientsFn = int64_t(Context& ctx, float inv_scale, Tensor& grad);
namespace cpu {
UnscaleGradientsFn unscale_gradients;
}
namespace cuda {
UnscaleGradientsFn unscale_gradients;
}
const Op<UnscaleGradientsFn> unscale_gradients_op{"unscale_gradients",
                                                  {cpu::unscale_gradients},
                                                  {ST_CUDA_KERNEL(cuda::unscale_gradients)},
                                                  AmpOutputs::none()};  // the optimizer's fp32 gradients

int64_t unscale_gradients(Context& ctx, float inv_scale, Tensor& grad) {
  check_tensor(ctx, grad, "unscale_gradients", "grad");
  ST_CHECK(std::isfinite(inv_scale) && inv_scale > 0,
           "unscale_gradients: the inverse loss scale must be positive and finite, got " << inv_scale);
  return unscale_gradients_op(ctx, inv_scale, grad);
}

}  // namespace scaletrain::ops
