// The two passes of a LARS step over flat buffers (optim::Lars holds the rule, lars.hpp there):
// the sums of squares of the weights and gradients, chunk by chunk, in double; then the momentum
// update with a learning rate and weight decay per chunk (the trust ratio of the chunk's tensor
// folded into its rate). Chunks are slices of one parameter tensor each; the caller adds a
// tensor's chunk sums in order, so the sums do not depend on the number of threads.
#pragma once

#include <vector>

#include "scaletrain/backend/context.hpp"

namespace scaletrain::ops {

struct LarsChunk {
  int64_t begin = 0, end = 0;  // elements [begin, end) of the flat buffers
};

// w_sq[c] = sum of w^2 and g_sq[c] = sum of g^2 over chunk c, in double; both resized to the
// chunks. w, g: f32, the same element count, on the context's device.
void lars_sums_of_squares(Context& ctx, const Tensor& w, const Tensor& g, const std::vector<LarsChunk>& chunks,
                          std::vector<double>& w_sq, std::vector<double>& g_sq);

// For every element i of chunk c: v = momentum * v + scaled_lr[c] * (g + weight_decay[c] * w);
// w = w - v (the MLPerf reference's apply_momentum). w and v are updated in place.
void lars_update(Context& ctx, float momentum, const std::vector<LarsChunk>& chunks,
                 const std::vector<float>& scaled_lr, const std::vector<float>& weight_decay, Tensor& w,
                 const Tensor& g, Tensor& v);

}  // namespace scaletrain::ops
