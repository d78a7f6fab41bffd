// The seeded mutation driver: main() for a fuzz target in GCC builds (plain or sanitized), where
// libFuzzer is not available. Deterministic: mutant i of a run is a function of (seed, i) and
// the corpus, and its recipe (the corpus file and the edits, offsets and bytes) is printed for
// every finding, so any finding is replayed from the recipe on a corpus that make_corpus.sh
// regenerates (tests/fuzz/regressions.txt).
//
// Two processes: the supervisor (this main) starts a worker (the same binary with --worker),
// which runs inputs in process and tells the supervisor over a pipe which mutant it starts
// ("B") and how it ended ("E"). A worker that dies (sanitizer report, signal) or does not finish
// an input within --timeout (killed: a hang) ends that mutant with that outcome, and a new
// worker carries on with the next mutant. Outcomes: ok (accepted), clear_error (the error names
// the file), other_error (an error that does not, or not a scaletrain error), sanitizer, signal,
// hang, and known_limit: a sanitizer report or a hang that the target calls a documented limit
// (fuzz_shard: a report inside libhdf5 on a file whose HDF5 metadata has no checksums, or a hang in
// libhdf5's global heap; its report is kept like a finding's). A hung worker's thread stacks go
// into its report when gdb is installed (without gdb a hang is never a known limit). The summary is one JSON line per
// run (stdout, and appended to --summary FILE); the exit code is 1 when any mutant ended in other_error, sanitizer,
// signal or hang.
//
// Recipe syntax (one mutant): CORPUS_FILE EDIT...; edits apply in order:
//   set@OFF:HEX    overwrite bytes at OFF (clipped at the end of the file)
//   zero@OFF+LEN   zero LEN bytes at OFF (clipped)
//   ins@OFF:HEX    insert bytes before OFF
//   del@OFF+LEN    delete LEN bytes at OFF (clipped)
//   trunc@LEN      cut the file to LEN bytes
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "fuzz/fuzz_target.hpp"

namespace fs = std::filesystem;
using scaletrain::fuzz::Outcome;

namespace {

// ------------------------------------------------------------------------------------------
// Mutation

uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

struct Edit {
  std::string kind;  // set, zero, ins, del, trunc
  uint64_t offset = 0, length = 0;
  std::vector<uint8_t> bytes;
};

std::string hex(const std::vector<uint8_t>& b) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (uint8_t c : b) {
    s += digits[c >> 4];
    s += digits[c & 15];
  }
  return s;
}

std::vector<uint8_t> unhex(const std::string& s) {
  if (s.size() % 2) throw std::runtime_error("odd hex string '" + s + "'");
  std::vector<uint8_t> b;
  for (std::size_t i = 0; i < s.size(); i += 2)
    b.push_back(static_cast<uint8_t>(std::stoul(s.substr(i, 2), nullptr, 16)));
  return b;
}

std::string edit_text(const Edit& e) {
  std::ostringstream os;
  os << e.kind << "@" << e.offset;
  if (e.kind == "set" || e.kind == "ins") os << ":" << hex(e.bytes);
  if (e.kind == "zero" || e.kind == "del") os << "+" << e.length;
  return os.str();
}

Edit parse_edit(const std::string& text) {
  Edit e;
  const auto at = text.find('@');
  if (at == std::string::npos) throw std::runtime_error("bad edit '" + text + "'");
  e.kind = text.substr(0, at);
  const std::string rest = text.substr(at + 1);
  const auto colon = rest.find(':'), plus = rest.find('+');
  e.offset = std::stoull(rest.substr(0, std::min(colon, plus)));
  if (e.kind == "set" || e.kind == "ins") {
    if (colon == std::string::npos) throw std::runtime_error("edit '" + text + "' needs :HEX");
    e.bytes = unhex(rest.substr(colon + 1));
  } else if (e.kind == "zero" || e.kind == "del") {
    if (plus == std::string::npos) throw std::runtime_error("edit '" + text + "' needs +LEN");
    e.length = std::stoull(rest.substr(plus + 1));
  } else if (e.kind != "trunc") {
    throw std::runtime_error("unknown edit '" + text + "'");
  }
  return e;
}

