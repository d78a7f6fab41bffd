#include "scaletrain/cli/commands.hpp"

#include <cstdio>

namespace scaletrain::cli {
int scaletrain_data_main(int, char**) { std::fprintf(stderr, "scaletrain-data: not built yet\n"); return 1; }
}  // namespace scaletrain::cli
