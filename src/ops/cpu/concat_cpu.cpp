// CPU concatenation along the last dimension and its split: one row copy per input and row
// (memcpy), the rows split statically over the threads. oneDNN's concat could do the forward, but it
// has no split, and the copies are all either needs.
#include <cstdint>
#include <cstring>
#include <vector>

#include "scaletrain/ops/concat.hpp"

namespace scaletrain::ops::cpu {
namespace {

constexpr int64_t kParallelMin = 1 << 15;  // elements moved; below this a thread team costs more than it saves

// The rows of a (..., C) tensor: the product of its leading dims.
int64_t rows_of(const Tensor& t) {
  int64_t rows = 1;
  for (int i = 0; i + 1 < t.ndim(); ++i) rows *= t.dim(i);
  return rows;
}

// Copies between the whole (rows, W) and its parts (rows, C_i): into the whole when `join`, else out.
void copy_parts(const Tensor& whole, const std::vector<Tensor>& parts, bool join) {
  const int64_t rows = rows_of(whole), width = whole.dim(-1);
  std::vector<int64_t> offsets;
  int64_t offset = 0;
  for (const Tensor& t : parts) {
    offsets.push_back(offset);
    offset += t.dim(-1);
  }
  float* w = whole.data<float>();
#pragma omp parallel for schedule(static) if (rows * width >= kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    for (std::size_t i = 0; i < parts.size(); ++i) {
      const int64_t c = parts[i].dim(-1);
      if (c == 0) continue;  // an empty part may have no storage
      float* part_row = parts[i].data<float>() + r * c;
      float* whole_row = w + r * width + offsets[i];
      if (join)
        std::memcpy(whole_row, part_row, c * sizeof(float));
      else
        std::memcpy(part_row, whole_row, c * sizeof(float));
    }
  }
}

}  // namespace

void concat_features_forward(Context& ctx, const Tensor& a, const Tensor& b, Tensor& y) {
  const int64_t n = a.dim(0), wa = a.dim(1), wb = b.dim(1), wy = wa + wb;
  const float* ap = a.data<float>();
  const float* bp = b.data<float>();
  float* yp = y.data<float>();
#pragma omp parallel for schedule(static) if (n * wy >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(yp + i * wy, ap + i * wa, wa * sizeof(float));
    std::memcpy(yp + i * wy + wa, bp + i * wb, wb * sizeof(float));
  }
}

void concat_features_backward(Context& ctx, const Tensor& dy, Tensor& da, Tensor& db) {
  const int64_t n = da.dim(0), wa = da.dim(1), wb = db.dim(1), wy = wa + wb;
  const float* g = dy.data<float>();
  float* dap = da.data<float>();
  float* dbp = db.data<float>();
#pragma omp parallel for schedule(static) if (n * wy >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(dap + i * wa, g + i * wy, wa * sizeof(float));
    std::memcpy(dbp + i * wb, g + i * wy + wa, wb * sizeof(float));
  }
}

void concat_channels_forward(Context& ctx, const std::vector<Tensor>& xs, Tensor& y) { copy_parts(y, xs, true); }

void concat_channels_backward(Context& ctx, const Tensor& dy, const std::vector<Tensor>& dxs) {
  copy_parts(dy, dxs, false);
}

}  // namespace scaletrain::ops::cpu
