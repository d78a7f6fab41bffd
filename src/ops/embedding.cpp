// Embedding lookup: argument checks and per-device dispatch. The kernels live in src/ops/<device>/;
// the index range is checked by the kernels, which are the only code that may read the indices
// where they live (host memory for the CPU, device memory for a GPU).
#include "scaletrain/ops/embedding.hpp"

#include "ops/op.hpp"
#include "scaletrain/core/error.hpp"

namespace scaletrain::ops {

// The kernels, declared from the public signatures, and the one dispatch point per op (ops/op.hpp).
using EmbeddingForwardFn = void(Context& ctx, const Tensor& table, const Tensor& indices, Tensor& out);
namespace cpu {
EmbeddingForwardFn embedding_forward;
}
namespace cuda {
EmbeddingForwardFn embedding_forward;
}
const Op<EmbeddingForwardFn> embedding_forward_op{
    "embedding_forward",
    {cpu::embedding_forward},
    with_half_storage<EmbeddingForwardFn>({ST_CUDA_KERNEL(cuda::embedding_forward)})};
using EmbeddingBackwardFn = void(Context& ctx, const Tensor& indices, const Tensor& dout, Tensor& dtable);
namespace cpu {
EmbeddingBackwardFn embedding_backward;
}
namespace cuda {
EmbeddingBackwardFn embedding_backward;
}
const Op<EmbeddingBackwardFn> embedding_backward_op{
    "embedding_backward",
    {cpu::embedding_backward},
    with_half_storage<EmbeddingBackwardFn>({ST_CUDA_KERNEL(cuda::embedding_backward)})};
namespace {

// indices: (N) int32 on the context's device.
void check_indices(const Context& ctx, const Tensor& indices, const char* op) {
  ST_CHECK(indices.defined() && indices.ndim() == 1,
           op << ": indices must be (N), got " << (indices.defined() ? shape_string(indices.shape()) : "undefined"));
  ST_CHECK(indices.dtype() == DType::i32, op << ": indices must be int32, got " << dtype_name(indices.dtype()));
  ST_CHECK(indices.device() == ctx.device(), op << ": indices are on " << device_name(indices.device())
                                                << " but the context runs on " << device_name(ctx.device()));
}

// table (or its gradient): (V, D).
void check_table(const Context& ctx, const Tensor& table, const char* op, const char* name) {
  check_tensor(ctx, table, op, name);
  ST_CHECK(table.ndim() == 2, op << ": " << name << " must be (V, D), got " << shape_string(table.shape()));
}

}  // namespace

void embedding_forward(Context& ctx, const Tensor& table, const Tensor& indices, Tensor& out) {
  const char* op = "embedding_forward";
  check_table(ctx, table, op, "table");
  check_indices(ctx, indices, op);
  check_tensor(ctx, out, {indices.dim(0), table.dim(1)}, op, "out");
  return embedding_forward_op(ctx, table, indices, out);
}

void embedding_backward(Context& ctx, const Tensor& indices, const Tensor& dout, Tensor& dtable) {
  const char* op = "embedding_backward";
  check_table(ctx, dtable, op, "dtable");
  check_indices(ctx, indices, op);
  check_tensor(ctx, dout, {indices.dim(0), dtable.dim(1)}, op, "dout");
  return embedding_backward_op(ctx, indices, dout, dtable);
}

}  // namespace scaletrain::ops
