#include "scaletrain/comm/agreement.hpp"

#include <string>

#include "scaletrain/core/error.hpp"

namespace scaletrain::comm {

void on_rank0_agreed(const Communicator& comm, const std::function<void()>& work) {
  std::string outcome;  // "" = success, "U" + message = usage error, "E" + message = error
  if (comm.rank() == 0) {
    try {
      work();
    } catch (const UsageError& e) {
      outcome = std::string("U") + e.what();
    } catch (const std::exception& e) {
      outcome = std::string("E") + e.what();  // with rank 0's "[rank 0 on HOST] " in front
    }
  }
  comm.broadcast(outcome, 0);
  if (outcome.empty()) return;
  if (outcome[0] == 'U') throw UsageError(outcome.substr(1));
  // Every rank throws rank 0's message as it is: it names rank 0 and the place it was raised.
  throw AgreedError(outcome.substr(1));
}

}  // namespace scaletrain::comm