void apply_edit(const Edit& e, std::vector<uint8_t>& b) {
  const uint64_t n = b.size();
  const uint64_t off = std::min<uint64_t>(e.offset, n);
  if (e.kind == "set") {
    for (std::size_t i = 0; i < e.bytes.size() && off + i < n; ++i) b[off + i] = e.bytes[i];
  } else if (e.kind == "zero") {
    std::fill(b.begin() + off, b.begin() + std::min(n, off + e.length), 0);
  } else if (e.kind == "ins") {
    b.insert(b.begin() + off, e.bytes.begin(), e.bytes.end());
  } else if (e.kind == "del") {
    b.erase(b.begin() + off, b.begin() + std::min(n, off + e.length));
  } else if (e.kind == "trunc") {
    b.resize(off);
  }
}

struct Seed {
  std::string name;  // file name in the corpus directory
  std::vector<uint8_t> bytes;
  bool text = false;
};

struct Mutant {
  std::size_t seed = 0;  // index into the corpus
  std::vector<Edit> edits;
  std::string recipe(const std::vector<Seed>& corpus) const {
    std::string r = corpus[seed].name;
    for (const auto& e : edits) r += " " + edit_text(e);
    return r;
  }
};

// Tokens of a text seed: runs of characters that are not separators, with their offsets.
std::vector<std::pair<std::size_t, std::size_t>> tokens(const std::vector<uint8_t>& b) {
  std::vector<std::pair<std::size_t, std::size_t>> t;
  std::size_t i = 0;
  auto sep = [](uint8_t c) {
    return c == ' ' || c == '\n' || c == '=' || c == ',' || c == '\t' || c == '[' || c == ']';
  };
  while (i < b.size()) {
    while (i < b.size() && sep(b[i])) ++i;
    const std::size_t start = i;
    while (i < b.size() && !sep(b[i])) ++i;
    if (i > start) t.emplace_back(start, i - start);
  }
  return t;
}

const uint64_t kInteresting[] = {0,
                                 1,
                                 2,
                                 0x7f,
                                 0x80,
                                 0xff,
                                 0x100,
                                 0x7fff,
                                 0x8000,
                                 0xffff,
                                 0x10000,
                                 0x7fffffff,
                                 0x80000000,
                                 0xffffffff,
                                 0x100000000ull,
                                 0x7fffffffffffffffull,
                                 0x8000000000000000ull,
                                 0xffffffffffffffffull};
const char* const kTextTokens[] = {
    "0",     "-1",    "1e308", "-1e308", "nan", "inf",         "4294967296", "9223372036854775808",
    "",      "=",     "[",     "]",      "#",   "\"",          "resnet50",   "resnet20",
    "true",  "false", "\n",    "1,1",    "0,0", "65536,65536", "-0",         "0x10",
    "1e-320"};

