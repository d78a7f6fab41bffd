// ReLU and element-wise add: argument checks and per-device dispatch. Kernels in src/ops/<device>/.
#include "scaletrain/ops/activation.hpp"

#include "ops/op.hpp"
#include "scaletrain/config.hpp"
#include "scaletrain/core/error.hpp"

namespace scaletrain::ops {

// The kernels, declared from the public signatures, and the one dispatch point per op (ops/op.hpp).
using ReluForwardFn = void(Context& ctx, const Tensor& x, Tensor& y);
namespace cpu {
ReluForwardFn relu_forward;
}
namespace cuda {
ReluForwardFn relu_forward;
}
const Op<ReluForwardFn> relu_forward_op{
    "relu_forward", {cpu::relu_forward}, with_half_storage<ReluForwardFn>({ST_CUDA_KERNEL(cuda::relu_forward)})};
using ReluBackwardFn = void(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx);
namespace cpu {
ReluBackwardFn relu_backward;
}
namespace cuda {
ReluBackwardFn relu_backward;
}
const Op<ReluBackwardFn> relu_backward_op{
    "relu_backward", {cpu::relu_backward}, with_half_storage<ReluBackwardFn>({ST_CUDA_KERNEL(cuda::relu_backward)})};
using AddForwardFn = void(Context& ctx, const Tensor& a, const Tensor& b, Tensor& y);
namespace cpu {
AddForwardFn add_forward;
}
namespace cuda {
AddForwardFn add_forward;
}
const Op<AddForwardFn> add_forward_op{
    "add_forward", {cpu::add_forward}, with_half_storage<AddForwardFn>({ST_CUDA_KERNEL(cuda::add_forward)})};
using AddInplaceFn = void(Context& ctx, Tensor& y, const Tensor& x);
namespace cpu {
AddInplaceFn add_inplace;
}
namespace cuda {
AddInplaceFn add_inplace;
}
const Op<AddInplaceFn> add_inplace_op{
    "add_inplace", {cpu::add_inplace}, with_half_storage<AddInplaceFn>({ST_CUDA_KERNEL(cuda::add_inplace)})};

namespace {

// `t` is a valid tensor with the same shape as `like`.
void check_same_shape(const Context& ctx, const Tensor& t, const Tensor& like, const char* op, const char* name,
                      const char* like_name) {
  check_tensor(ctx, t, op, name);
  ST_CHECK(t.shape() == like.shape(), op << ": " << name << " has shape " << shape_string(t.shape()) << " but "
                                         << like_name << " has " << shape_string(like.shape()));
}

}  // namespace

void relu_forward(Context& ctx, const Tensor& x, Tensor& y) {
  check_tensor(ctx, x, "relu_forward", "x");
  check_same_shape(ctx, y, x, "relu_forward", "y", "x");
  return relu_forward_op(ctx, x, y);
}

void relu_backward(Context& ctx, const Tensor& y, const Tensor& dy, Tensor& dx) {
  check_tensor(ctx, y, "relu_backward", "y");
  check_same_shape(ctx, dy, y, "relu_backward", "dy", "y");
  check_same_shape(ctx, dx, y, "relu_backward", "dx", "y");
  return relu_backward_op(ctx, y, dy, dx);
}

void add_forward(Context& ctx, const Tensor& a, const Tensor& b, Tensor& y) {
  check_tensor(ctx, a, "add_forward", "a");
  check_same_shape(ctx, b, a, "add_forward", "b", "a");
  check_same_shape(ctx, y, a, "add_forward", "y", "a");
  return add_forward_op(ctx, a, b, y);
}

void add_inplace(Context& ctx, Tensor& y, const Tensor& x) {
  check_tensor(ctx, y, "add_inplace", "y");
  check_same_shape(ctx, x, y, "add_inplace", "x", "y");
  return add_inplace_op(ctx, y, x);
}

}  // namespace scaletrain::ops
