// scaletrain-advisor: its dispatch and `predict` (docs/scaling-model.md).
#include <iostream>
#include <string>

#include "cli/advisor_commands.hpp"
#include "scaletrain/cli/commands.hpp"
#include "scaletrain/cli/guard.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/core/log.hpp"

namespace scaletrain::cli {
namespace {

const char* const kAdvisorUsage =
    "usage: scaletrain-advisor <command> [options]\n"
    "  predict    step time, throughput and efficiency of a calibrated model on a machine, 1 to N\n"
    "             nodes, strong and weak scaling, and how to share a node budget\n"
    "  calibrate  a short sweep on one rank that measures a model: writes a calibration file\n"
    "Run 'scaletrain-advisor <command> --help' for its options; docs/scaling-model.md explains the model.\n";

int dispatch(int argc, char** argv) {
  if (argc < 2) throw UsageError(std::string("no command given\n") + kAdvisorUsage);
  const std::string command = argv[1];
  if (command == "--help" || command == "-h" || command == "help") {
    if (log_rank() == 0) std::cout << kAdvisorUsage;
    return 0;
  }
  if (command == "predict") return cmd_advisor_predict(argc - 1, argv + 1);
  if (command == "calibrate") return cmd_advisor_calibrate(argc - 1, argv + 1);
  throw UsageError("unknown command '" + command + "' (commands: predict, calibrate)");
}

}  // namespace

int cmd_advisor_predict(int argc, char** argv) { throw UsageError("predict: not built yet"); }

int advisor_main(int argc, char** argv) { return dispatch(argc, argv); }

int scaletrain_advisor_main(int argc, char** argv) {
  return run_guarded("scaletrain-advisor", argc, argv, dispatch);
}

}  // namespace scaletrain::cli
