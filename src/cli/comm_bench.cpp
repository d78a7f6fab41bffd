#include <cstdio>

#include "scaletrain/cli/commands.hpp"

namespace scaletrain::cli {
int scaletrain_comm_bench_main(int, char**) {
  std::fprintf(stderr, "scaletrain-comm-bench: not built yet\n");
  return 1;
}
}  // namespace scaletrain::cli
