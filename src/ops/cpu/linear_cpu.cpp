// CPU linear: oneDNN inner product (forward, backward data, backward weights with the bias
// gradient), on our plain layouts: x (N, IN) "nc", w (OUT, IN) "oi", b (OUT). oneDNN rather than
// OpenBLAS so that every kernel shares one threading runtime (OpenMP): Debian's OpenBLAS runs
// its own pthread pool, which would oversubscribe cores next to oneDNN's threads and MPI ranks.
#include "ops/cpu/dnnl_util.hpp"
#include "scaletrain/ops/linear.hpp"

namespace scaletrain::ops::cpu {
namespace {

using ::scaletrain::cpu::cached_primitive;
using ::scaletrain::cpu::dnnl_desc;
using ::scaletrain::cpu::dnnl_tag;
using ::scaletrain::cpu::engine_key;

struct LinearDims {
  int64_t n, in, out;
  dnnl::memory::desc src() const { return dnnl_desc({n, in}, dnnl_tag::nc); }
  dnnl::memory::desc weights() const { return dnnl_desc({out, in}, dnnl_tag::oi); }
  dnnl::memory::desc bias() const { return dnnl_desc({out}, dnnl_tag::x); }
  dnnl::memory::desc dst() const { return dnnl_desc({n, out}, dnnl_tag::nc); }
};

dnnl::inner_product_forward::primitive_desc forward_pd(const LinearDims& d, const dnnl::engine& e) {
  dnnl::inner_product_forward::desc desc(dnnl::prop_kind::forward_training, d.src(), d.weights(), d.bias(), d.dst());
  return dnnl::inner_product_forward::primitive_desc(desc, e);
}

// A memory whose buffer is set per call to the caller's tensor.
dnnl::memory user_memory(const dnnl::memory::desc& md, const dnnl::engine& e) { return dnnl::memory(md, e, nullptr); }

struct LinearForward {
  dnnl::inner_product_forward prim;
  dnnl::memory src, weights, bias, dst;
};

struct LinearBackwardData {
  dnnl::inner_product_backward_data prim;
  dnnl::memory diff_dst, weights, diff_src;
};

struct LinearBackwardWeights {
  dnnl::inner_product_backward_weights prim;
  dnnl::memory src, diff_dst, diff_weights, diff_bias;
};

}  // namespace

void linear_forward(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) {
  const LinearDims d{x.dim(0), x.dim(1), w.dim(0)};
  if (d.n == 0) return;
  dnnl::engine& engine = dnnl_engine(ctx);
  LinearForward& e = cached_primitive<LinearForward>({engine_key(engine), d.n, d.in, d.out}, [&] {
    return LinearForward{dnnl::inner_product_forward(forward_pd(d, engine)), user_memory(d.src(), engine),
                         user_memory(d.weights(), engine), user_memory(d.bias(), engine), user_memory(d.dst(), engine)};
  });
  e.src.set_data_handle(x.raw());
  e.weights.set_data_handle(w.raw());
  e.bias.set_data_handle(b.raw());
  e.dst.set_data_handle(y.raw());
  e.prim.execute(
      dnnl_stream(ctx),
      {{DNNL_ARG_SRC, e.src}, {DNNL_ARG_WEIGHTS, e.weights}, {DNNL_ARG_BIAS, e.bias}, {DNNL_ARG_DST, e.dst}});
}

void linear_backward(Context& ctx, const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw,
                     Tensor& db) {
  const LinearDims d{x.dim(0), x.dim(1), w.dim(0)};
  if (d.n == 0) {
    dw.zero();
    db.zero();
    return;
  }
  dnnl::engine& engine = dnnl_engine(ctx);
  dnnl::stream& stream = dnnl_stream(ctx);
  if (dx.defined()) {
    LinearBackwardData& e = cached_primitive<LinearBackwardData>({engine_key(engine), d.n, d.in, d.out}, [&] {
      dnnl::inner_product_backward_data::desc desc(d.src(), d.weights(), d.dst());
      dnnl::inner_product_backward_data::primitive_desc pd(desc, engine, forward_pd(d, engine));
      return LinearBackwardData{dnnl::inner_product_backward_data(pd), user_memory(d.dst(), engine),
                                user_memory(d.weights(), engine), user_memory(d.src(), engine)};
    });
    e.diff_dst.set_data_handle(dy.raw());
    e.weights.set_data_handle(w.raw());
    e.diff_src.set_data_handle(dx.raw());
    e.prim.execute(stream,
                   {{DNNL_ARG_DIFF_DST, e.diff_dst}, {DNNL_ARG_WEIGHTS, e.weights}, {DNNL_ARG_DIFF_SRC, e.diff_src}});
  }
  LinearBackwardWeights& e = cached_primitive<LinearBackwardWeights>({engine_key(engine), d.n, d.in, d.out}, [&] {
    dnnl::inner_product_backward_weights::desc desc(d.src(), d.weights(), d.bias(), d.dst());
    dnnl::inner_product_backward_weights::primitive_desc pd(desc, engine, forward_pd(d, engine));
    return LinearBackwardWeights{dnnl::inner_product_backward_weights(pd), user_memory(d.src(), engine),
                                 user_memory(d.dst(), engine), user_memory(d.weights(), engine),
                                 user_memory(d.bias(), engine)};
  });
  e.src.set_data_handle(x.raw());
  e.diff_dst.set_data_handle(dy.raw());
  e.diff_weights.set_data_handle(dw.raw());
  e.diff_bias.set_data_handle(db.raw());
  e.prim.execute(stream, {{DNNL_ARG_SRC, e.src},
                          {DNNL_ARG_DIFF_DST, e.diff_dst},
                          {DNNL_ARG_DIFF_WEIGHTS, e.diff_weights},
                          {DNNL_ARG_DIFF_BIAS, e.diff_bias}});
}

}  // namespace scaletrain::ops::cpu
