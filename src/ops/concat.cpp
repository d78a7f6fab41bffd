// Concatenation along the last dimension (two 2-D tensors; N channels-last tensors): argument
// checks and per-device dispatch. Kernels in src/ops/<device>/.
#include "scaletrain/ops/concat.hpp"

#include <string>

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
    "concat_features_forward",
    {cpu::concat_features_forward},
    with_half_storage<ConcatFeaturesForwardFn>({ST_CUDA_KERNEL(cuda::concat_features_forward)})};
using ConcatFeaturesBackwardFn = void(Context& ctx, const Tensor& dy, Tensor& da, Tensor& db);
namespace cpu {
ConcatFeaturesBackwardFn concat_features_backward;
}
namespace cuda {
ConcatFeaturesBackwardFn concat_features_backward;
}
const Op<ConcatFeaturesBackwardFn> concat_features_backward_op{
    "concat_features_backward",
    {cpu::concat_features_backward},
    with_half_storage<ConcatFeaturesBackwardFn>({ST_CUDA_KERNEL(cuda::concat_features_backward)})};
using ConcatChannelsForwardFn = void(Context& ctx, const std::vector<Tensor>& xs, Tensor& y);
namespace cpu {
ConcatChannelsForwardFn concat_channels_forward;
}
namespace cuda {
ConcatChannelsForwardFn concat_channels_forward;
}
const Op<ConcatChannelsForwardFn> concat_channels_forward_op{
    "concat_channels_forward",
    {cpu::concat_channels_forward},
    with_half_storage<ConcatChannelsForwardFn>({ST_CUDA_KERNEL(cuda::concat_channels_forward)})};
using ConcatChannelsBackwardFn = void(Context& ctx, const Tensor& dy, const std::vector<Tensor>& dxs);
namespace cpu {
ConcatChannelsBackwardFn concat_channels_backward;
}
namespace cuda {
ConcatChannelsBackwardFn concat_channels_backward;
}
const Op<ConcatChannelsBackwardFn> concat_channels_backward_op{
    "concat_channels_backward",
    {cpu::concat_channels_backward},
    with_half_storage<ConcatChannelsBackwardFn>({ST_CUDA_KERNEL(cuda::concat_channels_backward)})};

namespace {

// t is (N, something) for the N of the first operand.
void check_2d(const Context& ctx, const Tensor& t, const char* op, const char* name) {
  check_tensor(ctx, t, op, name);
  ST_CHECK(t.ndim() == 2, op << ": " << name << " must be 2-D (N, features), got " << shape_string(t.shape()));
}

// The parts (xs or dxs) are defined f32 tensors on ctx's device, of one rank >= 1 and the same
// leading dims; returns the joined shape (..., sum C_i), which `whole` (y or dy) must have and
// which no part may overlap.
Shape check_parts(const Context& ctx, const std::vector<Tensor>& parts, const Tensor& whole, const char* op,
                  const char* parts_name, const char* whole_name) {
  ST_CHECK(!parts.empty(), op << ": " << parts_name << " is empty");
  Shape joined;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const std::string name = std::string(parts_name) + "[" + std::to_string(i) + "]";
    const Tensor& t = parts[i];
    check_tensor(ctx, t, op, name.c_str());
    ST_CHECK(t.ndim() >= 1, op << ": " << name << " must have at least one dimension (..., C)");
    if (i == 0) {
      joined = t.shape();
      continue;
    }
    const Shape lead(t.shape().begin(), t.shape().end() - 1);
    ST_CHECK(t.ndim() == static_cast<int>(joined.size()) && lead == Shape(joined.begin(), joined.end() - 1),
             op << ": " << name << " " << shape_string(t.shape()) << " and " << parts_name << "[0] "
                << shape_string(parts[0].shape()) << " differ in a dimension other than the last");
    joined.back() += t.dim(-1);
  }
  check_tensor(ctx, whole, joined, op, whole_name);
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const std::string name = std::string(parts_name) + "[" + std::to_string(i) + "]";
    check_no_overlap(whole, parts[i], op, whole_name, name.c_str());
  }
  return joined;
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

void concat_channels_forward(Context& ctx, const std::vector<Tensor>& xs, Tensor& y) {
  const char* op = "concat_channels_forward";
  check_parts(ctx, xs, y, op, "xs", "y");
  return concat_channels_forward_op(ctx, xs, y);
}

void concat_channels_backward(Context& ctx, const Tensor& dy, const std::vector<Tensor>& dxs) {
  const char* op = "concat_channels_backward";
  check_parts(ctx, dxs, dy, op, "dxs", "dy");
  return concat_channels_backward_op(ctx, dy, dxs);
}

}  // namespace scaletrain::ops
