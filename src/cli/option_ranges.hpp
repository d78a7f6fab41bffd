// Ranges of numeric options, checked once where the options are parsed, before any arithmetic
// on them: a value out of range is a usage error naming the option, the value, the allowed range
// and, for a value from a --config file, that file and line.
#pragma once

#include <boost/program_options.hpp>
#include <map>
#include <string>
#include <vector>

namespace scaletrain::cli {

struct OptionRange {
  const char* option;  // long name, without --
  double min, max;
  const char* unit;            // "epochs", "batches", ... ("" for none)
  bool min_exclusive = false;  // (min, max] instead of [min, max]
  bool max_exclusive = false;  // [min, max) instead of [min, max]
};

// Where each option given in a --config file is: its line, by option name.
class ConfigLines {
 public:
  ConfigLines() = default;
  // Reads `path` as Boost's INI reader does (key = value, '#' comments, [section] prefixes).
  explicit ConfigLines(const std::string& path);
  // " (FILE line N)" for an option set in the file and not on the command line; "" otherwise.
  std::string where(const std::string& option) const;
  // "; from FILE: --a line 3, --b line 7" for the options named "--name" in `message` that were
  // set in the file (not on the command line); "" when none was. For the checks that relate
  // options after parsing, so that a bad value from a config file names the file and line.
  std::string where_mentioned(const std::string& message) const;
  // The line of an option in the file (0: not there).
  int line_of(const std::string& option) const;
  // Options given on the command line: those override the file, so where() is "" for them.
  void given_on_command_line(const std::vector<std::string>& options);

 private:
  std::string path_;
  std::map<std::string, int> lines_;
  std::vector<std::string> on_command_line_;
};

// The long options given on a command line ("--epochs 3", "--epochs=3").
std::vector<std::string> command_line_options(int argc, char** argv);

// Throws UsageError for a text value with a control character (a damaged config file), then for
// the first option of `ranges` in `vm` whose value is outside its range.
void check_option_ranges(const boost::program_options::variables_map& vm, const std::vector<OptionRange>& ranges,
                         const ConfigLines& lines = ConfigLines());

// The ranges of the numeric options of every command (scaletrain train, eval, predict, info;
// scaletrain-data): an option has one meaning, and so one range, wherever it appears.
const std::vector<OptionRange>& option_ranges();

}  // namespace scaletrain::cli
