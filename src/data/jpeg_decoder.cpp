// Placeholder until the JPEG decoder lands: JPEG-encoded datasets are refused clearly.
#include "scaletrain/core/error.hpp"
#include "scaletrain/data/pipeline.hpp"

namespace scaletrain::data {
std::unique_ptr<SampleDecoder> make_jpeg_decoder(const SplitInfo& split, const LoaderOptions&) {
  ST_THROW(split.dir << ": JPEG-encoded datasets are not supported by this build");
}
}  // namespace scaletrain::data
