// CPU flatten in NCHW order: a oneDNN reorder between the nhwc and nchw layouts of the same logical
// (N, C, H, W) tensor; the nchw side is our (N, C*H*W). Reorders are cached per shape and direction.
#include "ops/cpu/dnnl_util.hpp"
#include "scaletrain/ops/flatten.hpp"

namespace scaletrain::ops::cpu {
namespace {

using ::scaletrain::cpu::cached_primitive;
using ::scaletrain::cpu::dnnl_desc;
using ::scaletrain::cpu::dnnl_dims;
using ::scaletrain::cpu::dnnl_tag;
using ::scaletrain::cpu::engine_key;

struct Reorder {
  dnnl::reorder prim;
  dnnl::memory src, dst;
};

// Copies `from` (layout from_tag) into `to` (layout to_tag); nhwc is the (N, H, W, C) tensor `image`.
void reorder(Context& ctx, const Tensor& image, const Tensor& from, const Tensor& to, dnnl_tag from_tag,
             dnnl_tag to_tag) {
  if (image.numel() == 0) return;
  const dnnl_dims dims{image.dim(0), image.dim(3), image.dim(1), image.dim(2)};
  dnnl::engine& engine = dnnl_engine(ctx);
  Reorder& e = cached_primitive<Reorder>(
      {engine_key(engine), dims[0], dims[1], dims[2], dims[3], static_cast<int64_t>(from_tag)}, [&] {
        dnnl::memory src(dnnl_desc(dims, from_tag), engine, nullptr), dst(dnnl_desc(dims, to_tag), engine, nullptr);
        return Reorder{dnnl::reorder(src, dst), src, dst};
      });
  e.src.set_data_handle(from.raw());
  e.dst.set_data_handle(to.raw());
  e.prim.execute(dnnl_stream(ctx), e.src, e.dst);
}

}  // namespace

void flatten_chw_forward(Context& ctx, const Tensor& x, Tensor& y) {
  reorder(ctx, x, x, y, dnnl_tag::nhwc, dnnl_tag::nchw);
}

void flatten_chw_backward(Context& ctx, const Tensor& dy, Tensor& dx) {
  reorder(ctx, dx, dy, dx, dnnl_tag::nchw, dnnl_tag::nhwc);
}

}  // namespace scaletrain::ops::cpu
