// CUDA flatten in NCHW order: cudnnTransformTensor between an NHWC and an NCHW descriptor of the
// same logical (N, C, H, W) tensor (alpha 1, beta 0: a copy, the same bits as the CPU); the NCHW
// side is our (N, C*H*W).
#include "backend/cuda/cuda_context.hpp"
#include "ops/cuda/cudnn_util.hpp"
#include "scaletrain/ops/flatten.hpp"

namespace scaletrain::ops::cuda {
namespace {

// Copies `from` (layout from_format) into `to` (to_format); NHWC is the (N, H, W, C) tensor `image`.
void transform(Context& ctx, const Tensor& image, const Tensor& from, const Tensor& to, cudnnTensorFormat_t from_format,
               cudnnTensorFormat_t to_format, const char* op) {
  if (image.numel() == 0) return;
  to_int(image.numel(), op, "elements");  // cuDNN's 4-d descriptors index with int
  const int n = to_int(image.dim(0), op, "N"), h = to_int(image.dim(1), op, "H"), w = to_int(image.dim(2), op, "W"),
            c = to_int(image.dim(3), op, "C");
  TensorDesc from_desc, to_desc;
  from_desc.set(from_format, n, c, h, w);
  to_desc.set(to_format, n, c, h, w);
  const float one = 1.0f, zero = 0.0f;
  ST_CHECK_CUDNN(cudnnTransformTensor(scaletrain::cuda::cudnn_handle(ctx), &one, from_desc.get(), from.raw(), &zero,
                                      to_desc.get(), to.raw()));
}

}  // namespace

void flatten_chw_forward(Context& ctx, const Tensor& x, Tensor& y) {
  transform(ctx, x, x, y, CUDNN_TENSOR_NHWC, CUDNN_TENSOR_NCHW, "flatten_chw_forward");
}

void flatten_chw_backward(Context& ctx, const Tensor& dy, Tensor& dx) {
  transform(ctx, dx, dy, dx, CUDNN_TENSOR_NCHW, CUDNN_TENSOR_NHWC, "flatten_chw_backward");
}

}  // namespace scaletrain::ops::cuda
