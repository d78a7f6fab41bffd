// Dropout with masks from a counter-based stream (Philox4x32-10, core/philox.hpp), so that the
// mask of an element is a function of (key, position, element index) alone: the CPU and CUDA
// kernels draw the same bits, a run stopped and resumed draws the masks an uninterrupted run
// draws, and the backward regenerates the forward's mask instead of keeping it.
//
// Element i of a tensor (row-major, any shape) is kept when word i % 4 of
//   philox4x32_10(counter = (i/4 low 32 bits, i/4 high 32 bits, position low, position high),
//                 key = (key[0], key[1]))
// is below threshold = round((1 - p) * 2^32), clamped to [0, 2^32 - 1]. An integer compare is
// exact on every device. Kept elements are scaled by float(1 / (1 - p)) (computed in double).
//
// Not cuDNN's cudnnDropoutForward: its generator state is opaque and not addressable by a
// counter, so its masks would differ from the CPU's and survive a resume only if that state were
// checkpointed (docs/ops.md).
#pragma once

#include <cstdint>

#include "scaletrain/backend/context.hpp"

namespace scaletrain::ops {

struct DropoutParams {
  double p = 0.5;            // the probability of zeroing an element, in [0, 1)
  uint32_t key[2] = {0, 0};  // Philox key: one per dropout layer of a run (nn/dropout.hpp)
  uint64_t position = 0;     // Philox counter's high half: one per forward (nn::random_position)
};

// round((1 - p) * 2^32) (halves away from zero) clamped to [0, 2^32 - 1]: an element is kept when its word is below it.
// Throws for p outside [0, 1).
uint32_t dropout_threshold(double p);
// float(1 / (1 - p)), computed in double. Throws for p outside [0, 1).
float dropout_scale(double p);

// y = keep ? x * scale : 0, any shape; y overwritten, may alias x. p = 0 copies x exactly.
void dropout_forward(Context& ctx, const DropoutParams& params, const Tensor& x, Tensor& y);
// dx = keep ? dy * scale : 0 with the forward's mask, regenerated from the same params (the
// same p, key and position as the forward); dx overwritten, may alias dy.
void dropout_backward(Context& ctx, const DropoutParams& params, const Tensor& dy, Tensor& dx);

}  // namespace scaletrain::ops