// Mutant `index` of a run seeded with `seed`: one to three edits on one corpus file.
Mutant make_mutant(const std::vector<Seed>& corpus, uint64_t seed, uint64_t index) {
  uint64_t s = seed * 0x100000001B3ull ^ (index + 1) * 0x9E3779B97F4A7C15ull;
  auto below = [&](uint64_t n) { return n == 0 ? 0 : splitmix(s) % n; };
  Mutant m;
  m.seed = below(corpus.size());
  std::vector<uint8_t> b = corpus[m.seed].bytes;
  const uint64_t count = 1 + (below(4) == 0 ? 1 + below(2) : 0);
  for (uint64_t k = 0; k < count; ++k) {
    const uint64_t n = b.size();
    Edit e;
    const uint64_t kind = below(corpus[m.seed].text ? 10 : 8);
    if (kind == 0 && n) {  // bit flip
      e.kind = "set";
      e.offset = below(n);
      e.bytes = {static_cast<uint8_t>(b[e.offset] ^ (1u << below(8)))};
    } else if (kind == 1 && n) {  // an interesting value, 1/2/4/8 bytes, either byte order
      e.kind = "set";
      const int width = 1 << below(4);
      e.offset = below(n);
      const uint64_t v = kInteresting[below(std::size(kInteresting))];
      const bool big = below(2);
      for (int i = 0; i < width; ++i) e.bytes.push_back(static_cast<uint8_t>(v >> (8 * (big ? width - 1 - i : i))));
    } else if (kind == 2 && n) {  // 8 random bytes
      e.kind = "set";
      e.offset = below(n);
      for (int i = 0; i < 8; ++i) e.bytes.push_back(static_cast<uint8_t>(splitmix(s)));
    } else if (kind == 3 && n) {  // a zeroed range of up to 300 bytes
      e.kind = "zero";
      e.offset = below(n);
      e.length = 1 + below(300);
    } else if (kind == 4 && n) {  // truncation
      e.kind = "trunc";
      e.offset = below(n);
    } else if (kind == 5) {  // insertion of 1..16 random bytes
      e.kind = "ins";
      e.offset = below(n + 1);
      const uint64_t len = 1 + below(16);
      for (uint64_t i = 0; i < len; ++i) e.bytes.push_back(static_cast<uint8_t>(splitmix(s)));
    } else if (kind == 6 && n > 16) {  // a block of the file copied elsewhere in it
      e.kind = "set";
      const uint64_t len = 1 + below(std::min<uint64_t>(n / 2, 64));
      const uint64_t from = below(n - len);
      e.offset = below(n - len);
      e.bytes.assign(b.begin() + from, b.begin() + from + len);
    } else if (kind == 7 && n) {  // a byte range deleted
      e.kind = "del";
      e.offset = below(n);
      e.length = 1 + below(64);
    } else if (kind >= 8) {  // text: a token replaced by a token of any text seed or the list
      const auto here = tokens(b);
      if (here.empty()) {
        e.kind = "ins";
        e.offset = below(n + 1);
        const std::string t = kTextTokens[below(std::size(kTextTokens))];
        e.bytes.assign(t.begin(), t.end());
      } else {
        const auto [at, len] = here[below(here.size())];
        std::string t;
        if (kind == 8) {
          t = kTextTokens[below(std::size(kTextTokens))];
        } else {
          const Seed& other = corpus[below(corpus.size())];
          const auto theirs = tokens(other.bytes);
          if (!theirs.empty()) {
            const auto [o, l] = theirs[below(theirs.size())];
            t.assign(other.bytes.begin() + o, other.bytes.begin() + o + l);
          }
        }
        Edit del;
        del.kind = "del";
        del.offset = at;
        del.length = len;
        apply_edit(del, b);
        m.edits.push_back(del);
        e.kind = "ins";
        e.offset = at;
        e.bytes.assign(t.begin(), t.end());
      }
    } else {
      e.kind = "ins";
      e.offset = 0;
      e.bytes = {static_cast<uint8_t>(splitmix(s))};
    }
    apply_edit(e, b);
    m.edits.push_back(e);
  }
  return m;
}

std::vector<uint8_t> materialise(const std::vector<Seed>& corpus, const Mutant& m) {
  std::vector<uint8_t> b = corpus[m.seed].bytes;
  for (const auto& e : m.edits) apply_edit(e, b);
  return b;
}

// ------------------------------------------------------------------------------------------
// Options

struct Options {
  std::string corpus;
  uint64_t seed = 1;
  double seconds = 10;
  uint64_t runs = 0;  // 0: no limit but time
  double timeout = 10;
  std::string summary;  // append the JSON line here too
  std::string replay;   // regressions file: replay this target's recipes instead of mutating
  std::string reports;  // directory for the full stderr of workers that died (default: corpus/../reports)
  bool echo = false;    // every mutant's recipe and outcome to the worker's stderr (reports/worker-stderr.txt)
  bool worker = false;
  uint64_t start = 0;
  int report_fd = -1;
  double deadline = 0;  // worker: seconds since the epoch
};

