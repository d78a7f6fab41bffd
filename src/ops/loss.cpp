// Softmax cross-entropy with label smoothing (PyTorch's CrossEntropyLoss(label_smoothing=eps),
// mean over the batch) and top-1 counting: argument checks and per-device dispatch. Kernels in
// src/ops/<device>/. The label range is checked by each kernel, where the labels are: on the host
// for the CPU, on the device for CUDA (reading them here would cost the GPU a copy).
#include "scaletrain/ops/loss.hpp"

#include <cmath>

#include "ops/op.hpp"
#include "scaletrain/config.hpp"
#include "scaletrain/core/error.hpp"

namespace scaletrain::ops {

// The kernels, declared from the public signatures, and the one dispatch point per op (ops/op.hpp).
using SoftmaxCrossEntropyFn = double(Context& ctx, const Tensor& logits, const Tensor& labels, float label_smoothing,
                                     Tensor& dlogits, double grad_scale);
namespace cpu {
SoftmaxCrossEntropyFn softmax_cross_entropy;
}
namespace cuda {
SoftmaxCrossEntropyFn softmax_cross_entropy;
}
const Op<SoftmaxCrossEntropyFn> softmax_cross_entropy_op{
    "softmax_cross_entropy",
    {cpu::softmax_cross_entropy},
    with_half_storage<SoftmaxCrossEntropyFn>({ST_CUDA_KERNEL(cuda::softmax_cross_entropy)})};
using TokenCrossEntropyFn = TokenLoss(Context& ctx, const Tensor& logits, const Tensor& labels, float label_smoothing,
                                      int32_t ignore_index, double normaliser, Tensor& dlogits);
namespace cpu {
TokenCrossEntropyFn token_cross_entropy;
}
namespace cuda {
TokenCrossEntropyFn token_cross_entropy;
}
const Op<TokenCrossEntropyFn> token_cross_entropy_op{
    "token_cross_entropy",
    {cpu::token_cross_entropy},
    with_half_storage<TokenCrossEntropyFn>({ST_CUDA_KERNEL(cuda::token_cross_entropy)})};
using CountCorrectFn = int64_t(Context& ctx, const Tensor& logits, const Tensor& labels);
namespace cpu {
CountCorrectFn count_correct;
}
namespace cuda {
CountCorrectFn count_correct;
}
const Op<CountCorrectFn> count_correct_op{
    "count_correct", {cpu::count_correct}, with_half_storage<CountCorrectFn>({ST_CUDA_KERNEL(cuda::count_correct)})};
namespace {

// Checks logits (N, K) f32 (or the mixed precision's 16-bit format) with K > 0 and labels (N) i32, both on the
// context's device.
void check_logits_labels(const Context& ctx, const Tensor& logits, const Tensor& labels, const char* op) {
  ST_CHECK(logits.defined() && logits.ndim() == 2,
           op << ": logits must be (N, K), got " << (logits.defined() ? shape_string(logits.shape()) : "undefined"));
  check_tensor(ctx, logits, op, "logits");
  ST_CHECK(labels.defined() && labels.ndim() == 1 && labels.dim(0) == logits.dim(0),
           op << ": labels must be (" << logits.dim(0) << ") to match logits " << shape_string(logits.shape())
              << ", got " << (labels.defined() ? shape_string(labels.shape()) : "undefined"));
  ST_CHECK(labels.dtype() == DType::i32, op << ": labels must be int32, got " << dtype_name(labels.dtype()));
  ST_CHECK(logits.device() == ctx.device(), op << ": logits are on " << device_name(logits.device())
                                               << " but the context runs on " << device_name(ctx.device()));
  ST_CHECK(labels.device() == ctx.device(), op << ": labels are on " << device_name(labels.device())
                                               << " but the context runs on " << device_name(ctx.device()));
  ST_CHECK(logits.dim(1) > 0, op << ": logits " << shape_string(logits.shape()) << " have no classes");
}

}  // namespace

double softmax_cross_entropy(Context& ctx, const Tensor& logits, const Tensor& labels, float label_smoothing,
                             Tensor& dlogits, double grad_scale) {
  const char* op = "softmax_cross_entropy";
  check_logits_labels(ctx, logits, labels, op);
  ST_CHECK(logits.dim(0) > 0, op << ": empty batch (the mean over no samples is undefined)");
  ST_CHECK(label_smoothing >= 0.0f && label_smoothing <= 1.0f,
           op << ": label smoothing must be in [0, 1], got " << label_smoothing);
  if (dlogits.defined()) {
    ST_CHECK((dlogits.dtype() == DType::f32 || dlogits.dtype() == amp_storage_dtype(ctx)) &&
                 dlogits.shape() == logits.shape() && dlogits.device() == logits.device(),
             op << ": dlogits must be float32 " << shape_string(logits.shape()) << " like the logits, got "
                << dtype_name(dlogits.dtype()) << shape_string(dlogits.shape()));
  }
  ST_CHECK(std::isfinite(grad_scale) && grad_scale >= 0.0,
           op << ": the gradient's scale must be a finite value >= 0, got " << grad_scale);
  return softmax_cross_entropy_op(ctx, logits, labels, label_smoothing, dlogits, grad_scale);
}

TokenLoss token_cross_entropy(Context& ctx, const Tensor& logits, const Tensor& labels, float label_smoothing,
                              int32_t ignore_index, double normaliser, Tensor& dlogits) {
  const char* op = "token_cross_entropy";
  check_logits_labels(ctx, logits, labels, op);
  ST_CHECK(label_smoothing >= 0.0f && label_smoothing <= 1.0f,
           op << ": label smoothing must be in [0, 1], got " << label_smoothing);
  ST_CHECK(std::isfinite(normaliser) && normaliser > 0.0,
           op << ": the normaliser (real tokens of the global batch) must be finite and > 0, got " << normaliser);
  if (dlogits.defined()) {
    ST_CHECK((dlogits.dtype() == DType::f32 || dlogits.dtype() == amp_storage_dtype(ctx)) &&
                 dlogits.shape() == logits.shape() && dlogits.device() == logits.device(),
             op << ": dlogits must be float32 " << shape_string(logits.shape()) << " like the logits, got "
                << dtype_name(dlogits.dtype()) << shape_string(dlogits.shape()));
  }
  if (logits.dim(0) == 0) return {};
  return token_cross_entropy_op(ctx, logits, labels, label_smoothing, ignore_index, normaliser, dlogits);
}

int64_t count_correct(Context& ctx, const Tensor& logits, const Tensor& labels) {
  const char* op = "count_correct";
  check_logits_labels(ctx, logits, labels, op);
  return count_correct_op(ctx, logits, labels);
}

}  // namespace scaletrain::ops
