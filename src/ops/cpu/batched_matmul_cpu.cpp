// CPU batched matrix products: oneDNN's matmul primitive over the whole batch, with the transposes
// expressed as strides of the memory descriptors (format tag acb: the last two dimensions swapped)
// and alpha as the primitive's output scale, so nothing is copied. Primitives are cached per shape.
#include <cstring>

#include "ops/cpu/dnnl_util.hpp"
#include "scaletrain/ops/batched_matmul.hpp"

namespace scaletrain::ops::cpu {
namespace {

using ::scaletrain::cpu::cached_primitive;
using ::scaletrain::cpu::dnnl_desc;
using ::scaletrain::cpu::dnnl_tag;
using ::scaletrain::cpu::engine_key;

struct Matmul {
  dnnl::matmul prim;
  dnnl::memory a, b, c;
};

}  // namespace

void batched_matmul(Context& ctx, const BatchedMatmulParams& p, const Tensor& a, const Tensor& b, Tensor& c) {
  const int64_t batch = c.dim(0), m = c.dim(1), n = c.dim(2), k = p.trans_a ? a.dim(1) : a.dim(2);
  dnnl::engine& engine = dnnl_engine(ctx);
  int32_t alpha_bits = 0;  // the primitive bakes alpha in: part of its key
  std::memcpy(&alpha_bits, &p.alpha, sizeof alpha_bits);
  Matmul& e = cached_primitive<Matmul>({engine_key(engine), batch, m, n, k, p.trans_a, p.trans_b, alpha_bits}, [&] {
    const dnnl::memory::desc ad = dnnl_desc({batch, m, k}, p.trans_a ? dnnl_tag::acb : dnnl_tag::abc);
    const dnnl::memory::desc bd = dnnl_desc({batch, k, n}, p.trans_b ? dnnl_tag::acb : dnnl_tag::abc);
    const dnnl::memory::desc cd = dnnl_desc({batch, m, n}, dnnl_tag::abc);
    dnnl::primitive_attr attr;
    if (p.alpha != 1.0f) attr.set_output_scales(0, {p.alpha});
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(ad, bd, cd), attr, engine);
    return Matmul{dnnl::matmul(pd), dnnl::memory(ad, engine, nullptr), dnnl::memory(bd, engine, nullptr),
                  dnnl::memory(cd, engine, nullptr)};
  });
  e.a.set_data_handle(a.raw());
  e.b.set_data_handle(b.raw());
  e.c.set_data_handle(c.raw());
  e.prim.execute(dnnl_stream(ctx), {{DNNL_ARG_SRC, e.a}, {DNNL_ARG_WEIGHTS, e.b}, {DNNL_ARG_DST, e.c}});
}

}  // namespace scaletrain::ops::cpu
