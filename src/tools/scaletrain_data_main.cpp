// scaletrain-data: dataset tools (convert, synthetic, inspect).
#include "scaletrain/cli/commands.hpp"

int main(int argc, char** argv) { return scaletrain::cli::scaletrain_data_main(argc, argv); }
