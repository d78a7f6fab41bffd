// Naive float64 batched matrix products: element (i, r, s) of op(a) and op(b) read through the
// stored layout, triple loops, and the gradients from d<dc, c>/d op(a) = alpha dc op(b)^T and
// d<dc, c>/d op(b) = alpha op(a)^T dc, written back in the stored layouts.
#include "support/reference_batched_matmul.hpp"

namespace scaletrain::test {
namespace {

// Element (r, s) of op(X) for matrix i of a batch stored as (rows, cols) per matrix.
double op_at(const std::vector<double>& x, bool trans, int64_t i, int64_t r, int64_t s, int64_t op_rows,
             int64_t op_cols) {
  return trans ? x[(i * op_cols + s) * op_rows + r] : x[(i * op_rows + r) * op_cols + s];
}

}  // namespace

std::vector<double> reference_batched_matmul(const RefMatmulDims& d, double alpha, const std::vector<double>& a,
                                             const std::vector<double>& b) {
  std::vector<double> c(d.batch * d.m * d.n, 0.0);
  for (int64_t i = 0; i < d.batch; ++i)
    for (int64_t r = 0; r < d.m; ++r)
      for (int64_t s = 0; s < d.n; ++s) {
        double sum = 0.0;
        for (int64_t t = 0; t < d.k; ++t)
          sum += op_at(a, d.trans_a, i, r, t, d.m, d.k) * op_at(b, d.trans_b, i, t, s, d.k, d.n);
        c[(i * d.m + r) * d.n + s] = alpha * sum;
      }
  return c;
}

std::vector<double> reference_batched_matmul_da(const RefMatmulDims& d, double alpha, const std::vector<double>& b,
                                                const std::vector<double>& dc) {
  std::vector<double> da(d.batch * d.m * d.k, 0.0);
  for (int64_t i = 0; i < d.batch; ++i)
    for (int64_t r = 0; r < d.m; ++r)
      for (int64_t t = 0; t < d.k; ++t) {
        double sum = 0.0;
        for (int64_t s = 0; s < d.n; ++s) sum += dc[(i * d.m + r) * d.n + s] * op_at(b, d.trans_b, i, t, s, d.k, d.n);
        (d.trans_a ? da[(i * d.k + t) * d.m + r] : da[(i * d.m + r) * d.k + t]) = alpha * sum;
      }
  return da;
}

std::vector<double> reference_batched_matmul_db(const RefMatmulDims& d, double alpha, const std::vector<double>& a,
                                                const std::vector<double>& dc) {
  std::vector<double> db(d.batch * d.k * d.n, 0.0);
  for (int64_t i = 0; i < d.batch; ++i)
    for (int64_t t = 0; t < d.k; ++t)
      for (int64_t s = 0; s < d.n; ++s) {
        double sum = 0.0;
        for (int64_t r = 0; r < d.m; ++r) sum += op_at(a, d.trans_a, i, r, t, d.m, d.k) * dc[(i * d.m + r) * d.n + s];
        (d.trans_b ? db[(i * d.n + s) * d.k + t] : db[(i * d.k + t) * d.n + s]) = alpha * sum;
      }
  return db;
}

}  // namespace scaletrain::test
