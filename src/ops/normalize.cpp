// Image normalisation: argument checks and per-device dispatch. Kernels in src/ops/<device>/.
#include "scaletrain/ops/normalize.hpp"

#include "ops/op.hpp"
#include "scaletrain/config.hpp"
#include "scaletrain/core/error.hpp"

namespace scaletrain::ops {

// The kernels, declared from the public signatures, and the one dispatch point per op (ops/op.hpp).
using NormalizeImagesFn = void(Context& ctx, const Tensor& x, const std::vector<double>& mean,
                               const std::vector<double>& std, Tensor& y, ChannelOrder order);
namespace cpu {
NormalizeImagesFn normalize_images;
}
namespace cuda {
NormalizeImagesFn normalize_images;
}
const Op<NormalizeImagesFn> normalize_images_op{
    "normalize_images",
    {cpu::normalize_images},
    with_half_storage<NormalizeImagesFn>({ST_CUDA_KERNEL(cuda::normalize_images)})};

void normalize_images(Context& ctx, const Tensor& x, const std::vector<double>& mean, const std::vector<double>& std,
                      Tensor& y, ChannelOrder order) {
  ST_CHECK(x.defined(), "normalize_images: x is undefined");
  ST_CHECK(x.dtype() == DType::u8, "normalize_images: x must be uint8 pixels, got " << dtype_name(x.dtype()));
  ST_CHECK(x.device() == ctx.device(), "normalize_images: x is on " << device_name(x.device())
                                                                    << " but the context runs on "
                                                                    << device_name(ctx.device()));
  ST_CHECK(x.shape().size() == 4,
           "normalize_images: x has shape " << shape_string(x.shape()) << ", expected (N, H, W, C)");
  check_tensor(ctx, y, x.shape(), "normalize_images", "y");
  const int64_t c = x.dim(3);
  ST_CHECK(c > 0, "normalize_images: x has no channels (shape " << shape_string(x.shape()) << ")");
  ST_CHECK(static_cast<int64_t>(mean.size()) == c && static_cast<int64_t>(std.size()) == c,
           "normalize_images: " << c << " channels but " << mean.size() << " means and " << std.size()
                                << " standard deviations");
  for (double s : std) ST_CHECK(s > 0.0, "normalize_images: standard deviation " << s << " is not positive");
  return normalize_images_op(ctx, x, mean, std, y, order);
}

}  // namespace scaletrain::ops
