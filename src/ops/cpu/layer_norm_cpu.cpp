// CPU layer normalisation over the last dimension: own loops rather than oneDNN 2.6's
// layer_normalization, so that the statistics are summed in double in a fixed order (the CUDA
// kernels sum in double too, and both devices agree to float rounding), and the parameter
// gradients are column sums in row order whatever the thread count (oneDNN's reduction order
// depends on its threads). Rows are independent: forward and dx parallelise over rows, dgamma and
// dbeta over blocks of columns.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "scaletrain/ops/layer_norm.hpp"

namespace scaletrain::ops::cpu {
namespace {

constexpr int64_t kParallelMin = 1 << 15;  // below this many elements a thread team costs more than it saves
constexpr int64_t kColumnBlock = 16;       // columns whose gradient sums one thread keeps while it walks the rows

}  // namespace

void layer_norm_forward(Context& /*ctx*/, const LayerNormParams& p, const Tensor& x, const Tensor& gamma,
                        const Tensor& beta, Tensor& y, Tensor& saved_mean, Tensor& saved_rstd) {
  const int64_t d = x.dim(-1), m = x.numel() / d;
  const float* xp = x.data<float>();
  const float* g = gamma.data<float>();
  const float* b = beta.data<float>();
  float* yp = y.data<float>();
  float* mean_out = saved_mean.data<float>();
  float* rstd_out = saved_rstd.data<float>();
#pragma omp parallel for schedule(static) if (x.numel() >= kParallelMin)
  for (int64_t r = 0; r < m; ++r) {
    const float* row = xp + r * d;
    double sum = 0.0;
    for (int64_t j = 0; j < d; ++j) sum += row[j];
    const double mean = sum / static_cast<double>(d);
    double squares = 0.0;
    for (int64_t j = 0; j < d; ++j) squares += (row[j] - mean) * (row[j] - mean);
    const double rstd = 1.0 / std::sqrt(squares / static_cast<double>(d) + static_cast<double>(p.eps));
    float* out = yp + r * d;
    for (int64_t j = 0; j < d; ++j)
      out[j] = static_cast<float>((row[j] - mean) * rstd * static_cast<double>(g[j]) + static_cast<double>(b[j]));
    mean_out[r] = static_cast<float>(mean);
    rstd_out[r] = static_cast<float>(rstd);
  }
}

// With xhat = (x - mean) * rstd and g = dy * gamma over a row:
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)),  dgamma = sum_rows dy * xhat,  dbeta = sum_rows dy.
// The saved float mean and rstd are used as they are (the forward's rounding is part of the op).
void layer_norm_backward(Context& /*ctx*/, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                         const Tensor& saved_mean, const Tensor& saved_rstd, Tensor& dx, Tensor& dgamma,
                         Tensor& dbeta) {
  const int64_t d = x.dim(-1), m = x.numel() / d;
  const float* xp = x.data<float>();
  const float* dyp = dy.data<float>();
  const float* g = gamma.data<float>();
  const float* mean = saved_mean.data<float>();
  const float* rstd = saved_rstd.data<float>();
  float* dxp = dx.data<float>();
#pragma omp parallel for schedule(static) if (x.numel() >= kParallelMin)
  for (int64_t r = 0; r < m; ++r) {
    const float* row = xp + r * d;
    const float* drow = dyp + r * d;
    const double mu = mean[r], s = rstd[r];
    double sum_g = 0.0, sum_gx = 0.0;
    for (int64_t j = 0; j < d; ++j) {
      const double gj = static_cast<double>(drow[j]) * g[j];
      sum_g += gj;
      sum_gx += gj * ((row[j] - mu) * s);
    }
    const double mean_g = sum_g / static_cast<double>(d), mean_gx = sum_gx / static_cast<double>(d);
    float* out = dxp + r * d;
    for (int64_t j = 0; j < d; ++j) {
      const double xhat = (row[j] - mu) * s;
      out[j] = static_cast<float>(s * (static_cast<double>(drow[j]) * g[j] - mean_g - xhat * mean_gx));
    }
  }
  float* dg = dgamma.data<float>();
  float* db = dbeta.data<float>();
  const int64_t blocks = (d + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static) if (x.numel() >= kParallelMin)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t j0 = blk * kColumnBlock, j1 = std::min(d, j0 + kColumnBlock);
    double sum_dg[kColumnBlock] = {}, sum_db[kColumnBlock] = {};
    for (int64_t r = 0; r < m; ++r) {
      const double mu = mean[r], s = rstd[r];
      for (int64_t j = j0; j < j1; ++j) {
        const double dyj = dyp[r * d + j];
        sum_dg[j - j0] += dyj * ((xp[r * d + j] - mu) * s);
        sum_db[j - j0] += dyj;
      }
    }
    for (int64_t j = j0; j < j1; ++j) {
      dg[j] = static_cast<float>(sum_dg[j - j0]);
      db[j] = static_cast<float>(sum_db[j - j0]);
    }
  }
}

}  // namespace scaletrain::ops::cpu
