// CPU (A, B, C, D) -> (A, C, B, D): a oneDNN reorder from the plain layout of the logical tensor
// (A, B, C, D) to its acbd layout, which is y's memory. Cached per shape.
#include "ops/cpu/dnnl_util.hpp"
#include "scaletrain/ops/swap_axes.hpp"

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

}  // namespace

void swap_middle_axes(Context& ctx, const Tensor& x, Tensor& y) {
  const dnnl_dims dims{x.dim(0), x.dim(1), x.dim(2), x.dim(3)};
  dnnl::engine& engine = dnnl_engine(ctx);
  Reorder& e = cached_primitive<Reorder>({engine_key(engine), dims[0], dims[1], dims[2], dims[3]}, [&] {
    dnnl::memory src(dnnl_desc(dims, dnnl_tag::abcd), engine, nullptr);
    dnnl::memory dst(dnnl_desc(dims, dnnl_tag::acbd), engine, nullptr);
    return Reorder{dnnl::reorder(src, dst), src, dst};
  });
  e.src.set_data_handle(x.raw());
  e.dst.set_data_handle(y.raw());
  e.prim.execute(dnnl_stream(ctx), e.src, e.dst);
}

}  // namespace scaletrain::ops::cpu
