#include "cli/subcommand.hpp"

#include <algorithm>
#include <iostream>
#include <sstream>

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
    if (log_rank() == 0)
      std::cout << "usage: " << program << " " << command << " " << synopsis << "\n\n" << desc << "\n";
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

std::vector<int64_t> parse_count_list(const std::string& option, const std::string& text, const std::string& noun,
                                      int64_t max) {
  const std::string what = option + " '" + text + "'";
  if (text.empty()) throw UsageError(what + " is empty: give comma-separated positive integers");
  std::vector<int64_t> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    long long v = 0;
    std::size_t used = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size())
      throw UsageError(what + ": '" + item + "' is not a " + noun + " (comma-separated positive integers)");
    if (v <= 0 || v > max)
      throw UsageError(what + ": " + noun + " " + item + " is out of range (1 to " + std::to_string(max) + ")");
    if (std::find(out.begin(), out.end(), v) != out.end())
      throw UsageError(what + ": " + noun + " " + item + " is listed twice");
    out.push_back(v);
  }
  if (text.back() == ',') throw UsageError(what + ": ends with a comma (comma-separated positive integers)");
  return out;
}

}  // namespace scaletrain::cli
