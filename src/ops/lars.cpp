// lars_sums_of_squares, lars_update: argument checks and the dispatch points. Kernels in
// src/ops/<device>/.
#include "scaletrain/ops/lars.hpp"

#include "ops/op.hpp"

namespace scaletrain::ops {

using LarsSumsOfSquaresFn = void(Context& ctx, const Tensor& w, const Tensor& g, const std::vector<LarsChunk>& chunks,
                                 std::vector<double>& w_sq, std::vector<double>& g_sq);
namespace cpu {
LarsSumsOfSquaresFn lars_sums_of_squares;
}
namespace cuda {
LarsSumsOfSquaresFn lars_sums_of_squares;
}
const Op<LarsSumsOfSquaresFn> lars_sums_of_squares_op{
    "lars_sums_of_squares", {cpu::lars_sums_of_squares}, {ST_CUDA_KERNEL(cuda::lars_sums_of_squares)}};

using LarsUpdateFn = void(Context& ctx, float momentum, const std::vector<LarsChunk>& chunks,
                          const std::vector<float>& scaled_lr, const std::vector<float>& weight_decay, Tensor& w,
                          const Tensor& g, Tensor& v);
namespace cpu {
LarsUpdateFn lars_update;
}
namespace cuda {
LarsUpdateFn lars_update;
}
const Op<LarsUpdateFn> lars_update_op{"lars_update",
                                      {cpu::lars_update},
                                      {ST_CUDA_KERNEL(cuda::lars_update)},
                                      AmpOutputs::none()};  // the fp32 master weights and momentum

namespace {

void check_chunks(const std::vector<LarsChunk>& chunks, int64_t n, const char* op) {
  for (std::size_t c = 0; c < chunks.size(); ++c)
    ST_CHECK(chunks[c].begin >= 0 && chunks[c].begin <= chunks[c].end && chunks[c].end <= n,
             op << ": chunk " << c << " [" << chunks[c].begin << ", " << chunks[c].end << ") is outside the " << n
                << " elements");
}

}  // namespace

void lars_sums_of_squares(Context& ctx, const Tensor& w, const Tensor& g, const std::vector<LarsChunk>& chunks,
                          std::vector<double>& w_sq, std::vector<double>& g_sq) {
  const char* op = "lars_sums_of_squares";
  check_tensor(ctx, w, op, "w");
  check_tensor(ctx, g, {w.numel()}, op, "g");
  check_chunks(chunks, w.numel(), op);
  w_sq.assign(chunks.size(), 0.0);
  g_sq.assign(chunks.size(), 0.0);
  lars_sums_of_squares_op(ctx, w, g, chunks, w_sq, g_sq);
}

void lars_update(Context& ctx, float momentum, const std::vector<LarsChunk>& chunks,
                 const std::vector<float>& scaled_lr, const std::vector<float>& weight_decay, Tensor& w,
                 const Tensor& g, Tensor& v) {
  const char* op = "lars_update";
  check_tensor(ctx, w, op, "w");
  check_tensor(ctx, g, {w.numel()}, op, "g");
  check_tensor(ctx, v, {w.numel()}, op, "v");
  check_chunks(chunks, w.numel(), op);
  ST_CHECK(scaled_lr.size() == chunks.size() && weight_decay.size() == chunks.size(),
           op << ": " << chunks.size() << " chunks, but " << scaled_lr.size() << " rates and " << weight_decay.size()
              << " weight decays");
  lars_update_op(ctx, momentum, chunks, scaled_lr, weight_decay, w, g, v);
}

}  // namespace scaletrain::ops
