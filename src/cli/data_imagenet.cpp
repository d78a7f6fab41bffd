// Placeholder until the ImageNet converter lands.
#include "cli/data_subcommands.hpp"
#include "scaletrain/cli/guard.hpp"

namespace scaletrain::cli {
int convert_imagenet_main(int, char**) { throw UsageError("convert imagenet is not available in this build yet"); }
}  // namespace scaletrain::cli
