// Private: the CPU embedding kernels behind the public dispatch in src/ops/embedding.cpp.
// Shapes, dtypes and devices are already checked there; the index range is checked here.
#pragma once

#include "scaletrain/ops/embedding.hpp"

namespace scaletrain::ops::cpu {

void embedding_forward(Context& ctx, const Tensor& table, const Tensor& indices, Tensor& out);
void embedding_backward(Context& ctx, const Tensor& indices, const Tensor& dout, Tensor& dtable);

}  // namespace scaletrain::ops::cpu
