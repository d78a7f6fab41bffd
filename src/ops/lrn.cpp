// Local response normalisation across channels: argument checks and per-device dispatch. Kernels
// in src/ops/<device>/.
#include "scaletrain/ops/lrn.hpp"

#include <cmath>

#include "ops/op.hpp"
#include "scaletrain/core/error.hpp"

namespace scaletrain::ops {

// The kernels, declared from the public signatures, and the one dispatch point per op (ops/op.hpp).
using LrnForwardFn = void(Context& ctx, const LrnParams& p, const Tensor& x, Tensor& y);
namespace cpu {
LrnForwardFn lrn_forward;
}
namespace cuda {
LrnForwardFn lrn_forward;
}
const Op<LrnForwardFn> lrn_forward_op{
    "lrn_forward", {cpu::lrn_forward}, with_half_storage<LrnForwardFn>({ST_CUDA_KERNEL(cuda::lrn_forward)})};
using LrnBackwardFn = void(Context& ctx, const LrnParams& p, const Tensor& x, const Tensor& dy, Tensor& dx);
namespace cpu {
LrnBackwardFn lrn_backward;
}
namespace cuda {
LrnBackwardFn lrn_backward;
}
const Op<LrnBackwardFn> lrn_backward_op{
    "lrn_backward", {cpu::lrn_backward}, with_half_storage<LrnBackwardFn>({ST_CUDA_KERNEL(cuda::lrn_backward)})};

namespace {

void check_params(const LrnParams& p, const char* op) {
  ST_CHECK(p.size >= 1 && p.size % 2 == 1,
           op << ": size must be odd and >= 1 (PyTorch's and Caffe's windows differ for even sizes), got " << p.size);
  ST_CHECK(std::isfinite(p.alpha) && p.alpha >= 0.0f, op << ": alpha must be finite and >= 0, got " << p.alpha);
  ST_CHECK(std::isfinite(p.beta) && p.beta >= 0.0f, op << ": beta must be finite and >= 0, got " << p.beta);
  ST_CHECK(std::isfinite(p.k) && p.k > 0.0f, op << ": k must be finite and > 0, got " << p.k);
}

void check_channels_last(const Tensor& t, const char* op, const char* name) {
  ST_CHECK(t.ndim() >= 2,
           op << ": " << name << " must be (..., C) with at least 2 dimensions, got " << shape_string(t.shape()));
}

}  // namespace

void lrn_forward(Context& ctx, const LrnParams& p, const Tensor& x, Tensor& y) {
  const char* op = "lrn_forward";
  check_params(p, op);
  check_tensor(ctx, x, op, "x");
  check_channels_last(x, op, "x");
  check_tensor(ctx, y, x.shape(), op, "y");
  check_no_overlap(y, x, op, "y", "x");
  return lrn_forward_op(ctx, p, x, y);
}

void lrn_backward(Context& ctx, const LrnParams& p, const Tensor& x, const Tensor& dy, Tensor& dx) {
  const char* op = "lrn_backward";
  check_params(p, op);
  check_tensor(ctx, x, op, "x");
  check_channels_last(x, op, "x");
  check_tensor(ctx, dy, x.shape(), op, "dy");
  check_tensor(ctx, dx, x.shape(), op, "dx");
  check_no_overlap(dx, x, op, "dx", "x");
  check_no_overlap(dx, dy, op, "dx", "dy");
  return lrn_backward_op(ctx, p, x, dy, dx);
}

}  // namespace scaletrain::ops
