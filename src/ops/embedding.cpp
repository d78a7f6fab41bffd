// Embedding lookup: argument checks and per-device dispatch. The kernels live in src/ops/<device>/;
// the index range is checked by the kernels, which are the only code that may read the indices
// where they live (host memory for the CPU, device memory for a GPU).
#include "scaletrain/ops/embedding.hpp"

#include "ops/cpu/embedding_cpu.hpp"
#include "ops/op_checks.hpp"
#include "scaletrain/core/error.hpp"

namespace scaletrain::ops {
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
  switch (ctx.device()) {
    case Device::cpu:
      return cpu::embedding_forward(ctx, table, indices, out);
    case Device::cuda:
      break;  // no kernel yet
  }
  no_kernel(op, ctx.device());
}

void embedding_backward(Context& ctx, const Tensor& indices, const Tensor& dout, Tensor& dtable) {
  const char* op = "embedding_backward";
  check_table(ctx, dtable, op, "dtable");
  check_indices(ctx, indices, op);
  check_tensor(ctx, dout, {indices.dim(0), dtable.dim(1)}, op, "dout");
  switch (ctx.device()) {
    case Device::cpu:
      return cpu::embedding_backward(ctx, indices, dout, dtable);
    case Device::cuda:
      break;  // no kernel yet
  }
  no_kernel(op, ctx.device());
}

}  // namespace scaletrain::ops
