// CPU dropout: the counter-based stream (src/ops/dropout_mask.hpp) one block of four elements at
// a time, the blocks split statically over the threads. A block's words depend only on its index,
// so the mask does not depend on the thread count. Each element is read before it is written by
// the same iteration, so the output may alias the input.
#include <cstdint>
#include <cstring>

#include "ops/dropout_mask.hpp"
#include "scaletrain/ops/dropout.hpp"

namespace scaletrain::ops::cpu {
namespace {

constexpr int64_t kParallelMin = 1 << 15;  // below this many elements a thread team costs more than it saves

void apply(const DropoutParams& params, const Tensor& in, Tensor& out) {
  const int64_t n = in.numel();
  const float* ip = in.data<float>();
  float* op = out.data<float>();
  if (params.p == 0.0) {  // the identity, exactly: no element is dropped, none is scaled
    if (op != ip && n > 0) std::memcpy(op, ip, static_cast<std::size_t>(n) * sizeof(float));
    return;
  }
  const DropoutMask mask = dropout_mask(params);
  const int64_t blocks = (n + 3) / 4;
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t first = 4 * b;
    const int count = n - first < 4 ? static_cast<int>(n - first) : 4;
    dropout_block(mask, static_cast<uint64_t>(b), ip + first, op + first, count);
  }
}

}  // namespace

void dropout_forward(Context& ctx, const DropoutParams& params, const Tensor& x, Tensor& y) { apply(params, x, y); }

void dropout_backward(Context& ctx, const DropoutParams& params, const Tensor& dy, Tensor& dx) {
  apply(params, dy, dx);
}

}  // namespace scaletrain::ops::cpu
