// Helper of tests/python/test_torch_ncf_ops.py: runs the NCF ops and Adam on inputs that the
// script wrote to an HDF5 file and writes every result to another, for comparison with PyTorch.
// The model ops are not reachable from the scaletrain CLI until the NCF model exists, hence a
// small program of its own (no MPI: one process, the CPU backend).
//
// usage: scaletrain-ncf-ops-helper IN.h5 OUT.h5 LR BETA1 BETA2 EPS
// IN.h5:  table (V, D), indices (N) i32, dout (N, D); a, b, dy (N, D); left (N, A), right (N, B),
//         dcat (N, A + B); logits (N, 1), targets (N, 1); adam_w (P), adam_grads (S, P)
// OUT.h5: out, dtable; y, da, db; cat, dleft, dright; loss (1), dlogits; adam_w (S, P) (the
//         weights after each step), adam_m (P), adam_v (P); lazy_w_steps (S, R, W), lazy_m, lazy_v
//         (LazyAdam on lazy_w (R, W) with lazy_grads (S, R, W))
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "scaletrain/io/hdf5.hpp"
#include "scaletrain/nn/parameters.hpp"
#include "scaletrain/ops/concat.hpp"
#include "scaletrain/ops/embedding.hpp"
#include "scaletrain/ops/multiply.hpp"
#include "scaletrain/ops/sigmoid_bce.hpp"
#include "scaletrain/optim/adam.hpp"

namespace st = scaletrain;
using st::io::H5File;

namespace {

void run_embedding(st::Context& ctx, const H5File& in, H5File& out) {
  const st::Tensor table = in.read("table", st::DType::f32), idx = in.read("indices", st::DType::i32);
  const st::Tensor dout = in.read("dout", st::DType::f32);
  st::Tensor y = st::Tensor::empty({idx.dim(0), table.dim(1)}), dtable = st::Tensor::empty(table.shape());
  st::ops::embedding_forward(ctx, table, idx, y);
  st::ops::embedding_backward(ctx, idx, dout, dtable);
  out.write("out", y);
  out.write("dtable", dtable);
}

void run_multiply(st::Context& ctx, const H5File& in, H5File& out) {
  const st::Tensor a = in.read("a", st::DType::f32), b = in.read("b", st::DType::f32);
  const st::Tensor dy = in.read("dy", st::DType::f32);
  st::Tensor y = st::Tensor::empty(a.shape()), da = st::Tensor::empty(a.shape()), db = st::Tensor::empty(a.shape());
  st::ops::multiply_forward(ctx, a, b, y);
  st::ops::multiply_backward(ctx, a, b, dy, da, db);
  out.write("y", y);
  out.write("da", da);
  out.write("db", db);
}

void run_concat(st::Context& ctx, const H5File& in, H5File& out) {
  const st::Tensor l = in.read("left", st::DType::f32), r = in.read("right", st::DType::f32);
  const st::Tensor dcat = in.read("dcat", st::DType::f32);
  st::Tensor cat = st::Tensor::empty({l.dim(0), l.dim(1) + r.dim(1)});
  st::Tensor dl = st::Tensor::empty(l.shape()), dr = st::Tensor::empty(r.shape());
  st::ops::concat_features_forward(ctx, l, r, cat);
  st::ops::concat_features_backward(ctx, dcat, dl, dr);
  out.write("cat", cat);
  out.write("dleft", dl);
  out.write("dright", dr);
}

void run_bce(st::Context& ctx, const H5File& in, H5File& out) {
  const st::Tensor x = in.read("logits", st::DType::f32), t = in.read("targets", st::DType::f32);
  st::Tensor dx = st::Tensor::empty(x.shape()), loss = st::Tensor::empty({1});
  loss.data<float>()[0] = static_cast<float>(st::ops::sigmoid_bce_with_logits(ctx, x, t, dx));
  out.write("loss", loss);
  out.write("dlogits", dx);
}

void run_adam(st::Context& ctx, const H5File& in, H5File& out, double lr, const st::optim::AdamOptions& options) {
  const st::Tensor w0 = in.read("adam_w", st::DType::f32), grads = in.read("adam_grads", st::DType::f32);
  const int64_t steps = grads.dim(0), n = grads.dim(1);
  st::nn::ParameterSet params;
  params.add_parameter("w", {n});
  params.finalize();
  params.value(0).copy_from(w0);
  st::optim::Adam adam(params, options);
  st::Tensor history = st::Tensor::empty({steps, n});
  for (int64_t s = 0; s < steps; ++s) {
    params.flat_grads().copy_from(st::Tensor::view_of(grads, s * n, {n}));
    adam.step(ctx, lr);
    st::Tensor::view_of(history, s * n, {n}).copy_from(params.flat_values());
  }
  out.write("adam_w", history);
  out.write("adam_m", adam.momentum_buffer());
  out.write("adam_v", adam.second_moment_buffer());
}

// LazyAdam on a lookup-only table: lazy_w (R, W), lazy_grads (S, R, W) whose untouched rows are
// zeros; writes lazy_w_steps (S, R, W), lazy_m, lazy_v.
void run_lazy_adam(st::Context& ctx, const H5File& in, H5File& out, double lr, const st::optim::AdamOptions& options) {
  const st::Tensor w0 = in.read("lazy_w", st::DType::f32), grads = in.read("lazy_grads", st::DType::f32);
  const int64_t steps = grads.dim(0), n = w0.numel();
  st::nn::ParameterSet params;
  params.set_lookup_only(params.add_parameter("table", w0.shape()));
  params.finalize();
  params.value(0).copy_from(w0);
  st::optim::LazyAdam adam(params, options);
  st::Tensor history = st::Tensor::empty({steps, w0.dim(0), w0.dim(1)});
  for (int64_t s = 0; s < steps; ++s) {
    params.flat_grads().copy_from(st::Tensor::view_of(grads, s * n, {n}));
    adam.step(ctx, lr);
    st::Tensor::view_of(history, s * n, {n}).copy_from(params.flat_values());
  }
  out.write("lazy_w_steps", history);
  out.write("lazy_m", adam.momentum_buffer());
  out.write("lazy_v", adam.second_moment_buffer());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: %s IN.h5 OUT.h5 LR BETA1 BETA2 EPS\n", argv[0]);
    return 2;
  }
  try {
    st::Context ctx;
    const H5File in(argv[1], H5File::Mode::read);
    H5File out(argv[2], H5File::Mode::create_truncate);
    run_embedding(ctx, in, out);
    run_multiply(ctx, in, out);
    run_concat(ctx, in, out);
    run_bce(ctx, in, out);
    const st::optim::AdamOptions options{std::strtod(argv[4], nullptr), std::strtod(argv[5], nullptr),
                                         std::strtod(argv[6], nullptr)};
    run_adam(ctx, in, out, std::strtod(argv[3], nullptr), options);
    run_lazy_adam(ctx, in, out, std::strtod(argv[3], nullptr), options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", argv[0], e.what());
    return 1;
  }
  return 0;
}
