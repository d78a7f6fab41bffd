// CUDA concatenation along the last dimension and its split. concat_features: one grid-stride pass
// over the output (or dy), each element a copy from its side. concat_channels: one strided copy
// (cudaMemcpy2DAsync on the compute stream) per input, its C_i-float rows into their column block of
// the (rows, sum C_i) output, or back; no kernel. Copies: the same bits as the CPU.
// 16-bit storage (with_half_storage): concat_features reads and writes each element in its
// tensor's format; concat_channels copies rows of the whole's element size, and a part of another
// type goes through a scratch tensor of the whole's type (convert_storage: the dispatch's rounding).
#include <vector>

#include "backend/cuda/cuda_context.hpp"
#include "ops/cuda/grid_stride.cuh"
#include "ops/cuda/half_io.cuh"
#include "scaletrain/ops/concat.hpp"

namespace scaletrain::ops::cuda {
namespace {

__global__ void concat_kernel(const void* a, ElemKind ak, const void* b, ElemKind bk, void* y, ElemKind yk, int64_t n,
                              int64_t wa, int64_t wb) {
  const int64_t wy = wa + wb, total = n * wy;
  for (int64_t e = grid_first(); e < total; e += grid_stride()) {
    const int64_t i = e / wy, j = e - i * wy;
    store_float(y, yk, e, j < wa ? load_float(a, ak, i * wa + j) : load_float(b, bk, i * wb + (j - wa)));
  }
}

__global__ void split_kernel(const void* dy, ElemKind dyk, void* da, ElemKind dak, void* db, ElemKind dbk, int64_t n,
                             int64_t wa, int64_t wb) {
  const int64_t wy = wa + wb, total = n * wy;
  for (int64_t e = grid_first(); e < total; e += grid_stride()) {
    const int64_t i = e / wy, j = e - i * wy;
    if (j < wa)
      store_float(da, dak, i * wa + j, load_float(dy, dyk, e));
    else
      store_float(db, dbk, i * wb + (j - wa), load_float(dy, dyk, e));
  }
}

int64_t rows_of(const Tensor& t) {
  int64_t rows = 1;
  for (int i = 0; i + 1 < t.ndim(); ++i) rows *= t.dim(i);
  return rows;
}

// Copies between the whole (rows, W) and its parts (rows, C_i): into the whole when `join`, else out.
// Rows are copied in the whole's element size; a part of another type is converted through a
// scratch tensor of the whole's type (before the copy when joining, after it when splitting).
void copy_parts(Context& ctx, const Tensor& whole, const std::vector<Tensor>& parts, bool join) {
  const int64_t rows = rows_of(whole);
  const std::size_t elem = dtype_size(whole.dtype());
  const std::size_t pitch = static_cast<std::size_t>(whole.dim(-1)) * elem;
  char* base = static_cast<char*>(whole.raw());
  std::size_t offset = 0;
  for (const Tensor& part : parts) {
    const std::size_t width = static_cast<std::size_t>(part.dim(-1)) * elem;
    const bool same = part.dtype() == whole.dtype();
    Tensor t = same ? part : Tensor::empty(part.shape(), whole.dtype(), Device::cuda);
    if (!same && join) convert_storage(ctx, part, t);
    if (rows > 0 && width > 0) {
      char* column = base + offset;
      void* dst = join ? static_cast<void*>(column) : t.raw();
      const void* src = join ? t.raw() : static_cast<const void*>(column);
      ST_CHECK_CUDA(cudaMemcpy2DAsync(dst, join ? pitch : width, src, join ? width : pitch, width,
                                      static_cast<std::size_t>(rows), cudaMemcpyDeviceToDevice,
                                      scaletrain::cuda::compute_stream(ctx)));
    }
    if (!same && !join) {
      Tensor out = part;  // a handle on the caller's tensor
      convert_storage(ctx, t, out);
    }
    offset += width;
  }
}

}  // namespace

void concat_features_forward(Context& ctx, const Tensor& a, const Tensor& b, Tensor& y) {
  const int64_t n = a.dim(0), wa = a.dim(1), wb = b.dim(1);
  if (n * (wa + wb) == 0) return;
  concat_kernel<<<scaletrain::cuda::blocks_for(n * (wa + wb)), scaletrain::cuda::kThreadsPerBlock, 0,
                  scaletrain::cuda::compute_stream(ctx)>>>(a.raw(), elem_kind(a, "concat_features a"), b.raw(),
                                                           elem_kind(b, "concat_features b"), y.raw(),
                                                           elem_kind(y, "concat_features y"), n, wa, wb);
  ST_CHECK_LAUNCH();
}

void concat_features_backward(Context& ctx, const Tensor& dy, Tensor& da, Tensor& db) {
  const int64_t n = da.dim(0), wa = da.dim(1), wb = db.dim(1);
  if (n * (wa + wb) == 0) return;
  split_kernel<<<scaletrain::cuda::blocks_for(n * (wa + wb)), scaletrain::cuda::kThreadsPerBlock, 0,
                 scaletrain::cuda::compute_stream(ctx)>>>(dy.raw(), elem_kind(dy, "concat_features dy"), da.raw(),
                                                          elem_kind(da, "concat_features da"), db.raw(),
                                                          elem_kind(db, "concat_features db"), n, wa, wb);
  ST_CHECK_LAUNCH();
}

void concat_channels_forward(Context& ctx, const std::vector<Tensor>& xs, Tensor& y) { copy_parts(ctx, y, xs, true); }

void concat_channels_backward(Context& ctx, const Tensor& dy, const std::vector<Tensor>& dxs) {
  copy_parts(ctx, dy, dxs, false);
}

}  // namespace scaletrain::ops::cuda
