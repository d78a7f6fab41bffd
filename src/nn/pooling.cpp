// Average pooling layers: thin wrappers over the ops, with buffers reused between steps as in
// layers.cpp.
#include "scaletrain/nn/pooling.hpp"

#include "scaletrain/core/error.hpp"
#include "scaletrain/nn/layers.hpp"

namespace scaletrain::nn {

// ---- AvgPool2d ----

void AvgPool2d::list_ops(ops::OpNames& ops, bool training) const {
  ops.insert("avg_pool2d_forward");
  if (training) ops.insert("avg_pool2d_backward");
}

Tensor AvgPool2d::forward(Context& ctx, const Tensor& x, bool training) {
  ST_CHECK(x.ndim() == 4, "AvgPool2d expects input (N, H, W, C), got " << shape_string(x.shape()));
  Tensor y = reuse_activation(y_buffer_, ops::avg_pool2d_output_shape(pool_, x.shape()), ctx);
  ops::avg_pool2d_forward(ctx, pool_, x, y);
  x_shape_ = x.shape();
  return y;
}

Tensor AvgPool2d::backward(Context& ctx, const Tensor& dy, bool need_dx) {
  ST_CHECK(!x_shape_.empty(), "AvgPool2d: backward before forward");
  if (!need_dx) return Tensor();
  Tensor dx = fresh_activation(x_shape_, ctx);
  ops::avg_pool2d_backward(ctx, pool_, dy, dx);
  return dx;
}

// ---- AdaptiveAvgPool2d ----

void AdaptiveAvgPool2d::list_ops(ops::OpNames& ops, bool training) const {
  ops.insert("adaptive_avg_pool2d_forward");
  if (training) ops.insert("adaptive_avg_pool2d_backward");
}

Tensor AdaptiveAvgPool2d::forward(Context& ctx, const Tensor& x, bool training) {
  ST_CHECK(x.ndim() == 4, "AdaptiveAvgPool2d expects input (N, H, W, C), got " << shape_string(x.shape()));
  Tensor y = reuse_activation(y_buffer_, ops::adaptive_avg_pool2d_output_shape(pool_, x.shape()), ctx);
  ops::adaptive_avg_pool2d_forward(ctx, pool_, x, y);
  x_shape_ = x.shape();
  return y;
}

Tensor AdaptiveAvgPool2d::backward(Context& ctx, const Tensor& dy, bool need_dx) {
  ST_CHECK(!x_shape_.empty(), "AdaptiveAvgPool2d: backward before forward");
  if (!need_dx) return Tensor();
  Tensor dx = fresh_activation(x_shape_, ctx);
  ops::adaptive_avg_pool2d_backward(ctx, pool_, dy, dx);
  return dx;
}

}  // namespace scaletrain::nn