[[noreturn]] void usage(const std::string& why) {
  std::cerr << scaletrain::fuzz::target_name() << ": " << why << "\nusage: " << scaletrain::fuzz::target_name()
            << " --corpus DIR [--seed N] [--seconds S | --runs N] [--timeout S] [--summary FILE] [--replay FILE]"
               " [--reports DIR] [--echo]\n";
  std::exit(2);
}

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "--corpus")
      o.corpus = value();
    else if (a == "--seed")
      o.seed = std::stoull(value());
    else if (a == "--seconds")
      o.seconds = std::stod(value());
    else if (a == "--runs")
      o.runs = std::stoull(value());
    else if (a == "--timeout")
      o.timeout = std::stod(value());
    else if (a == "--summary")
      o.summary = value();
    else if (a == "--replay")
      o.replay = value();
    else if (a == "--reports")
      o.reports = value();
    else if (a == "--worker")
      o.worker = true;
    else if (a == "--echo")
      o.echo = true;
    else if (a == "--start")
      o.start = std::stoull(value());
    else if (a == "--report-fd")
      o.report_fd = std::stoi(value());
    else if (a == "--deadline")
      o.deadline = std::stod(value());
    else
      usage("unknown argument " + a);
  }
  if (o.corpus.empty()) usage("--corpus is required");
  return o;
}

std::vector<Seed> load_corpus(const std::string& dir) {
  std::vector<Seed> corpus;
  if (!fs::is_directory(dir)) usage("corpus " + dir + " is not a directory (make it with tests/fuzz/make_corpus.sh)");
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    Seed s;
    s.name = entry.path().filename().string();
    std::ifstream in(entry.path(), std::ios::binary);
    s.bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    s.text = entry.path().extension() == ".ini";
    corpus.push_back(std::move(s));
  }
  std::sort(corpus.begin(), corpus.end(), [](const Seed& a, const Seed& b) { return a.name < b.name; });
  if (corpus.empty()) usage("corpus " + dir + " is empty");
  return corpus;
}

// This target's recipes in a regressions file: "TARGET CORPUS_FILE EDIT... # what it did".
std::vector<Mutant> load_replay(const std::string& file, const std::vector<Seed>& corpus) {
  std::vector<Mutant> mutants;
  std::ifstream in(file);
  if (!in) usage("cannot read " + file);
  std::string line;
  while (std::getline(in, line)) {
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    std::string target, name, edit;
    if (!(words >> target >> name) || target != scaletrain::fuzz::target_name()) continue;
    Mutant m;
    auto it = std::find_if(corpus.begin(), corpus.end(), [&](const Seed& s) { return s.name == name; });
    if (it == corpus.end()) usage(file + ": corpus file " + name + " is not in the corpus");
    m.seed = static_cast<std::size_t>(it - corpus.begin());
    while (words >> edit) m.edits.push_back(parse_edit(edit));
    mutants.push_back(std::move(m));
  }
  return mutants;
}

double now_s() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  if (s.size() > 400) s = s.substr(0, 400) + "...";
  return s;
}

const char* outcome_name(Outcome o) {
  switch (o) {
    case Outcome::ok:
      return "ok";
    case Outcome::clear_error:
      return "clear_error";
    case Outcome::other_error:
      return "other_error";
  }
  return "?";
}

// ------------------------------------------------------------------------------------------
// Worker: runs mutants start, start+1, ... in process until the deadline or the run budget.

