// Masked softmax over the last dimension (attention): argument checks and per-device dispatch.
// Kernels in src/ops/<device>/.
#include "scaletrain/ops/softmax.hpp"

#include "ops/op.hpp"
#include "scaletrain/core/error.hpp"

namespace scaletrain::ops {

// The kernels, declared from the public signatures, and the one dispatch point per op (ops/op.hpp).
using MaskedSoftmaxForwardFn = void(Context& ctx, const SoftmaxMask& mask, const Tensor& x, const Tensor& key_lengths,
                                    Tensor& y);
namespace cpu {
MaskedSoftmaxForwardFn masked_softmax_forward;
}
namespace cuda {
MaskedSoftmaxForwardFn masked_softmax_forward;
}
const Op<MaskedSoftmaxForwardFn> masked_softmax_forward_op{
    "masked_softmax_forward",
    {cpu::masked_softmax_forward},
    with_half_storage<MaskedSoftmaxForwardFn>({ST_CUDA_KERNEL(cuda::masked_softmax_forward)})};
using MaskedSoftmaxBackwardFn = void(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx);
namespace cpu {
MaskedSoftmaxBackwardFn masked_softmax_backward;
}
namespace cuda {
MaskedSoftmaxBackwardFn masked_softmax_backward;
}
const Op<MaskedSoftmaxBackwardFn> masked_softmax_backward_op{
    "masked_softmax_backward",
    {cpu::masked_softmax_backward},
    with_half_storage<MaskedSoftmaxBackwardFn>({ST_CUDA_KERNEL(cuda::masked_softmax_backward)})};

namespace {

void check_scores(const Tensor& x, const char* op, const char* name) {
  ST_CHECK(x.ndim() == 4 && x.dim(3) >= 1,
           op << ": " << name << " must be (N, H, Lq, Lk) with Lk >= 1, got " << shape_string(x.shape()));
}

}  // namespace

void masked_softmax_forward(Context& ctx, const SoftmaxMask& mask, const Tensor& x, const Tensor& key_lengths,
                            Tensor& y) {
  const char* op = "masked_softmax_forward";
  check_tensor(ctx, x, op, "x");
  check_scores(x, op, "x");
  ST_CHECK(key_lengths.defined() && key_lengths.dtype() == DType::i32 && key_lengths.device() == ctx.device(),
           op << ": key_lengths must be int32 on " << device_name(ctx.device()));
  check_shape(key_lengths, {x.dim(0)}, op, "key_lengths");
  check_tensor(ctx, y, x.shape(), op, "y");
  check_no_overlap(y, x, op, "y", "x");
  return masked_softmax_forward_op(ctx, mask, x, key_lengths, y);
}

void masked_softmax_backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx) {
  const char* op = "masked_softmax_backward";
  check_tensor(ctx, y, op, "y");
  check_scores(y, op, "y");
  check_tensor(ctx, dy, y.shape(), op, "dy");
  check_tensor(ctx, dx, y.shape(), op, "dx");
  check_no_overlap(dx, y, op, "dx", "y");
  check_no_overlap(dx, dy, op, "dx", "dy");
  return masked_softmax_backward_op(ctx, y, dy, dx);
}

}  // namespace scaletrain::ops
