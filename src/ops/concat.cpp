// Feature concatenation of two 2-D tensors: argument checks and per-device dispatch. Kernels in
// src/ops/<device>/.
#include "scaletrain/ops/concat.hpp"

#include "ops/op.hpp"
#include "scaletrain/core/error.hpp"

namespace scaletrain::ops {

// The kernels, declared from the public signatures, and the one dispatch point per op (ops/op.hpp).
using ConcatFeaturesForwardFn = void(Context& ctx, const Tensor& a, const Tensor& b, Tensor& y);
namespace cpu {
ConcatFeaturesForwardFn concat_features_forward;
}
namespace cuda {
ConcatFeaturesForwardFn concat_features_forward;
}
const Op<ConcatFeaturesForwardFn> concat_features_forward_op{
    "concat_features_forward", {cpu::concat_features_forward}, {ST_CUDA_KERNEL(cuda::concat_features_forward)}};
using ConcatFeaturesBackwardFn = void(Context& ctx, const Tensor& dy, Tensor& da, Tensor& db);
namespace cpu {
ConcatFeaturesBackwardFn concat_features_backward;
}
namespace cuda {
ConcatFeaturesBackwardFn concat_features_backward;
}
const Op<ConcatFeaturesBackwardFn> concat_features_backward_op{
    "concat_features_backward", {cpu::concat_features_backward}, {ST_CUDA_KERNEL(cuda::concat_features_backward)}};
namespace {

// t is (N, something) for the N of the first operand.
void check_2d(const Context& ctx, const Tensor& t, const char* op, const char* name) {
  check_tensor(ctx, t, op, name);
  ST_CHECK(t.ndim() == 2, op << ": " << name << " must be 2-D (N, features), got " << shape_string(t.shape()));
}

}  // namespace

void concat_features_forward(Context& ctx, const Tensor& a, const Tensor& b, Tensor& y) {
  const char* op = "concat_features_forward";
  check_2d(ctx, a, op, "a");
  check_2d(ctx, b, op, "b");
  ST_CHECK(a.dim(0) == b.dim(0), op << ": a " << shape_string(a.shape()) << " and b " << shape_string(b.shape())
                                    << " have different numbers of rows");
  check_tensor(ctx, y, {a.dim(0), a.dim(1) + b.dim(1)}, op, "y");
  return concat_features_forward_op(ctx, a, b, y);
}

void concat_features_backward(Context& ctx, const Tensor& dy, Tensor& da, Tensor& db) {
  const char* op = "concat_features_backward";
  check_2d(ctx, da, op, "da");
  check_2d(ctx, db, op, "db");
  ST_CHECK(da.dim(0) == db.dim(0), op << ": da " << shape_string(da.shape()) << " and db " << shape_string(db.shape())
                                      << " have different numbers of rows");
  check_tensor(ctx, dy, {da.dim(0), da.dim(1) + db.dim(1)}, op, "dy");
  return concat_features_backward_op(ctx, dy, da, db);
}

}  // namespace scaletrain::ops
