// Dispatch from the loader options and the split's encoding to a SampleReader and a
// SampleDecoder (the implementations live in their own files, one per engineer's concern).
#include "scaletrain/data/pipeline.hpp"

#include "scaletrain/core/error.hpp"

namespace scaletrain::data {

namespace {
constexpr const char* kIoModes[] = {"posix", "mmap", "mpiio", "mpiio-collective"};
constexpr const char* kPreprocessModes[] = {"torchvision", "caffe"};
}  // namespace

bool is_io_mode(const std::string& io) {
  for (const char* mode : kIoModes)
    if (io == mode) return true;
  return false;
}

std::string io_mode_list() {
  std::string list;
  for (const char* mode : kIoModes) list += (list.empty() ? "" : ", ") + std::string(mode);
  return list;
}

bool is_preprocess_mode(const std::string& preprocess) {
  for (const char* mode : kPreprocessModes)
    if (preprocess == mode) return true;
  return false;
}

std::string preprocess_mode_list() {
  std::string list;
  for (const char* mode : kPreprocessModes) list += (list.empty() ? "" : ", ") + std::string(mode);
  return list;
}

std::unique_ptr<SampleReader> make_sample_reader(const SplitInfo& split, const LoaderOptions& options,
                                                 const comm::Communicator* comm) {
  if (options.io == "posix") return make_posix_reader(split, options);
  if (options.io == "mmap") return make_mmap_reader(split, options);
  if (options.io == "mpiio" || options.io == "mpiio-collective") {
    ST_CHECK(comm != nullptr, "--io " << options.io << " needs the MPI communicator (LoaderOptions::comm)");
    return make_mpiio_reader(split, options, *comm, options.io == "mpiio-collective");
  }
  ST_THROW("unknown --io '" << options.io << "' (known: " << io_mode_list() << ")");
}

std::unique_ptr<SampleDecoder> make_sample_decoder(const SplitInfo& split, const LoaderOptions& options) {
  if (split.encoding == "raw") return make_raw_decoder(split, options);
  if (split.encoding == "jpeg") return make_jpeg_decoder(split, options);
  ST_THROW(split.dir << ": unknown image encoding '" << split.encoding << "' (expected raw or jpeg)");
}

}  // namespace scaletrain::data
