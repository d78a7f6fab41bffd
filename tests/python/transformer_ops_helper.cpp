// Helper of tests/python/test_torch_transformer_ops.py: runs the Transformer's ops (issue 25) on
// inputs that the script wrote to an HDF5 file and writes every result to another, for comparison
// with PyTorch. The ops are not reachable from the scaletrain CLI until the Transformer model
// exists, hence a small program of its own (no MPI: one process, the CPU backend).
//
// usage: scaletrain_torch_transformer_ops_helper IN.h5 OUT.h5
// IN.h5:  ln_x (M, D), ln_gamma (D), ln_beta (D), ln_dy (M, D);
//         for each attention A in {cross, causal}: A_q (N, H, Lq, dk), A_k (N, H, Lk, dk),
//         A_v (N, H, Lk, dk), A_lengths (N) i32, A_do (N, H, Lq, dk);
//         xent_logits (T, V), xent_labels (T) i32 (0 = padding), xent_normaliser (1)
// OUT.h5: ln_y, ln_dx, ln_dgamma, ln_dbeta; A_o, A_dq, A_dk, A_dv; xent_sum (1), xent_tokens (1),
//         xent_dlogits
#include <cmath>
#include <cstdio>
#include <exception>
#include <string>

#include "scaletrain/io/hdf5.hpp"
#include "scaletrain/ops/batched_matmul.hpp"
#include "scaletrain/ops/layer_norm.hpp"
#include "scaletrain/ops/loss.hpp"
#include "scaletrain/ops/softmax.hpp"

namespace st = scaletrain;
using st::io::H5File;

namespace {

void run_layer_norm(st::Context& ctx, const H5File& in, H5File& out) {
  const st::Tensor x = in.read("ln_x", st::DType::f32), gamma = in.read("ln_gamma", st::DType::f32);
  const st::Tensor beta = in.read("ln_beta", st::DType::f32), dy = in.read("ln_dy", st::DType::f32);
  st::Tensor y = st::Tensor::empty(x.shape()), mean = st::Tensor::empty({x.dim(0)}),
             rstd = st::Tensor::empty({x.dim(0)});
  st::ops::layer_norm_forward(ctx, st::ops::LayerNormParams{1e-6f}, x, gamma, beta, y, mean, rstd);
  st::Tensor dx = st::Tensor::empty(x.shape()), dgamma = st::Tensor::empty(gamma.shape()),
             dbeta = st::Tensor::empty(beta.shape());
  st::ops::layer_norm_backward(ctx, x, dy, gamma, mean, rstd, dx, dgamma, dbeta);
  out.write("ln_y", y);
  out.write("ln_dx", dx);
  out.write("ln_dgamma", dgamma);
  out.write("ln_dbeta", dbeta);
}

// Scaled dot-product attention per head from the ops, forward and backward, as the model will run
// it: S = Q K^T / sqrt(dk), P = masked softmax(S), O = P V; dP = dO V^T, dV = P^T dO,
// dS = softmax backward, dQ = dS K / sqrt(dk), dK = dS^T Q / sqrt(dk).
void run_attention(st::Context& ctx, const H5File& in, H5File& out, const std::string& name, bool causal) {
  const st::Tensor q4 = in.read(name + "_q", st::DType::f32), k4 = in.read(name + "_k", st::DType::f32);
  const st::Tensor v4 = in.read(name + "_v", st::DType::f32), do4 = in.read(name + "_do", st::DType::f32);
  const st::Tensor lengths = in.read(name + "_lengths", st::DType::i32);
  const int64_t n = q4.dim(0), heads = q4.dim(1), lq = q4.dim(2), lk = k4.dim(2), dk = q4.dim(3);
  const int64_t b = n * heads;
  const float alpha = 1.0f / std::sqrt(static_cast<float>(dk));
  const st::Tensor q = q4.reshape({b, lq, dk}), k = k4.reshape({b, lk, dk}), v = v4.reshape({b, lk, dk}),
                   dout = do4.reshape({b, lq, dk});
  st::Tensor s = st::Tensor::empty({n, heads, lq, lk}), p = st::Tensor::empty({n, heads, lq, lk});
  st::Tensor s3 = s.reshape({b, lq, lk});
  st::ops::batched_matmul(ctx, {false, true, alpha}, q, k, s3);
  st::ops::masked_softmax_forward(ctx, st::ops::SoftmaxMask{causal}, s, lengths, p);
  st::Tensor o = st::Tensor::empty({b, lq, dk});
  const st::Tensor p3 = p.reshape({b, lq, lk});
  st::ops::batched_matmul(ctx, {false, false, 1.0f}, p3, v, o);
  st::Tensor dp = st::Tensor::empty({n, heads, lq, lk}), ds = st::Tensor::empty({n, heads, lq, lk});
  st::Tensor dp3 = dp.reshape({b, lq, lk});
  st::ops::batched_matmul(ctx, {false, true, 1.0f}, dout, v, dp3);
  st::Tensor dv = st::Tensor::empty({b, lk, dk}), dq = st::Tensor::empty({b, lq, dk}),
             dkey = st::Tensor::empty({b, lk, dk});
  st::ops::batched_matmul(ctx, {true, false, 1.0f}, p3, dout, dv);
  st::ops::masked_softmax_backward(ctx, p, dp, ds);
  const st::Tensor ds3 = ds.reshape({b, lq, lk});
  st::ops::batched_matmul(ctx, {false, false, alpha}, ds3, k, dq);
  st::ops::batched_matmul(ctx, {true, false, alpha}, ds3, q, dkey);
  out.write(name + "_o", o.reshape(q4.shape()));
  out.write(name + "_dq", dq.reshape(q4.shape()));
  out.write(name + "_dk", dkey.reshape(k4.shape()));
  out.write(name + "_dv", dv.reshape(v4.shape()));
}

void run_token_loss(st::Context& ctx, const H5File& in, H5File& out) {
  const st::Tensor logits = in.read("xent_logits", st::DType::f32), labels = in.read("xent_labels", st::DType::i32);
  const double normaliser = in.read("xent_normaliser", st::DType::f32).data<float>()[0];
  st::Tensor dlogits = st::Tensor::empty(logits.shape());
  const st::ops::TokenLoss r = st::ops::token_cross_entropy(ctx, logits, labels, 0.1f, 0, normaliser, dlogits);
  st::Tensor sum = st::Tensor::empty({1}), tokens = st::Tensor::empty({1});
  sum.data<float>()[0] = static_cast<float>(r.sum);
  tokens.data<float>()[0] = static_cast<float>(r.tokens);
  out.write("xent_sum", sum);
  out.write("xent_tokens", tokens);
  out.write("xent_dlogits", dlogits);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s IN.h5 OUT.h5\n", argv[0]);
    return 2;
  }
  try {
    st::Context ctx;
    const H5File in(argv[1], H5File::Mode::read);
    H5File out(argv[2], H5File::Mode::create_truncate);
    run_layer_norm(ctx, in, out);
    run_attention(ctx, in, out, "cross", false);
    run_attention(ctx, in, out, "causal", true);
    run_token_loss(ctx, in, out);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", argv[0], e.what());
    return 1;
  }
  return 0;
}
