// Dropout: argument checks and per-device dispatch. The kernels live in src/ops/<device>/ and
// share the stream's arithmetic (src/ops/dropout_mask.hpp).
#include "scaletrain/ops/dropout.hpp"

#include <cmath>

#include "ops/op.hpp"
#include "scaletrain/config.hpp"
#include "scaletrain/core/error.hpp"

namespace scaletrain::ops {

// The kernels, declared from the public signatures, and the one dispatch point per op (ops/op.hpp).
using DropoutForwardFn = void(Context& ctx, const DropoutParams& params, const Tensor& x, Tensor& y);
namespace cpu {
DropoutForwardFn dropout_forward;
}
namespace cuda {
DropoutForwardFn dropout_forward;
}
const Op<DropoutForwardFn> dropout_forward_op{
    "dropout_forward",
    {cpu::dropout_forward},
    with_half_storage<DropoutForwardFn>({ST_CUDA_KERNEL(cuda::dropout_forward)})};
using DropoutBackwardFn = void(Context& ctx, const DropoutParams& params, const Tensor& dy, Tensor& dx);
namespace cpu {
DropoutBackwardFn dropout_backward;
}
namespace cuda {
DropoutBackwardFn dropout_backward;
}
const Op<DropoutBackwardFn> dropout_backward_op{
    "dropout_backward",
    {cpu::dropout_backward},
    with_half_storage<DropoutBackwardFn>({ST_CUDA_KERNEL(cuda::dropout_backward)})};

namespace {

void check_p(double p, const char* op) {
  // Written so that NaN fails too. p = 1 would zero everything and scale by infinity.
  ST_CHECK(p >= 0.0 && p < 1.0, op << ": p must be in [0, 1), got " << p);
}

void check_pair(const Context& ctx, const Tensor& in, const Tensor& out, const char* op, const char* in_name,
                const char* out_name) {
  check_tensor(ctx, in, op, in_name);
  check_tensor(ctx, out, in.shape(), op, out_name);
}

}  // namespace

uint32_t dropout_threshold(double p) {
  check_p(p, "dropout");
  // (1 - p) * 2^32 is exact in double; halves round away from zero.
  const double t = std::round(std::ldexp(1.0 - p, 32));
  return t >= 4294967295.0 ? 0xFFFFFFFFu : static_cast<uint32_t>(t);
}

float dropout_scale(double p) {
  check_p(p, "dropout");
  return static_cast<float>(1.0 / (1.0 - p));
}

void dropout_forward(Context& ctx, const DropoutParams& params, const Tensor& x, Tensor& y) {
  const char* op = "dropout_forward";
  check_p(params.p, op);
  check_pair(ctx, x, y, op, "x", "y");
  return dropout_forward_op(ctx, params, x, y);
}

void dropout_backward(Context& ctx, const DropoutParams& params, const Tensor& dy, Tensor& dx) {
  const char* op = "dropout_backward";
  check_p(params.p, op);
  check_pair(ctx, dy, dx, op, "dy", "dx");
  return dropout_backward_op(ctx, params, dy, dx);
}

}  // namespace scaletrain::ops
