// scaletrain: the trainer (train, eval, predict, info).
#include "scaletrain/cli/commands.hpp"

int main(int argc, char** argv) { return scaletrain::cli::scaletrain_main(argc, argv); }
