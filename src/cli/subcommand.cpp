#include "cli/subcommand.hpp"

#include <iostream>

#include "cli/option_ranges.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/core/log.hpp"

namespace po = boost::program_options;

namespace scaletrain::cli {

bool parse_subcommand(const char* program, const std::string& command, int argc, char** argv,
                      const po::options_description& desc, po::variables_map& vm, const char* synopsis,
                      const po::positional_options_description* positional) {
  try {
    po::command_line_parser parser(argc, argv);
    parser.options(desc);
    if (positional) parser.positional(*positional);
    po::store(parser.run(), vm);
  } catch (const po::error& e) {
    throw UsageError(command + ": " + e.what());
  }
  if (vm.count("help")) {
    if (log_rank() == 0) std::cout << "usage: " << program << " " << command << " " << synopsis << "\n\n" << desc << "\n";
    return false;
  }
  check_option_ranges(vm, option_ranges());
  try {
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(command + ": " + e.what());
  }
  return true;
}

}  // namespace scaletrain::cli
