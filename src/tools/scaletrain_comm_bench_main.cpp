// scaletrain-comm-bench: all-reduce bandwidth per algorithm and message size (nccl-tests style).
#include "scaletrain/cli/commands.hpp"

int main(int argc, char** argv) { return scaletrain::cli::scaletrain_comm_bench_main(argc, argv); }
