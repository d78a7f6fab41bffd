// Binary cross-entropy on logits: argument checks and per-device dispatch. Kernels in
// src/ops/<device>/.
#include "scaletrain/ops/sigmoid_bce.hpp"

#include <cmath>

#include "ops/op.hpp"
#include "scaletrain/core/error.hpp"

namespace scaletrain::ops {

// The kernels, declared from the public signatures, and the one dispatch point per op (ops/op.hpp).
using SigmoidBceWithLogitsFn = double(Context& ctx, const Tensor& logits, const Tensor& targets, Tensor& dlogits,
                                      double grad_scale);
namespace cpu {
SigmoidBceWithLogitsFn sigmoid_bce_with_logits;
}
namespace cuda {
SigmoidBceWithLogitsFn sigmoid_bce_with_logits;
}
const Op<SigmoidBceWithLogitsFn> sigmoid_bce_with_logits_op{
    "sigmoid_bce_with_logits",
    {cpu::sigmoid_bce_with_logits},
    with_half_storage<SigmoidBceWithLogitsFn>({ST_CUDA_KERNEL(cuda::sigmoid_bce_with_logits)})};

double sigmoid_bce_with_logits(Context& ctx, const Tensor& logits, const Tensor& targets, Tensor& dlogits,
                               double grad_scale) {
  const char* op = "sigmoid_bce_with_logits";
  check_tensor(ctx, logits, op, "logits");
  ST_CHECK(logits.ndim() == 1 || (logits.ndim() == 2 && logits.dim(1) == 1),
           op << ": logits must be (N) or (N, 1), got " << shape_string(logits.shape()));
  ST_CHECK(logits.dim(0) > 0, op << ": empty batch (the mean over no samples is undefined)");
  check_tensor(ctx, targets, logits.shape(), op, "targets");
  if (dlogits.defined()) check_tensor(ctx, dlogits, logits.shape(), op, "dlogits");
  ST_CHECK(std::isfinite(grad_scale) && grad_scale >= 0.0,
           op << ": the gradient's scale must be a finite value >= 0, got " << grad_scale);
  return sigmoid_bce_with_logits_op(ctx, logits, targets, dlogits, grad_scale);
}

}  // namespace scaletrain::ops
