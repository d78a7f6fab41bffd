// scaletrain-advisor's subcommands (src/cli/advisor*.cpp), dispatched by advisor_main.
#pragma once

namespace scaletrain::cli {

// scaletrain-advisor predict: tables and JSON for a calibration on a machine (advisor.cpp).
int cmd_advisor_predict(int argc, char** argv);
// scaletrain-advisor calibrate: the short one-rank sweep that writes a calibration (advisor_calibrate.cpp).
int cmd_advisor_calibrate(int argc, char** argv);

}  // namespace scaletrain::cli
