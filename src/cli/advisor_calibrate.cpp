// scaletrain-advisor calibrate (placeholder until the sweep lands).
#include "cli/advisor_commands.hpp"
#include "scaletrain/core/error.hpp"

namespace scaletrain::cli {

int cmd_advisor_calibrate(int argc, char** argv) { throw UsageError("calibrate: not built yet"); }

}  // namespace scaletrain::cli
