// Mixed precision's weights (--precision amp-fp16 | amp-bf16, docs/mixed-precision.md): the
// optimizer keeps fp32 master weights; forward and backward see 16-bit copies of the weight
// matrices, convolution kernels and embedding tables (every parameter of two or more
// dimensions). Biases and the normalisation layers' scales and shifts (one dimension) stay fp32,
// as batch norm's and layer norm's parameters do in PyTorch's AMP.
//
// On either device the copies are the master values rounded to the 16-bit format in place for the
// forward and backward of a step, and the fp32 values put back afterwards from a saved copy: the
// checkpoint, the optimizer and everything between steps see the master weights.
#pragma once

#include "scaletrain/backend/context.hpp"
#include "scaletrain/nn/parameters.hpp"
#include "scaletrain/tensor/tensor.hpp"

namespace scaletrain::train {

// While it lives, the parameters of two or more dimensions hold their 16-bit values (nothing
// changes under fp32). `master` keeps the fp32 values meanwhile (reused from step to step).
class HalfWeights {
 public:
  HalfWeights(Context& ctx, nn::ParameterSet& params, Tensor& master);
  ~HalfWeights();
  HalfWeights(const HalfWeights&) = delete;
  HalfWeights& operator=(const HalfWeights&) = delete;

 private:
  nn::ParameterSet& params_;
  Tensor& master_;
  bool active_ = false;
};

// Whether a parameter of this shape gets a 16-bit copy under a mixed precision.
inline bool has_half_copy(const Shape& shape) { return shape.size() >= 2; }

}  // namespace scaletrain::train
