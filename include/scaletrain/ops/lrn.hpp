// Local response normalisation across channels (AlexNet, GoogLeNet), on channels-last activations:
// PyTorch's nn.LocalResponseNorm and Caffe's LRN (ACROSS_CHANNELS), which agree for odd sizes.
//
//   y_c = x_c * s_c^(-beta),  s_c = k + alpha / size * sum_{j = c - (size-1)/2}^{c + (size-1)/2} x_j^2
//
// with the window clipped to the channels [0, C) and alpha divided by `size` even where the clipped
// window holds fewer channels (both frameworks pad with zeros). Only odd sizes are accepted: for an
// even size PyTorch's window is [c - size/2, c + size/2 - 1] and Caffe's [c - size/2 + 1, c + size/2],
// and oneDNN 2.6's avx512 kernel matches neither at size 4 and crashes at size 2. Every model we
// build uses 5.
//
// Kernels: the CPU uses oneDNN's lrn_across_channels (lrn_cpu.cpp). CUDA has its own NHWC kernel,
// not cuDNN's LRN: whether cuDNN's cross-channel LRN accepts NHWC tensors is undocumented and was not
// established (no GPU to try it on); the own kernel is a contiguous window per pixel (lrn_cuda.cu).
#pragma once

#include "scaletrain/backend/context.hpp"

namespace scaletrain::ops {

// Defaults: the norm layers of BVLC Caffe's bvlc_alexnet and bvlc_googlenet (local_size 5,
// alpha 1e-4, beta 0.75, k at Caffe's default 1). The AlexNet paper (section 3.3) has k = 2 and
// does not divide alpha by n; PyTorch's LocalResponseNorm defaults are 1e-4, 0.75, 1.
struct LrnParams {
  int size = 5;         // channels in the window; odd, >= 1
  float alpha = 1e-4f;  // >= 0; divided by size
  float beta = 0.75f;   // >= 0
  float k = 1.0f;       // > 0
};

// x: (..., C), channels last (any rank >= 2: an (N, H, W, C) activation or (N, C) features);
// y: the same shape, overwritten; may not overlap x.
void lrn_forward(Context& ctx, const LrnParams& p, const Tensor& x, Tensor& y);
// dy: d(loss)/dy, x's shape; dx: x's shape, overwritten (not accumulated), overlapping neither x
// nor dy. Takes the forward's input, not its output: the output may have been overwritten since
// (an in-place ReLU after it), and each backend recomputes the window sums it needs.
void lrn_backward(Context& ctx, const LrnParams& p, const Tensor& x, const Tensor& dy, Tensor& dx);

}  // namespace scaletrain::ops
