// batch norm: argument checks and per-device dispatch. The kernels live in src/ops/<device>/.
#include "scaletrain/ops/batch_norm.hpp"

#include <utility>

#include "ops/op.hpp"
#include "scaletrain/config.hpp"
#include "scaletrain/core/error.hpp"

namespace scaletrain::ops {

// The kernels, declared from the public signatures, and the one dispatch point per op (ops/op.hpp).
using BatchNormForwardTrainingFn = void(Context& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& gamma,
                                        const Tensor& beta, Tensor& running_mean, Tensor& running_var, Tensor& y,
                                        Tensor& saved_mean, Tensor& saved_inv_std);
namespace cpu {
BatchNormForwardTrainingFn batch_norm_forward_training;
}
namespace cuda {
BatchNormForwardTrainingFn batch_norm_forward_training;
}
const Op<BatchNormForwardTrainingFn> batch_norm_forward_training_op{
    "batch_norm_forward_training",
    {cpu::batch_norm_forward_training},
    // On 4-D tensors cuDNN's persistent kernels, which are not documented as deterministic.
    with_half_storage<BatchNormForwardTrainingFn>({ST_CUDA_KERNEL(cuda::batch_norm_forward_training), false}),
    AmpOutputs::only(2)};  // y; the running and saved statistics stay fp32
using BatchNormForwardInferenceFn = void(Context& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& gamma,
                                         const Tensor& beta, const Tensor& running_mean, const Tensor& running_var,
                                         Tensor& y);
namespace cpu {
BatchNormForwardInferenceFn batch_norm_forward_inference;
}
namespace cuda {
BatchNormForwardInferenceFn batch_norm_forward_inference;
}
const Op<BatchNormForwardInferenceFn> batch_norm_forward_inference_op{
    "batch_norm_forward_inference",
    {cpu::batch_norm_forward_inference},
    with_half_storage<BatchNormForwardInferenceFn>({ST_CUDA_KERNEL(cuda::batch_norm_forward_inference)})};
using BatchNormBackwardFn = void(Context& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& dy,
                                 const Tensor& gamma, const Tensor& saved_mean, const Tensor& saved_inv_std, Tensor& dx,
                                 Tensor& dgamma, Tensor& dbeta);
namespace cpu {
BatchNormBackwardFn batch_norm_backward;
}
namespace cuda {
BatchNormBackwardFn batch_norm_backward;
}
const Op<BatchNormBackwardFn> batch_norm_backward_op{
    "batch_norm_backward",
    {cpu::batch_norm_backward},
    // On 4-D tensors cuDNN's persistent kernels, which are not documented as deterministic.
    with_half_storage<BatchNormBackwardFn>({ST_CUDA_KERNEL(cuda::batch_norm_backward), false}),
    AmpOutputs::only(0)};  // dx; dgamma and dbeta, fp32 parameters' gradients, stay fp32
using BatchNormAddReluForwardFn = void(Context& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& z,
                                       const Tensor& gamma, const Tensor& beta, Tensor& running_mean,
                                       Tensor& running_var, Tensor& y, Tensor& saved_mean, Tensor& saved_inv_std,
                                       Tensor& reserve);
namespace cpu {
BatchNormAddReluForwardFn batch_norm_add_relu_forward_training;
}
namespace cuda {
BatchNormAddReluForwardFn batch_norm_add_relu_forward_training;
}
const Op<BatchNormAddReluForwardFn> batch_norm_add_relu_forward_training_op{
    "batch_norm_add_relu_forward_training",
    {cpu::batch_norm_add_relu_forward_training},
    // cuDNN's persistent batch norm kernels are not documented as deterministic.
    with_half_storage<BatchNormAddReluForwardFn>({ST_CUDA_KERNEL(cuda::batch_norm_add_relu_forward_training), false}),
    AmpOutputs::only(2)};  // y; the statistics stay fp32, the reserve is bytes
using BatchNormAddReluBackwardFn = void(Context& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& y,
                                        const Tensor& dy, const Tensor& gamma, const Tensor& beta,
                                        const Tensor& saved_mean, const Tensor& saved_inv_std, const Tensor& reserve,
                                        Tensor& dx, Tensor& dz, Tensor& dgamma, Tensor& dbeta);
namespace cpu {
BatchNormAddReluBackwardFn batch_norm_add_relu_backward;
}
namespace cuda {
BatchNormAddReluBackwardFn batch_norm_add_relu_backward;
}
const Op<BatchNormAddReluBackwardFn> batch_norm_add_relu_backward_op{
    "batch_norm_add_relu_backward",
    {cpu::batch_norm_add_relu_backward},
    with_half_storage<BatchNormAddReluBackwardFn>({ST_CUDA_KERNEL(cuda::batch_norm_add_relu_backward), false}),
    AmpOutputs{0b11u}};  // dx and dz; dgamma and dbeta stay fp32

using BatchNormReluForwardFn = void(Context& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& gamma,
                                    const Tensor& beta, Tensor& running_mean, Tensor& running_var, Tensor& y,
                                    Tensor& saved_mean, Tensor& saved_inv_std, Tensor& reserve);
namespace cpu {
BatchNormReluForwardFn batch_norm_relu_forward_training;
}
namespace cuda {
BatchNormReluForwardFn batch_norm_relu_forward_training;
}
const Op<BatchNormReluForwardFn> batch_norm_relu_forward_training_op{
    "batch_norm_relu_forward_training",
    {cpu::batch_norm_relu_forward_training},
    // cuDNN's persistent batch norm kernels are not documented as deterministic.
    with_half_storage<BatchNormReluForwardFn>({ST_CUDA_KERNEL(cuda::batch_norm_relu_forward_training), false}),
    AmpOutputs::only(2)};  // y; the statistics stay fp32, the reserve is bytes
using BatchNormReluBackwardFn = void(Context& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& y,
                                     const Tensor& dy, const Tensor& gamma, const Tensor& beta,
                                     const Tensor& saved_mean, const Tensor& saved_inv_std, const Tensor& reserve,
                                     Tensor& dx, Tensor& dgamma, Tensor& dbeta);
namespace cpu {
BatchNormReluBackwardFn batch_norm_relu_backward;
}
namespace cuda {
BatchNormReluBackwardFn batch_norm_relu_backward;
}
const Op<BatchNormReluBackwardFn> batch_norm_relu_backward_op{
    "batch_norm_relu_backward",
    {cpu::batch_norm_relu_backward},
    with_half_storage<BatchNormReluBackwardFn>({ST_CUDA_KERNEL(cuda::batch_norm_relu_backward), false}),
    AmpOutputs::only(0)};  // dx; dgamma and dbeta stay fp32

namespace {

// x: (..., C) with at least two dimensions. Returns C.
int64_t check_input(const Context& ctx, const Tensor& x, const char* op) {
  check_tensor(ctx, x, op, "x");
  ST_CHECK(x.ndim() >= 2, op << ": x must have a batch and a channel dimension, e.g. (N, H, W, C) or (N, C), got "
                             << shape_string(x.shape()));
  ST_CHECK(x.dim(-1) > 0, op << ": x has no channels: " << shape_string(x.shape()));
  return x.dim(-1);
}

void check_channel_tensor(const Context& ctx, const Tensor& t, int64_t c, const char* op, const char* name) {
  check_tensor(ctx, t, op, name);
  check_shape(t, {c}, op, name);
}

void check_params(const BatchNormParams& p, const char* op) {
  ST_CHECK(p.eps > 0.0f, op << ": eps must be > 0, got " << p.eps);
  ST_CHECK(p.momentum >= 0.0f && p.momentum <= 1.0f, op << ": momentum must be in [0, 1], got " << p.momentum);
}

// Batch norm's training forward arguments (also the fused op's): x (..., C) with more than one
// value per channel, the per-channel tensors of C, y of x's shape.
void check_training_forward(const Context& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& gamma,
                            const Tensor& beta, const Tensor& running_mean, const Tensor& running_var, const Tensor& y,
                            const Tensor& saved_mean, const Tensor& saved_inv_std, const char* op) {
  check_params(p, op);
  const int64_t c = check_input(ctx, x, op);
  // As PyTorch: the unbiased variance of a single value is undefined.
  ST_CHECK(x.numel() / c > 1,
           op << ": training needs more than one value per channel, got x " << shape_string(x.shape()));
  check_channel_tensor(ctx, gamma, c, op, "gamma");
  check_channel_tensor(ctx, beta, c, op, "beta");
  check_channel_tensor(ctx, running_mean, c, op, "running_mean");
  check_channel_tensor(ctx, running_var, c, op, "running_var");
  check_channel_tensor(ctx, saved_mean, c, op, "saved_mean");
  check_channel_tensor(ctx, saved_inv_std, c, op, "saved_inv_std");
  check_tensor(ctx, y, op, "y");
  check_shape(y, x.shape(), op, "y");
}

// The fused ops' reserve: undefined (the op allocates it), or bytes on the op's device.
void check_reserve(const Context& ctx, const Tensor& reserve, const char* op) {
  ST_CHECK(!reserve.defined() || (reserve.dtype() == DType::u8 && reserve.device() == ctx.device()),
           op << ": reserve must be u8 on " << device_name(ctx.device()));
}

}  // namespace

void batch_norm_forward_training(Context& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& gamma,
                                 const Tensor& beta, Tensor& running_mean, Tensor& running_var, Tensor& y,
                                 Tensor& saved_mean, Tensor& saved_inv_std) {
  check_training_forward(ctx, p, x, gamma, beta, running_mean, running_var, y, saved_mean, saved_inv_std,
                         "batch_norm_forward_training");
  return batch_norm_forward_training_op(ctx, p, x, gamma, beta, running_mean, running_var, y, saved_mean,
                                        saved_inv_std);
}

void batch_norm_forward_inference(Context& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& gamma,
                                  const Tensor& beta, const Tensor& running_mean, const Tensor& running_var,
                                  Tensor& y) {
  const char* op = "batch_norm_forward_inference";
  check_params(p, op);
  const int64_t c = check_input(ctx, x, op);
  check_channel_tensor(ctx, gamma, c, op, "gamma");
  check_channel_tensor(ctx, beta, c, op, "beta");
  check_channel_tensor(ctx, running_mean, c, op, "running_mean");
  check_channel_tensor(ctx, running_var, c, op, "running_var");
  check_tensor(ctx, y, op, "y");
  check_shape(y, x.shape(), op, "y");
  return batch_norm_forward_inference_op(ctx, p, x, gamma, beta, running_mean, running_var, y);
}

void batch_norm_backward(Context& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                         const Tensor& saved_mean, const Tensor& saved_inv_std, Tensor& dx, Tensor& dgamma,
                         Tensor& dbeta) {
  const char* op = "batch_norm_backward";
  check_params(p, op);
  const int64_t c = check_input(ctx, x, op);
  check_tensor(ctx, dy, op, "dy");
  check_shape(dy, x.shape(), op, "dy");
  check_tensor(ctx, dx, op, "dx");
  check_shape(dx, x.shape(), op, "dx");
  check_channel_tensor(ctx, gamma, c, op, "gamma");
  check_channel_tensor(ctx, saved_mean, c, op, "saved_mean");
  check_channel_tensor(ctx, saved_inv_std, c, op, "saved_inv_std");
  check_channel_tensor(ctx, dgamma, c, op, "dgamma");
  check_channel_tensor(ctx, dbeta, c, op, "dbeta");
  return batch_norm_backward_op(ctx, p, x, dy, gamma, saved_mean, saved_inv_std, dx, dgamma, dbeta);
}

void batch_norm_add_relu_forward_training(Context& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& z,
                                          const Tensor& gamma, const Tensor& beta, Tensor& running_mean,
                                          Tensor& running_var, Tensor& y, Tensor& saved_mean, Tensor& saved_inv_std,
                                          Tensor& reserve) {
  const char* op = "batch_norm_add_relu_forward_training";
  check_training_forward(ctx, p, x, gamma, beta, running_mean, running_var, y, saved_mean, saved_inv_std, op);
  check_tensor(ctx, z, op, "z");
  check_shape(z, x.shape(), op, "z");
  check_no_overlap(y, x, op, "y", "x");
  check_no_overlap(y, z, op, "y", "z");
  check_reserve(ctx, reserve, op);
  return batch_norm_add_relu_forward_training_op(ctx, p, x, z, gamma, beta, running_mean, running_var, y, saved_mean,
                                                 saved_inv_std, reserve);
}

void batch_norm_add_relu_backward(Context& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& y,
                                  const Tensor& dy, const Tensor& gamma, const Tensor& beta, const Tensor& saved_mean,
                                  const Tensor& saved_inv_std, const Tensor& reserve, Tensor& dx, Tensor& dz,
                                  Tensor& dgamma, Tensor& dbeta) {
  const char* op = "batch_norm_add_relu_backward";
  check_params(p, op);
  const int64_t c = check_input(ctx, x, op);
  for (const auto& [t, name] : {std::pair<const Tensor&, const char*>{y, "y"}, {dy, "dy"}, {dx, "dx"}, {dz, "dz"}}) {
    check_tensor(ctx, t, op, name);
    check_shape(t, x.shape(), op, name);
  }
  // cuDNN's fused backward does not document running in place.
  check_no_overlap(dx, dz, op, "dx", "dz");
  check_no_overlap(dx, x, op, "dx", "x");
  check_no_overlap(dx, dy, op, "dx", "dy");
  check_no_overlap(dz, dy, op, "dz", "dy");
  check_no_overlap(dz, x, op, "dz", "x");
  check_channel_tensor(ctx, gamma, c, op, "gamma");
  check_channel_tensor(ctx, beta, c, op, "beta");
  check_channel_tensor(ctx, saved_mean, c, op, "saved_mean");
  check_channel_tensor(ctx, saved_inv_std, c, op, "saved_inv_std");
  check_channel_tensor(ctx, dgamma, c, op, "dgamma");
  check_channel_tensor(ctx, dbeta, c, op, "dbeta");
  return batch_norm_add_relu_backward_op(ctx, p, x, y, dy, gamma, beta, saved_mean, saved_inv_std, reserve, dx, dz,
                                         dgamma, dbeta);
}

void batch_norm_relu_forward_training(Context& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& gamma,
                                      const Tensor& beta, Tensor& running_mean, Tensor& running_var, Tensor& y,
                                      Tensor& saved_mean, Tensor& saved_inv_std, Tensor& reserve) {
  const char* op = "batch_norm_relu_forward_training";
  check_training_forward(ctx, p, x, gamma, beta, running_mean, running_var, y, saved_mean, saved_inv_std, op);
  check_no_overlap(y, x, op, "y", "x");  // backward reads x: y must not overwrite it
  check_reserve(ctx, reserve, op);
  return batch_norm_relu_forward_training_op(ctx, p, x, gamma, beta, running_mean, running_var, y, saved_mean,
                                             saved_inv_std, reserve);
}

void batch_norm_relu_backward(Context& ctx, const BatchNormParams& p, const Tensor& x, const Tensor& y,
                              const Tensor& dy, const Tensor& gamma, const Tensor& beta, const Tensor& saved_mean,
                              const Tensor& saved_inv_std, const Tensor& reserve, Tensor& dx, Tensor& dgamma,
                              Tensor& dbeta) {
  const char* op = "batch_norm_relu_backward";
  check_params(p, op);
  const int64_t c = check_input(ctx, x, op);
  for (const auto& [t, name] : {std::pair<const Tensor&, const char*>{y, "y"}, {dy, "dy"}, {dx, "dx"}}) {
    check_tensor(ctx, t, op, name);
    check_shape(t, x.shape(), op, name);
  }
  // cuDNN's fused backward does not document running in place.
  check_no_overlap(dx, x, op, "dx", "x");
  check_no_overlap(dx, y, op, "dx", "y");
  check_no_overlap(dx, dy, op, "dx", "dy");
  check_channel_tensor(ctx, gamma, c, op, "gamma");
  check_channel_tensor(ctx, beta, c, op, "beta");
  check_channel_tensor(ctx, saved_mean, c, op, "saved_mean");
  check_channel_tensor(ctx, saved_inv_std, c, op, "saved_inv_std");
  check_channel_tensor(ctx, dgamma, c, op, "dgamma");
  check_channel_tensor(ctx, dbeta, c, op, "dbeta");
  return batch_norm_relu_backward_op(ctx, p, x, y, dy, gamma, beta, saved_mean, saved_inv_std, reserve, dx, dgamma,
                                     dbeta);
}

BatchNormDescriptorDims batch_norm_descriptor_dims(const Shape& x) {
  ST_CHECK(!x.empty(), "batch_norm: x needs a channel dimension");
  const int64_t c = x.back();
  if (x.size() == 4) return {x[0], c, x[1], x[2]};
  int64_t m = 1;
  for (std::size_t i = 0; i + 1 < x.size(); ++i) m *= x[i];
  return {1, c, m, 1};
}

}  // namespace scaletrain::ops