int worker_main(const Options& o) {
  // gdb, started by the supervisor (not an ancestor), may attach to a hung worker where Yama's
  // ptrace_scope is 1; without permission (scope 2 or 3, no CAP_SYS_PTRACE) a hang has no stacks.
  prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  const std::vector<Seed> corpus = load_corpus(o.corpus);
  const std::vector<Mutant> replay = o.replay.empty() ? std::vector<Mutant>{} : load_replay(o.replay, corpus);
  scaletrain::fuzz::target_init();
  FILE* report = fdopen(o.report_fd, "w");
  for (uint64_t i = o.start;; ++i) {
    if (!o.replay.empty() && i >= replay.size()) break;
    if (o.replay.empty() && ((o.runs && i >= o.runs) || now_s() >= o.deadline)) break;
    const Mutant m = o.replay.empty() ? make_mutant(corpus, o.seed, i) : replay[i];
    const std::vector<uint8_t> bytes = materialise(corpus, m);
    // The recipe goes out before the input runs: if it kills the process, the supervisor knows it.
    std::fprintf(report, "B %llu %s\n", static_cast<unsigned long long>(i), m.recipe(corpus).c_str());
    std::fflush(report);
    const scaletrain::fuzz::Result r = scaletrain::fuzz::run_input(bytes.data(), bytes.size());
    std::fprintf(report, "E %llu %s %s\n", static_cast<unsigned long long>(i), outcome_name(r.outcome),
                 one_line(r.message).c_str());
    std::fflush(report);
    if (o.echo)  // --echo: every mutant's recipe and outcome, for looking at what a target does
      std::fprintf(stderr, "%llu %s: %s %s\n", static_cast<unsigned long long>(i), m.recipe(corpus).c_str(),
                   outcome_name(r.outcome), one_line(r.message).c_str());
  }
  std::fclose(report);
  return 0;
}

// ------------------------------------------------------------------------------------------
// Supervisor

struct Finding {
  std::string outcome, recipe, detail;
};

std::string json_escape(const std::string& s) {
  std::string r;
  for (char c : s) {
    if (c == '"' || c == '\\')
      r += '\\', r += c;
    else if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f)
      r += ' ';
    else
      r += c;
  }
  return r;
}

// The first line of a sanitizer report in a worker's stderr ("ERROR: AddressSanitizer: ...",
// "... runtime error: ..."), or "".
std::string sanitizer_line(const std::string& file) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line))
    if (line.find("ERROR: AddressSanitizer") != std::string::npos ||
        line.find("ERROR: LeakSanitizer") != std::string::npos || line.find("runtime error:") != std::string::npos)
      return line;
  return "";
}

