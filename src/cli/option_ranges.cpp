// Ranges of numeric options (option_ranges.hpp).
#include "cli/option_ranges.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>

#include "scaletrain/core/error.hpp"

namespace po = boost::program_options;

namespace scaletrain::cli {
namespace {

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

std::string trim(const std::string& s) {
  const std::size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

// The option's value as a double; false for options that are not numbers.
bool numeric_value(const boost::any& value, double& out) {
  if (const auto* v = boost::any_cast<int>(&value)) return out = *v, true;
  if (const auto* v = boost::any_cast<long>(&value)) return out = static_cast<double>(*v), true;
  if (const auto* v = boost::any_cast<long long>(&value)) return out = static_cast<double>(*v), true;
  if (const auto* v = boost::any_cast<unsigned long>(&value)) return out = static_cast<double>(*v), true;
  if (const auto* v = boost::any_cast<double>(&value)) return out = *v, true;
  return false;
}

std::string describe(const OptionRange& r) {
  std::string s = r.min_exclusive ? "above " + number(r.min) + " and up to " : number(r.min) + " to ";
  s += number(r.max) + (r.max_exclusive ? " (exclusive)" : "");
  if (r.unit[0] != '\0') s += std::string(" ") + r.unit;
  return s;
}

bool in_range(const OptionRange& r, double v) {
  const bool above_min = r.min_exclusive ? v > r.min : v >= r.min;
  const bool below_max = r.max_exclusive ? v < r.max : v <= r.max;
  return above_min && below_max;  // false for NaN
}

}  // namespace

ConfigLines::ConfigLines(const std::string& path) : path_(path) {
  std::ifstream in(path);
  std::string line, section;
  for (int number = 1; std::getline(in, line); ++number) {
    const std::string text = trim(line.substr(0, line.find('#')));
    if (text.empty()) continue;
    if (text.front() == '[' && text.back() == ']') {
      section = trim(text.substr(1, text.size() - 2)) + ".";
      continue;
    }
    const std::size_t eq = text.find('=');
    if (eq != std::string::npos) lines_.emplace(section + trim(text.substr(0, eq)), number);
  }
}

void ConfigLines::given_on_command_line(const std::vector<std::string>& options) { on_command_line_ = options; }

int ConfigLines::line_of(const std::string& option) const {
  const auto it = lines_.find(option);
  return it == lines_.end() ? 0 : it->second;
}

std::string ConfigLines::where(const std::string& option) const {
  if (std::find(on_command_line_.begin(), on_command_line_.end(), option) != on_command_line_.end()) return "";
  const auto it = lines_.find(option);
  return it == lines_.end() ? "" : " (" + path_ + " line " + std::to_string(it->second) + ")";
}

std::string ConfigLines::where_mentioned(const std::string& message) const {
  std::string found;
  std::vector<std::string> seen;
  for (std::size_t at = message.find("--"); at != std::string::npos; at = message.find("--", at + 2)) {
    std::size_t end = at + 2;
    while (end < message.size() && (std::islower(static_cast<unsigned char>(message[end])) ||
                                    std::isdigit(static_cast<unsigned char>(message[end])) || message[end] == '-'))
      ++end;
    const std::string option = message.substr(at + 2, end - at - 2);
    if (option.empty() || std::find(seen.begin(), seen.end(), option) != seen.end()) continue;
    seen.push_back(option);
    if (where(option).empty()) continue;
    found +=
        (found.empty() ? "; from " + path_ + ": --" : ", --") + option + " line " + std::to_string(line_of(option));
  }
  return found;
}

std::vector<std::string> command_line_options(int argc, char** argv) {
  std::vector<std::string> out;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--", 0) == 0 && a.size() > 2) out.push_back(a.substr(2, a.find('=') - 2));
  }
  return out;
}

namespace {

// The first control character of a text value (a damaged config file: a NUL would also cut every
// message that quotes the value), or npos.
std::size_t control_character_at(const std::string& text) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if ((c < 0x20 && c != '\t') || c == 0x7f) return i;
  }
  return std::string::npos;
}

