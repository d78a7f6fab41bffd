// 2-D convolution (dilation 1), as PyTorch's Conv2d: rectangular kernels, a stride per dimension,
// zero padding per side, groups, and an optional bias.
// CPU: oneDNN convolution primitives on channels-last activations. CUDA: cuDNN, which takes the
// same padding on both sides of a dimension only (PyTorch's padding=(ph, pw)); its kernels refuse
// padding that differs between top and bottom or left and right.
#pragma once

#include "scaletrain/backend/context.hpp"

namespace scaletrain::ops {

struct Conv2dParams {
  int stride_h = 1, stride_w = 1;
  int pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  int groups = 1;  // the input and output channels split into `groups` independent convolutions

  Conv2dParams() = default;
  // A square stride and the same padding on every side: PyTorch's Conv2d(stride=s, padding=p, groups=g).
  Conv2dParams(int stride, int padding, int groups = 1)
      : stride_h(stride),
        stride_w(stride),
        pad_top(padding),
        pad_bottom(padding),
        pad_left(padding),
        pad_right(padding),
        groups(groups) {}
  // PyTorch's Conv2d(stride=(sh, sw), padding=(ph, pw), groups=g): each dimension padded equally on both sides.
  static Conv2dParams per_dim(int stride_h, int stride_w, int pad_h, int pad_w, int groups = 1) {
    Conv2dParams p(1, 0, groups);
    p.stride_h = stride_h, p.stride_w = stride_w;
    p.pad_top = p.pad_bottom = pad_h;
    p.pad_left = p.pad_right = pad_w;
    return p;
  }
  // Padding that may differ on every side (as F.pad before the convolution). CPU only.
  static Conv2dParams per_side(int stride_h, int stride_w, int pad_top, int pad_bottom, int pad_left, int pad_right,
                               int groups = 1) {
    Conv2dParams p = per_dim(stride_h, stride_w, 0, 0, groups);
    p.pad_top = pad_top, p.pad_bottom = pad_bottom, p.pad_left = pad_left, p.pad_right = pad_right;
    return p;
  }
  // Top equals bottom and left equals right: what cuDNN can run.
  bool symmetric_padding() const { return pad_top == pad_bottom && pad_left == pad_right; }
};

// x: (N, H, W, C); w: (O, C / groups, KH, KW). Returns (N, OH, OW, O) with
// OH = (H + pad_top + pad_bottom - KH) / stride_h + 1 and OW likewise. Checks that C and O are
// multiples of groups.
Shape conv2d_output_shape(const Conv2dParams& p, const Shape& x, const Shape& w);

// y: (N, OH, OW, O), overwritten. b: (O), added to every output pixel; an undefined b (Tensor())
// means no bias.
void conv2d_forward(Context& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y);
// Training's fused epilogue (--fuse conv-bias-relu): y = max(0, conv(x, w) + b), one op for a
// convolution with bias and the in-place ReLU after it (AlexNet's and the Caffe nets'). b is
// required. cuDNN's cudnnConvolutionBiasActivationForward on a GPU (where a shape's algorithm takes
// it; the two ops otherwise); on the CPU the two ops' arithmetic, the same bits. The backward is
// the ReLU's and the convolution's.
void conv2d_bias_relu_forward(Context& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& w, const Tensor& b,
                              Tensor& y);
// A convolution with the batch norms around it (issue 26, section 3: cuDNN's fused graph
// "ConvBNfprop", which NVIDIA's MLPerf ResNet-50 runs on Ampere and Hopper):
//   y = conv(max(0, x * scale + bias), w), the prologue per input channel c: the batch norm before
//       it folded into scale = gamma / sqrt(var + eps) and bias = beta - mean * scale, and its ReLU,
//       so that its output is never stored; or y = conv(x, w) where scale and bias are undefined;
//   sum[o], sqsum[o]: y's sum and sum of squares over N, OH and OW, of y as stored (its 16-bit
//       values under a mixed precision), in fp32: the next batch norm's statistics, without a pass
//       over y.
// x: (N, H, W, C); scale, bias: (C) fp32, both or neither; w: (O, C, KH, KW), one group; y as
// conv2d_forward's, no bias; sum, sqsum: (O) fp32, overwritten. Under a mixed precision scale and
// bias are used as their values rounded to the activations' 16-bit format (cuDNN's fused engine
// takes them in fp16), and the prologue's result is rounded so before the convolution (a GPU's
// tensor cores read it so); its product and sum are each rounded to fp32. On a GPU, cuDNN's fused
// graph where its engine takes the shape (fp16 only, cudnn_fusion.hpp), else the three steps apart;
// the CPU's steps are the reference.
void conv2d_bn_stats_forward(Context& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& scale,
                             const Tensor& bias, const Tensor& w, Tensor& y, Tensor& sum, Tensor& sqsum);
// dy: (N, OH, OW, O); dx: (N, H, W, C), overwritten.
void conv2d_backward_data(Context& ctx, const Conv2dParams& p, const Tensor& dy, const Tensor& w, Tensor& dx);
// dx += the input gradient conv2d_backward_data computes: a residual block's input gradient is its
// shortcut's gradient plus its main branch's first convolution's, and this sums them as the
// convolution stores, with no pass of its own. Each element is rounded once, after the sum (the
// gradient in float plus dx widened). On a GPU, cuDNN blends into dx (beta = 1) where the
// convolution's plan reads and writes dx's type through the legacy API; elsewhere (the graph
// API's plans, a shape that runs in fp32 on copies) the gradient goes to a scratch tensor and an
// add follows, rounded twice under a mixed precision, as the two ops were.
void conv2d_backward_data_add(Context& ctx, const Conv2dParams& p, const Tensor& dy, const Tensor& w, Tensor& dx);
// dw: (O, C / groups, KH, KW), overwritten. db: (O), overwritten with the sum of dy over N, OH and
// OW; an undefined db (Tensor()) is not computed (a convolution without bias).
void conv2d_backward_filter(Context& ctx, const Conv2dParams& p, const Tensor& x, const Tensor& dy, Tensor& dw,
                            Tensor& db);

}  // namespace scaletrain::ops
