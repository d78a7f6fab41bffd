// Element-wise product: argument checks and per-device dispatch. Kernels in src/ops/<device>/.
#include "scaletrain/ops/multiply.hpp"

#include "ops/cpu/multiply_cpu.hpp"
#include "ops/op_checks.hpp"
#include "scaletrain/core/error.hpp"

namespace scaletrain::ops {

void multiply_forward(Context& ctx, const Tensor& a, const Tensor& b, Tensor& y) {
  const char* op = "multiply_forward";
  check_tensor(ctx, a, op, "a");
  check_tensor(ctx, b, a.shape(), op, "b");
  check_tensor(ctx, y, a.shape(), op, "y");
  switch (ctx.device()) {
    case Device::cpu:
      return cpu::multiply_forward(ctx, a, b, y);
    case Device::cuda:
      break;  // no kernel yet
  }
  no_kernel(op, ctx.device());
}

void multiply_backward(Context& ctx, const Tensor& a, const Tensor& b, const Tensor& dy, Tensor& da, Tensor& db) {
  const char* op = "multiply_backward";
  check_tensor(ctx, a, op, "a");
  check_tensor(ctx, b, a.shape(), op, "b");
  check_tensor(ctx, dy, a.shape(), op, "dy");
  check_tensor(ctx, da, a.shape(), op, "da");
  check_tensor(ctx, db, a.shape(), op, "db");
  ST_CHECK(da.raw() != db.raw(), op << ": da and db must be different tensors");
  switch (ctx.device()) {
    case Device::cpu:
      return cpu::multiply_backward(ctx, a, b, dy, da, db);
    case Device::cuda:
      break;  // no kernel yet
  }
  no_kernel(op, ctx.device());
}

}  // namespace scaletrain::ops