void check_printable(const po::variables_map& vm, const ConfigLines& lines) {
  for (const auto& [name, value] : vm) {
    std::vector<std::string> texts;
    if (const auto* text = boost::any_cast<std::string>(&value.value())) texts.push_back(*text);
    if (const auto* list = boost::any_cast<std::vector<std::string>>(&value.value())) texts = *list;
    for (const std::string& text : texts) {
      const std::size_t at = control_character_at(text);
      if (at == std::string::npos) continue;
      char byte[8];
      std::snprintf(byte, sizeof byte, "0x%02x", static_cast<unsigned char>(text[at]));
      throw UsageError("--" + name + ": the value has a control character (byte " + byte + " at position " +
                       std::to_string(at) + ")" + lines.where(name));
    }
  }
}

}  // namespace

void check_option_ranges(const po::variables_map& vm, const std::vector<OptionRange>& ranges,
                         const ConfigLines& lines) {
  check_printable(vm, lines);
  for (const OptionRange& r : ranges) {
    if (!vm.count(r.option) || vm[r.option].defaulted()) continue;
    double v = 0.0;
    if (!numeric_value(vm[r.option].value(), v)) continue;
    if (!in_range(r, v))
      throw UsageError(std::string("--") + r.option + " " + number(v) + " is out of range: allowed " + describe(r) +
                       lines.where(r.option));
  }
}

const std::vector<OptionRange>& option_ranges() {
  static const std::vector<OptionRange> ranges = {
      {"epochs", 1, 1e5, "epochs"},
      {"max-steps", 0, 1e12, "steps (0 = no limit)"},
      {"batch-size", 1, 1 << 20, "samples"},
      {"accumulate-steps", 1, 65536, "micro-batches"},
      {"batch-tokens", 1, 1 << 24, "tokens"},
      {"warmup-steps", 0, 1e9, "steps"},
      {"base-lr", 0, 1e4, "", true},
      {"warmup-epochs", 0, 1e5, "epochs"},
      {"end-lr", 0, 1e4, ""},
      {"momentum", 0, 1, "", false, true},
      {"weight-decay", 0, 1, ""},
      {"label-smoothing", 0, 1, "", false, true},
      {"lars-trust-coefficient", 0, 1e3, "", true},
      {"lars-epsilon", 0, 1, ""},
      {"threads", 0, 1024, "threads per rank (0 = the node's cores / its ranks)"},
      {"crop-padding", 0, 4096, "pixels"},
      {"prefetch", 1, 64, "batches"},
      {"shuffle-buffer", 1, 1e9, "samples"},
      {"data-threads", 1, 256, "threads"},
      {"eval-every", 0, 1e5, "epochs"},
      {"target-accuracy", 0, 100, "(a fraction: 0.92 for 92% top-1; BLEU 0-100 for translation models)"},
      {"log-every", 0, 1e12, "steps"},
      {"checkpoint-every", 0, 1e5, "epochs"},
      {"checkpoint-every-steps", 0, 1e12, "steps"},
      {"checkpoint-every-minutes", 0, 1e6, "minutes"},
      {"keep-checkpoints", 1, 1e4, "checkpoints"},
      {"stall-warn-s", 0, 1e7, "seconds", true},
      {"stall-abort-s", 0, 1e7, "seconds (0 = never)"},
      {"ranks-per-node", 1, 1e5, "ranks"},
      {"bucket-mb", 0, 1e5, "MiB", true},
      {"min-busbw", 0, 1e12, "GB/s"},
      // scaletrain info, and the dataset tools
      {"num-classes", 1, 1e6, "classes"},
      {"classes", 1, 1e6, "classes"},
      {"prototype-cell", 1, 65536, "pixels"},
      {"samples", 1, 1e10, "samples"},
      {"val-samples", 1, 1e10, "samples"},
      {"shards", 1, 1e6, "shards"},
      {"chunk-samples", 1, 1e7, "samples"},
      {"max-side", 0, 65536, "pixels (0 = keep)"},
      {"dump-batches", 0, 1e6, "batches"},
      // scaletrain-comm-bench
      {"step-factor", 2, 1024, ""},
      {"iters", 1, 1e7, "iterations"},
      {"warmup", 0, 1e7, "iterations"},
      {"p2p-iters", 1, 1e7, "iterations"},
      // scaletrain-advisor
      {"steps", 1, 1e6, "steps"},
      {"warmup-steps", 0, 1e6, "steps"},
      {"input-batches", 1, 1e7, "batches"},
      {"max-nodes", 0, 1e6, "nodes"},
      {"gpus-per-node", 0, 1024, "GPUs"},
      {"budget-nodes", 1, 1e6, "nodes"},
  };
  return ranges;
}

}  // namespace scaletrain::cli