// The target's name for the limit a sanitizer report hit (known_limit in fuzz_target.hpp), or
// nullptr: the input is written to the reports folder for the target to look at.
const char* documented_limit(const Mutant& m, const std::vector<Seed>& corpus, const std::string& reports,
                             const std::string& err_file) {
  const std::vector<uint8_t> bytes = materialise(corpus, m);
  const std::string input = reports + "/last-input.bin";
  std::ofstream(input, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  std::ifstream in(err_file);
  const std::string report((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return scaletrain::fuzz::known_limit(input, report);
}

// A hung worker's threads, where they are stuck, appended to its stderr file (the hang's report)
// when gdb is installed; without it the report has the recipe only.
void append_thread_stacks(pid_t pid, const std::string& err_file) {
  if (std::system("command -v gdb >/dev/null 2>&1") != 0) return;
  const std::string command = "timeout 60 gdb -p " + std::to_string(pid) + " -batch -ex 'thread apply all bt' >>'" +
                              err_file + "' 2>&1 </dev/null";
  if (std::system(command.c_str()) != 0) std::cerr << "could not attach gdb to the hung worker " << pid << "\n";
}

constexpr int kSanitizerExit = 86;  // the workers' ASAN_OPTIONS/UBSAN_OPTIONS exitcode

int supervisor_main(int argc, char** argv, const Options& o) {
  const std::string name = scaletrain::fuzz::target_name();
  const std::vector<Seed> corpus = load_corpus(o.corpus);  // checks it before any worker starts
  const std::string reports =
      o.reports.empty() ? (fs::path(o.corpus).parent_path() / ("reports-" + name)).string() : o.reports;
  fs::create_directories(reports);
  const double begin = now_s(), deadline = begin + o.seconds;
  // Sanitizer reports end the worker with a code of their own; leaks are left to the unit, mpi
  // and cli tests (a worker's leak check at exit would cover thousands of inputs at once). An
  // allocation too large to serve fails as it does without ASan (malloc returns null, new throws
  // std::bad_alloc), so that what the code does about it is what is fuzzed.
  auto add_option = [](const char* var, const std::string& extra) {
    const char* old = std::getenv(var);
    setenv(var, ((old && *old ? std::string(old) + ":" : std::string()) + extra).c_str(), 1);
  };
  add_option("ASAN_OPTIONS", "exitcode=" + std::to_string(kSanitizerExit) +
                                 ":detect_leaks=0:halt_on_error=1:allocator_may_return_null=1");
  add_option("UBSAN_OPTIONS", "exitcode=" + std::to_string(kSanitizerExit) + ":halt_on_error=1:print_stacktrace=1");

  std::map<std::string, uint64_t> counts = {{"ok", 0},     {"clear_error", 0}, {"other_error", 0}, {"sanitizer", 0},
                                            {"signal", 0}, {"hang", 0},        {"known_limit", 0}};
  const std::vector<Mutant> replayed = o.replay.empty() ? std::vector<Mutant>{} : load_replay(o.replay, corpus);
  std::vector<Finding> findings;
  std::map<std::string, uint64_t> other_messages;
  uint64_t next = 0, workers = 0;
  const uint64_t replay_count = replayed.size();
  auto finished = [&] {
    if (!o.replay.empty()) return next >= replay_count;
    return (o.runs && next >= o.runs) || now_s() >= deadline;
  };
  while (!finished()) {
    int fds[2];
    if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
    const std::string err_file = reports + "/worker-stderr.txt";
    const pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      const int err = open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (err >= 0) dup2(err, 2);
      std::vector<std::string> args(argv, argv + argc);
      for (const std::string& extra :
           {std::string("--worker"), std::string("--start"), std::to_string(next), std::string("--report-fd"),
            std::to_string(fds[1]), std::string("--deadline"), std::to_string(deadline)})
        args.push_back(extra);
      std::vector<char*> cargs;
      for (auto& a : args) cargs.push_back(a.data());
      cargs.push_back(nullptr);
      execv("/proc/self/exe", cargs.data());
      _exit(127);
    }
    ++workers;
    close(fds[1]);
    FILE* in = fdopen(fds[0], "r");
    // Unbuffered: poll() below watches the descriptor, so no line may wait in stdio's buffer (a
    // "B" line read in one go with the "E" before it would leave the mutant in flight unseen, and
    // a hang on it would go unnoticed until the deadline).
    setvbuf(in, nullptr, _IONBF, 0);
    std::string current;  // recipe of the mutant in flight
    bool in_flight = false, hung = false;
    double started = now_s();
    std::string line;
    char buf[8192];
    for (;;) {
      // The per-input timeout (and the worker's start-up, which counts against the first input).
      const double left = o.timeout - (now_s() - started);
      pollfd p{fds[0], POLLIN, 0};
      const int ready = left > 0 ? poll(&p, 1, static_cast<int>(left * 1000) + 1) : 0;
      if (ready == 0 && in_flight) {
        hung = true;
        append_thread_stacks(pid, err_file);
        kill(pid, SIGKILL);
        break;
      }
      if (ready == 0) {
        started = now_s();  // nothing in flight (start-up or between inputs): keep waiting
        if (now_s() > deadline + o.timeout * 3) {
          kill(pid, SIGKILL);
          break;
        }
        continue;
      }
      if (!std::fgets(buf, sizeof buf, in)) break;  // the worker ended or died
      line = buf;
      if (!line.empty() && line.back() == '\n') line.pop_back();
      std::istringstream words(line);
      std::string tag;
      uint64_t index = 0;
      words >> tag >> index;
      std::string rest;
      std::getline(words, rest);
      if (!rest.empty() && rest[0] == ' ') rest.erase(0, 1);
      if (tag == "B") {
        current = rest;
        in_flight = true;
        next = index;
        started = now_s();
      } else if (tag == "E") {
        const std::string outcome = rest.substr(0, rest.find(' '));
        const std::string message = rest.find(' ') == std::string::npos ? "" : rest.substr(rest.find(' ') + 1);
        ++counts[outcome];
        if (outcome == "other_error") {
          if (other_messages[message]++ == 0) findings.push_back({outcome, current, message});
        }
        in_flight = false;
        next = index + 1;
        started = now_s();
      }
    }
    std::fclose(in);
    int status = 0;
    waitpid(pid, &status, 0);
    if (!in_flight) {
      if (WIFEXITED(status) && WEXITSTATUS(status) == 0) continue;
      if (!o.replay.empty() || !finished()) {
        // Died between inputs (at start-up or exit): a failure of the target itself.
        std::cerr << name << ": worker ended with status " << status << " outside any input; see " << err_file << "\n";
        return 1;
      }
      continue;
    }
    // The mutant in flight ended the worker.
    std::string outcome, detail;
    if (hung) {
      outcome = "hang";
      detail = "no result after " + std::to_string(o.timeout) + " s";
      const Mutant m = o.replay.empty() ? make_mutant(corpus, o.seed, next) : replayed[next];
      if (const char* limit = documented_limit(m, corpus, reports, err_file)) {
        outcome = "known_limit";
        detail = std::string(limit) + ": " + detail;
      }
    } else if (WIFEXITED(status) && WEXITSTATUS(status) == kSanitizerExit) {
      outcome = "sanitizer";
      detail = sanitizer_line(err_file);
      const Mutant m = o.replay.empty() ? make_mutant(corpus, o.seed, next) : replayed[next];
      if (const char* limit = documented_limit(m, corpus, reports, err_file)) {
        outcome = "known_limit";
        detail = std::string(limit) + ": " + detail;
      }
    } else if (WIFSIGNALED(status)) {
      outcome = "signal";
      detail = std::string("signal ") + strsignal(WTERMSIG(status));
    } else {
      outcome = "signal";
      detail = "exit status " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }
    ++counts[outcome];
    const std::string saved = reports + "/" + outcome + "-" + std::to_string(next) + ".txt";
    std::error_code ec;
    fs::copy_file(err_file, saved, fs::copy_options::overwrite_existing, ec);
    findings.push_back({outcome, current, one_line(detail)});
    std::cerr << name << ": " << outcome << " on mutant " << next << ": " << one_line(detail) << " (stderr in " << saved
              << ")\n  recipe: " << name << " " << current << "\n";
    ++next;
  }

  const double elapsed = now_s() - begin;
  uint64_t total = 0;
  for (const auto& [k, v] : counts) total += v;
  std::ostringstream js;
  js << "{\"target\": \"" << name << "\", \"mode\": \"" << (o.replay.empty() ? "mutate" : "replay")
     << "\", \"seed\": " << o.seed << ", \"seconds\": " << elapsed << ", \"mutants\": " << total;
  for (const auto& [k, v] : counts) js << ", \"" << k << "\": " << v;
  // Findings first, known limits after them: the list is capped, the counts are not.
  std::stable_partition(findings.begin(), findings.end(), [](const Finding& f) { return f.outcome != "known_limit"; });
  js << ", \"runs_per_s\": " << (elapsed > 0 ? total / elapsed : 0) << ", \"workers\": " << workers
     << ", \"findings\": [";
  for (std::size_t i = 0; i < findings.size() && i < 50; ++i)
    js << (i ? ", " : "") << "{\"outcome\": \"" << findings[i].outcome << "\", \"recipe\": \""
       << json_escape(name + " " + findings[i].recipe) << "\", \"detail\": \"" << json_escape(findings[i].detail)
       << "\"}";
  js << "]}";
  std::cout << js.str() << std::endl;
  if (!o.summary.empty()) {
    std::ofstream out(o.summary, std::ios::app);
    out << js.str() << "\n";
  }
  for (const auto& f : findings)
    if (f.outcome == "other_error")
      std::cerr << name << ": other_error (the error does not name the file): " << f.detail << "\n  recipe: " << name
                << " " << f.recipe << "\n";
  const bool bad = counts["other_error"] || counts["sanitizer"] || counts["signal"] || counts["hang"];
  return bad ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse_options(argc, argv);
    if (o.worker) return worker_main(o);
    signal(SIGPIPE, SIG_IGN);
    return supervisor_main(argc, argv, o);
  } catch (const std::exception& e) {
    std::cerr << scaletrain::fuzz::target_name() << ": " << e.what() << "\n";
    return 2;
  }
}
