// CUDA flatten in NCHW order: cudnnTransformTensor between an NHWC and an NCHW descriptor of the
// same logical (N, C, H, W) tensor (alpha 1, beta 0: a copy, the same bits as the CPU); the NCHW
// side is our (N, C*H*W). 16-bit storage (with_half_storage): a tensor of f16 or bf16, or a mix
// of types, goes through a kernel that reads and writes each element in its tensor's format (a
// copy where they agree, the dispatch's rounding where they differ).
#include "backend/cuda/cuda_context.hpp"
#include "ops/cuda/cudnn_util.hpp"
#include "ops/cuda/grid_stride.cuh"
#include "ops/cuda/half_io.cuh"
#include "scaletrain/ops/flatten.hpp"

namespace scaletrain::ops::cuda {
namespace {

// NHWC (n, h, w, c) <-> NCHW (n, c, h, w) of an (N, H, W, C) image, one thread per element of the
// NHWC side; to_nchw says which way.
__global__ void permute_kernel(const void* from, ElemKind fk, void* to, ElemKind tk, int64_t total, int64_t h,
                               int64_t w, int64_t c, bool to_nchw) {
  for (int64_t e = grid_first(); e < total; e += grid_stride()) {
    const int64_t j = e % c;
    int64_t rest = e / c;
    const int64_t x = rest % w;
    rest /= w;
    const int64_t y = rest % h;
    const int64_t b = rest / h;
    const int64_t nchw = ((b * c + j) * h + y) * w + x;
    if (to_nchw)
      store_float(to, tk, nchw, load_float(from, fk, e));
    else
      store_float(to, tk, e, load_float(from, fk, nchw));
  }
}

void permute(Context& ctx, const Tensor& image, const Tensor& from, Tensor& to, bool to_nchw, const char* op) {
  const int64_t total = image.numel();
  if (total == 0) return;
  permute_kernel<<<scaletrain::cuda::blocks_for(total), scaletrain::cuda::kThreadsPerBlock, 0,
                   scaletrain::cuda::compute_stream(ctx)>>>(from.raw(), elem_kind(from, op), to.raw(),
                                                            elem_kind(to, op), total, image.dim(1), image.dim(2),
                                                            image.dim(3), to_nchw);
  ST_CHECK_LAUNCH();
}

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
  if (x.dtype() == DType::f32 && y.dtype() == DType::f32)
    transform(ctx, x, x, y, CUDNN_TENSOR_NHWC, CUDNN_TENSOR_NCHW, "flatten_chw_forward");
  else
    permute(ctx, x, x, y, true, "flatten_chw_forward");
}

void flatten_chw_backward(Context& ctx, const Tensor& dy, Tensor& dx) {
  if (dy.dtype() == DType::f32 && dx.dtype() == DType::f32)
    transform(ctx, dx, dy, dx, CUDNN_TENSOR_NCHW, CUDNN_TENSOR_NHWC, "flatten_chw_backward");
  else
    permute(ctx, dx, dy, dx, false, "flatten_chw_backward");
}

}  // namespace scaletrain::ops::cuda
