// Placeholder until the MPI-IO readers land: --io mpiio and mpiio-collective are refused clearly.
#include "scaletrain/core/error.hpp"
#include "scaletrain/data/pipeline.hpp"

namespace scaletrain::data {
std::unique_ptr<SampleReader> make_mpiio_reader(const SplitInfo&, const LoaderOptions& options,
                                                const comm::Communicator&, bool) {
  ST_THROW("--io " << options.io << " is not available in this build (use --io posix)");
}
}  // namespace scaletrain::data
