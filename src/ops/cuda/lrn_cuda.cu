// CUDA local response normalisation across channels: own kernels, not cuDNN's
// cudnnLRNCrossChannelForward/Backward. cuDNN's documentation does not say whether its
// cross-channel LRN accepts NHWC strides, and without a GPU to try it on that was not established;
// a transpose to NCHW on each side would cost more than the op. In NHWC the window is n contiguous
// floats of one pixel, so the kernels are short; they also take any size (cuDNN: 1..16), any k > 0
// (cuDNN: >= 1e-5), any beta >= 0 (cuDNN: >= 0.01), and are deterministic.
//
// One thread per element of (M, C) data (M rows of C channels), float arithmetic:
//   forward  y_c  = x_c * s_c^-beta,  s_c = k + alpha/n * sum_{j in win(c)} x_j^2
//   backward dx_c = dy_c * s_c^-beta - 2 alpha beta / n * x_c * sum_{j in win(c)} dy_j x_j s_j^(-beta-1)
// win(c) = [c - (n-1)/2, c + (n-1)/2] clipped to [0, C); for odd n, c is in win(j) exactly when j
// is in win(c). The backward recomputes each s_j (n sums of n squares per element): no scratch, and
// n is 5 in every model.
// 16-bit storage (with_half_storage): x, y, dy and dx are read and written in their own formats
// (ops/cuda/half_io.cuh), the arithmetic in float as above, each value stored once.
#include "backend/cuda/cuda_context.hpp"
#include "ops/cuda/grid_stride.cuh"
#include "ops/cuda/half_io.cuh"
#include "scaletrain/ops/lrn.hpp"

namespace scaletrain::ops::cuda {
namespace {

struct LrnArgs {
  int64_t total, channels;
  int half;  // (size - 1) / 2
  float alpha_over_n, beta, k;
};

LrnArgs lrn_args(const LrnParams& p, const Tensor& x) {
  return {x.numel(), x.dim(-1), (p.size - 1) / 2, p.alpha / static_cast<float>(p.size), p.beta, p.k};
}

// s of channel c of the row starting at element `row` of x.
__device__ float window_scale(const void* x, ElemKind xk, int64_t row, int64_t c, const LrnArgs& a) {
  const int64_t lo = c - a.half < 0 ? 0 : c - a.half;
  const int64_t hi = c + a.half > a.channels - 1 ? a.channels - 1 : c + a.half;
  float sum = 0.0f;
  for (int64_t j = lo; j <= hi; ++j) {
    const float v = load_float(x, xk, row + j);
    sum += v * v;
  }
  return a.k + a.alpha_over_n * sum;
}

__global__ void lrn_forward_kernel(const void* x, ElemKind xk, void* y, ElemKind yk, LrnArgs a) {
  for (int64_t e = grid_first(); e < a.total; e += grid_stride()) {
    const int64_t c = e % a.channels;
    const float s = window_scale(x, xk, e - c, c, a);
    store_float(y, yk, e, load_float(x, xk, e) * powf(s, -a.beta));
  }
}

__global__ void lrn_backward_kernel(const void* x, ElemKind xk, const void* dy, ElemKind dyk, void* dx, ElemKind dxk,
                                    LrnArgs a) {
  for (int64_t e = grid_first(); e < a.total; e += grid_stride()) {
    const int64_t c = e % a.channels, r = e - c;
    const int64_t lo = c - a.half < 0 ? 0 : c - a.half;
    const int64_t hi = c + a.half > a.channels - 1 ? a.channels - 1 : c + a.half;
    float cross = 0.0f, own = 0.0f;
    for (int64_t j = lo; j <= hi; ++j) {
      const float s = window_scale(x, xk, r, j, a);
      const float t = powf(s, -a.beta - 1.0f);  // s_j^(-beta-1)
      cross += load_float(dy, dyk, r + j) * load_float(x, xk, r + j) * t;
      if (j == c) own = t * s;  // s_c^-beta
    }
    store_float(dx, dxk, e,
                load_float(dy, dyk, e) * own - 2.0f * a.alpha_over_n * a.beta * load_float(x, xk, e) * cross);
  }
}

}  // namespace

void lrn_forward(Context& ctx, const LrnParams& p, const Tensor& x, Tensor& y) {
  const LrnArgs a = lrn_args(p, x);
  if (a.total == 0) return;
  lrn_forward_kernel<<<scaletrain::cuda::blocks_for(a.total), scaletrain::cuda::kThreadsPerBlock, 0,
                       scaletrain::cuda::compute_stream(ctx)>>>(x.raw(), elem_kind(x, "lrn_forward x"), y.raw(),
                                                                elem_kind(y, "lrn_forward y"), a);
  ST_CHECK_LAUNCH();
}

void lrn_backward(Context& ctx, const LrnParams& p, const Tensor& x, const Tensor& dy, Tensor& dx) {
  const LrnArgs a = lrn_args(p, x);
  if (a.total == 0) return;
  lrn_backward_kernel<<<scaletrain::cuda::blocks_for(a.total), scaletrain::cuda::kThreadsPerBlock, 0,
                        scaletrain::cuda::compute_stream(ctx)>>>(x.raw(), elem_kind(x, "lrn_backward x"), dy.raw(),
                                                                 elem_kind(dy, "lrn_backward dy"), dx.raw(),
                                                                 elem_kind(dx, "lrn_backward dx"), a);
  ST_CHECK_LAUNCH();
}

}  // namespace scaletrain::ops::cuda
