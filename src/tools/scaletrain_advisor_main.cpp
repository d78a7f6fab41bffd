// scaletrain-advisor: predicted scaling of a model on a machine, from a calibration (predict), and
// the short sweep that measures one (calibrate).
#include "scaletrain/cli/commands.hpp"

int main(int argc, char** argv) { return scaletrain::cli::scaletrain_advisor_main(argc, argv); }
