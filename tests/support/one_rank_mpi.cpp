#include "support/one_rank_mpi.hpp"

namespace scaletrain::test {

const comm::Communicator& one_rank_world() {
  static int argc = 1;
  static char name[] = "scaletrain_unit_tests";
  static char* args[] = {name, nullptr};
  static char** argv = args;
  static comm::MpiSession session(&argc, &argv);
  static const comm::Communicator world = comm::Communicator::world();
  return world;
}

}  // namespace scaletrain::test
