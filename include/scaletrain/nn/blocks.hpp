// Layers of the issue-24 models (AlexNet, GoogLeNet, Inception-v3 and their Caffe versions) that
// have no parameters: local response normalisation, the NCHW flatten before a classifier, and
// Branches, the concatenation of parallel branches that an Inception block is. Like the layers of
// layers.hpp, each owns its output buffer (valid until its next forward) and returns fresh input
// gradients.
#pragma once

#include <memory>
#include <vector>

#include "scaletrain/nn/layers.hpp"
#include "scaletrain/ops/lrn.hpp"

namespace scaletrain::nn {

// PyTorch LocalResponseNorm(size, alpha, beta, k) / Caffe LRN across channels (ops/lrn.hpp: odd
// sizes only). No parameters.
class LocalResponseNorm : public Module {
 public:
  explicit LocalResponseNorm(ops::LrnParams p = {}) : lrn_(p) {}
  // x: (N, H, W, C) or any (..., C). Returns the same shape.
  Tensor forward(Context& ctx, const Tensor& x, bool training) override;
  Tensor backward(Context& ctx, const Tensor& dy, bool need_dx = true) override;
  void initialize(Rng&) override {}
  void list_ops(ops::OpNames& ops, bool training) const override;

 private:
  ops::LrnParams lrn_;
  Tensor x_;  // forward input: the backward recomputes the window sums from it
  Tensor y_buffer_;
};

// torch.flatten(x, 1) of an NCHW tensor, on our channels-last activations: (N, H, W, C) ->
// (N, C*H*W) with feature c*H*W + h*W + w, the order torchvision's and Caffe's classifier weights
// expect (ops/flatten.hpp). It always runs the transpose, also where it is a plain copy
// (H = W = 1 or C = 1); a model that knows its map is 1x1 can use GlobalAvgPool's output as is.
class FlattenCHW : public Module {
 public:
  Tensor forward(Context& ctx, const Tensor& x, bool training) override;
  Tensor backward(Context& ctx, const Tensor& dy, bool need_dx = true) override;
  void initialize(Rng&) override {}
  void list_ops(ops::OpNames& ops, bool training) const override;

 private:
  Shape x_shape_;
  Tensor y_buffer_;
};

// Parallel branches on one input, outputs concatenated along the channels, as torch.cat(
// [branch1(x), branch2(x), ...], 1) in an Inception block. Each branch is a Sequential, filled by
// the caller in torchvision's registration order; a Branches may itself sit in a branch.
//
// Forward runs the branches in order on the same x, so no branch may modify its input (no in-place
// layer at the head of a branch). Backward splits dy into per-branch gradients, then runs the
// branches' backward in REVERSE order, last registered first, so that parameter gradients are
// marked ready in reverse registration order (the bucketed all-reduce starts on the last buckets);
// it sums the branches' input gradients into the last branch's in a fixed order, each added as
// its branch's first convolution stores it (Module::backward_adding), or after (add_inplace).
class Branches : public Module {
 public:
  // Appends an empty branch and returns it for the caller to fill (emplace).
  Sequential& add_branch();
  std::size_t size() const { return branches_.size(); }
  Sequential& branch(std::size_t i) { return *branches_.at(i); }

  // x: whatever the branches take; each branch's output must be (..., C_i) with the same leading
  // dims. Returns (..., sum C_i).
  Tensor forward(Context& ctx, const Tensor& x, bool training) override;
  Tensor backward(Context& ctx, const Tensor& dy, bool need_dx = true) override;
  void initialize(Rng& rng) override;
  // The branches' ops, concat_channels_forward, and in training concat_channels_backward and (with
  // more than one branch) add_inplace, which the backward runs when the input gradient is needed.
  void list_ops(ops::OpNames& ops, bool training) const override;

 private:
  std::vector<std::unique_ptr<Sequential>> branches_;
  std::vector<Shape> out_shapes_;  // each branch's output shape at the last forward
  Tensor y_buffer_;
};

}  // namespace scaletrain::nn
