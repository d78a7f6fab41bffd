// Private: the option parsing shared by the binaries' subcommands (scaletrain-data's and
// scaletrain-advisor's): Boost.Program_options, the option ranges of option_ranges.hpp, and usage
// errors naming the subcommand.
#pragma once

#include <boost/program_options.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace scaletrain::cli {

// Parses a subcommand's argv (argv[0] is the command word); usage errors throw UsageError naming
// `command`. --help prints "usage: PROGRAM COMMAND SYNOPSIS" and the options (rank 0) and returns
// false.
bool parse_subcommand(const char* program, const std::string& command, int argc, char** argv,
                      const boost::program_options::options_description& desc,
                      boost::program_options::variables_map& vm, const char* synopsis,
                      const boost::program_options::positional_options_description* positional = nullptr);

// "8,16,32": option `option`'s comma-separated positive integers, each at most `max` and listed
// once; errors name the option, its text and the item, calling an item a `noun` ("batch size").
std::vector<int64_t> parse_count_list(const std::string& option, const std::string& text, const std::string& noun,
                                      int64_t max);

}  // namespace scaletrain::cli
