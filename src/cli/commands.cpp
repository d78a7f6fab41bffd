#include "scaletrain/cli/commands.hpp"

#include <cstdio>

namespace scaletrain::cli {
int scaletrain_main(int, char**) { std::fprintf(stderr, "scaletrain: not built yet\n"); return 1; }
}  // namespace scaletrain::cli
