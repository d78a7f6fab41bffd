// Parameter-free layers of the issue-24 models: LocalResponseNorm, FlattenCHW and Branches. Thin
// wrappers over ops/lrn.hpp, ops/flatten.hpp and ops/concat.hpp, with buffers reused from step to
// step as in layers.cpp.
#include "scaletrain/nn/blocks.hpp"

#include "scaletrain/core/error.hpp"
#include "scaletrain/ops/activation.hpp"
#include "scaletrain/ops/concat.hpp"
#include "scaletrain/ops/flatten.hpp"

namespace scaletrain::nn {

// ---- LocalResponseNorm ----

void LocalResponseNorm::list_ops(ops::OpNames& ops, bool training) const {
  ops.insert("lrn_forward");
  if (training) ops.insert("lrn_backward");
}

Tensor LocalResponseNorm::forward(Context& ctx, const Tensor& x, bool training) {
  Tensor y = reuse_activation(y_buffer_, x.shape(), ctx);
  ops::lrn_forward(ctx, lrn_, x, y);
  x_ = x;
  return y;
}

Tensor LocalResponseNorm::backward(Context& ctx, const Tensor& dy, bool need_dx) {
  ST_CHECK(x_.defined(), "LocalResponseNorm: backward before forward");
  if (!need_dx) return Tensor();
  Tensor dx = fresh_activation(x_.shape(), ctx);
  ops::lrn_backward(ctx, lrn_, x_, dy, dx);
  return dx;
}

// ---- FlattenCHW ----

void FlattenCHW::list_ops(ops::OpNames& ops, bool training) const {
  ops.insert("flatten_chw_forward");
  if (training) ops.insert("flatten_chw_backward");
}

Tensor FlattenCHW::forward(Context& ctx, const Tensor& x, bool training) {
  ST_CHECK(x.ndim() == 4, "FlattenCHW expects input (N, H, W, C), got " << shape_string(x.shape()));
  Tensor y = reuse_activation(y_buffer_, {x.dim(0), x.dim(1) * x.dim(2) * x.dim(3)}, ctx);
  ops::flatten_chw_forward(ctx, x, y);
  x_shape_ = x.shape();
  return y;
}

Tensor FlattenCHW::backward(Context& ctx, const Tensor& dy, bool need_dx) {
  ST_CHECK(!x_shape_.empty(), "FlattenCHW: backward before forward");
  if (!need_dx) return Tensor();
  Tensor dx = fresh_activation(x_shape_, ctx);
  ops::flatten_chw_backward(ctx, dy, dx);
  return dx;
}

// ---- Branches ----

Sequential& Branches::add_branch() {
  branches_.push_back(std::make_unique<Sequential>());
  return *branches_.back();
}

void Branches::list_ops(ops::OpNames& ops, bool training) const {
  for (const auto& b : branches_) b->list_ops(ops, training);
  ops.insert("concat_channels_forward");
  if (!training) return;
  ops.insert("concat_channels_backward");
  // The branches' input gradients summed into the last one's: each added as the branch's first
  // convolution stores it, or after.
  for (std::size_t i = 0; i + 1 < branches_.size(); ++i) branches_[i]->list_backward_adding_ops(ops);
}

Tensor Branches::forward(Context& ctx, const Tensor& x, bool training) {
  ST_CHECK(!branches_.empty(), "Branches: no branches");
  std::vector<Tensor> outs;
  out_shapes_.clear();
  for (auto& b : branches_) {
    outs.push_back(b->forward(ctx, x, training));
    out_shapes_.push_back(outs.back().shape());
  }
  Shape joined = out_shapes_.front();
  ST_CHECK(!joined.empty(), "Branches: branch 0 returned a scalar");
  for (std::size_t i = 1; i < outs.size(); ++i) {
    ST_CHECK(outs[i].ndim() == outs[0].ndim(), "Branches: branch " << i << " returned " << shape_string(outs[i].shape())
                                                                   << ", branch 0 " << shape_string(outs[0].shape()));
    joined.back() += outs[i].dim(-1);
  }
  Tensor y = reuse_activation(y_buffer_, joined, ctx);
  ops::concat_channels_forward(ctx, outs, y);
  return y;
}

Tensor Branches::backward(Context& ctx, const Tensor& dy, bool need_dx) {
  ST_CHECK(out_shapes_.size() == branches_.size() && !branches_.empty(), "Branches: backward before forward");
  std::vector<Tensor> dys;
  for (std::size_t i = 0; i < branches_.size(); ++i) dys.push_back(fresh_activation(out_shapes_[i], ctx));
  ops::concat_channels_backward(ctx, dy, dys);
  Tensor dx;
  for (std::size_t i = branches_.size(); i-- > 0;) {
    if (!need_dx) {
      branches_[i]->backward(ctx, dys[i], false);
    } else if (!dx.defined()) {
      dx = branches_[i]->backward(ctx, dys[i], true);  // the last branch's (fresh): the others add into it
    } else {
      // A branch that starts with a convolution adds its input gradient as it stores it
      // (Module::backward_adding); one that starts with a pool adds after.
      branches_[i]->backward_adding(ctx, dys[i], dx);
    }
  }
  return dx;
}

void Branches::initialize(Rng& rng) {
  for (auto& b : branches_) b->initialize(rng);
}

}  // namespace scaletrain::nn
