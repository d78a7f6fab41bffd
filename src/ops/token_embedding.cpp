// The Transformer's scaled, masked, position-added embedding: argument checks and dispatch.
#include "scaletrain/ops/token_embedding.hpp"

#include "ops/op.hpp"
#include "scaletrain/core/error.hpp"

namespace scaletrain::ops {

using TokenEmbeddingForwardFn = void(Context& ctx, const Tensor& x, const Tensor& ids, float scale,
                                     const Tensor& positions, Tensor& y);
namespace cpu {
TokenEmbeddingForwardFn token_embedding_forward;
}
namespace cuda {
TokenEmbeddingForwardFn token_embedding_forward;
}
const Op<TokenEmbeddingForwardFn> token_embedding_forward_op{
    "token_embedding_forward",
    {cpu::token_embedding_forward},
    with_half_storage<TokenEmbeddingForwardFn>({ST_CUDA_KERNEL(cuda::token_embedding_forward)})};
using TokenEmbeddingBackwardFn = void(Context& ctx, const Tensor& ids, float scale, const Tensor& dy, Tensor& dx);
namespace cpu {
TokenEmbeddingBackwardFn token_embedding_backward;
}
namespace cuda {
TokenEmbeddingBackwardFn token_embedding_backward;
}
const Op<TokenEmbeddingBackwardFn> token_embedding_backward_op{
    "token_embedding_backward",
    {cpu::token_embedding_backward},
    with_half_storage<TokenEmbeddingBackwardFn>({ST_CUDA_KERNEL(cuda::token_embedding_backward)})};

namespace {

void check_ids(const Context& ctx, const Tensor& ids, const Tensor& x, const char* op) {
  ST_CHECK(x.ndim() == 3, op << ": activations must be (N, L, D), got " << shape_string(x.shape()));
  ST_CHECK(ids.defined() && ids.dtype() == DType::i32 && ids.device() == ctx.device(),
           op << ": ids must be int32 on the context's device");
  ST_CHECK(ids.shape() == (Shape{x.dim(0), x.dim(1)}), op << ": ids have shape " << shape_string(ids.shape())
                                                          << ", expected (N, L) of " << shape_string(x.shape()));
}

}  // namespace

void token_embedding_forward(Context& ctx, const Tensor& x, const Tensor& ids, float scale, const Tensor& positions,
                             Tensor& y) {
  const char* op = "token_embedding_forward";
  check_tensor(ctx, x, op, "x");
  check_ids(ctx, ids, x, op);
  check_tensor(ctx, positions, op, "positions");
  ST_CHECK(positions.ndim() == 2 && positions.dim(1) == x.dim(2) && positions.dim(0) >= x.dim(1),
           op << ": positions " << shape_string(positions.shape()) << " must be (P >= " << x.dim(1) << ", " << x.dim(2)
              << ")");
  check_tensor(ctx, y, x.shape(), op, "y");
  if (x.numel() == 0) return;
  return token_embedding_forward_op(ctx, x, ids, scale, positions, y);
}

void token_embedding_backward(Context& ctx, const Tensor& ids, float scale, const Tensor& dy, Tensor& dx) {
  const char* op = "token_embedding_backward";
  check_tensor(ctx, dy, op, "dy");
  check_ids(ctx, ids, dy, op);
  check_tensor(ctx, dx, dy.shape(), op, "dx");
  if (dy.numel() == 0) return;
  return token_embedding_backward_op(ctx, ids, scale, dy, dx);
}

}  // namespace scaletrain::ops
