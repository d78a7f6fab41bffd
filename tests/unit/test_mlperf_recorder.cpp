// The MLPerf log as an observer of the loop (train/mlperf_log.hpp): the loop's events become the
// rules' keys in the rules' order. Blocks span --eval-every epochs and the last one is cut at
// --epochs; a run cut by --max-steps ends its block where its steps end; run_stop says whether
// the target was reached; an abort after the run's end adds nothing; and a checkpoint taken after
// the run's end records the log as it was before that epoch's end, for a resumed run to redo it.
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "scaletrain/core/json.hpp"
#include "train/mlperf_log.hpp"

using namespace scaletrain;
namespace fs = std::filesystem;

namespace {

struct LogLine {
  std::string key;
  Json value, metadata;
};

std::vector<LogLine> read_log(const std::string& path) {
  std::vector<LogLine> lines;
  std::ifstream in(path);
  const std::string prefix = ":::MLLOG ";
  for (std::string line; std::getline(in, line);) {
    BOOST_REQUIRE(line.rfind(prefix, 0) == 0);
    const Json j = Json::parse(line.substr(prefix.size()));
    lines.push_back({j.at("key").as_string(), j.at("value"), j.at("metadata")});
  }
  return lines;
}

// The keys from run_start on (the set-up's keys are MlperfLog's own, checked by cli.train_mllog).
std::vector<std::string> keys_after_run_start(const std::vector<LogLine>& lines) {
  std::vector<std::string> keys;
  bool started = false;
  for (const LogLine& l : lines) {
    if (started) keys.push_back(l.key);
    started = started || l.key == "run_start";
  }
  return keys;
}

const LogLine& first(const std::vector<LogLine>& lines, const std::string& key) {
  for (const LogLine& l : lines)
    if (l.key == key) return l;
  BOOST_FAIL("no " + key + " in the log");
  return lines.front();
}

struct RunDir {
  RunDir() : path(fs::temp_directory_path() / ("st-mlperf-recorder-" + std::to_string(::getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~RunDir() { fs::remove_all(path); }
  std::string log() const { return (path / "mllog.txt").string(); }
  fs::path path;
};

// One epoch of `steps` steps of `batch` samples through the observer, evaluated when `evaluate`.
void run_epoch(train::MlperfRecorder& r, train::RunPosition& p, int64_t steps, int64_t batch, bool evaluate, bool last,
               double quality) {
  r.on_epoch_start(p);
  p.step_in_epoch = steps;
  p.global_step += steps;
  p.samples_seen += steps * batch;
  r.on_epoch_end(p);
  train::Evaluation e;
  e.quality = quality;
  if (evaluate) {
    r.on_evaluation_start(p);
    r.on_evaluation_end(p, e);
  }
  const train::EpochRecord record{p, last, 0.5, evaluate ? &e : nullptr, "", 1.0, -1.0, 0.0};
  r.on_epoch_record(record);
  if (p.step_in_epoch == steps) {
    ++p.epoch;
    p.step_in_epoch = 0;
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(mlperf_recorder)

BOOST_AUTO_TEST_CASE(blocks_span_eval_every_and_the_last_is_cut_at_the_epochs) {
  const RunDir dir;
  train::TrainConfig config;
  config.output_dir = dir.path.string();
  config.epochs = 3;
  config.eval_every = 2;
  config.target_accuracy = 0.9;
  train::MlperfRecorder recorder(config, /*rank=*/0, /*resumed=*/false);
  recorder.start(train::MlperfRunFacts{}, -1);
  train::RunPosition p;
  run_epoch(recorder, p, 4, 32, /*evaluate=*/false, false, 0.0);
  run_epoch(recorder, p, 4, 32, /*evaluate=*/true, false, 0.5);
  run_epoch(recorder, p, 4, 32, /*evaluate=*/true, /*last=*/true, 0.95);
  recorder.on_run_end(train::RunOutcome{p, /*target_reached=*/true});
  recorder.on_run_aborted(p, "a failure after the run's end");  // adds nothing

  const std::vector<LogLine> lines = read_log(dir.log());
  const std::vector<std::string> expected = {
      "block_start", "epoch_start",   "epoch_stop",    "epoch_start", "epoch_stop",  "eval_start",
      "eval_stop",   "eval_accuracy", "block_stop",    "block_start", "epoch_start", "epoch_stop",
      "eval_start",  "eval_stop",     "eval_accuracy", "block_stop",  "run_stop"};
  const std::vector<std::string> keys = keys_after_run_start(lines);
  BOOST_TEST(keys == expected, boost::test_tools::per_element());
  const LogLine& block = first(lines, "block_start");
  BOOST_TEST(block.metadata.at("first_epoch_num").as_int() == 1);
  BOOST_TEST(block.metadata.at("epoch_count").as_int() == 2);
  BOOST_TEST(lines.back().metadata.at("status").as_string() == "success");
  BOOST_TEST(lines.back().metadata.at("epoch_num").as_int() == 3);
  // The second block: epoch 3 alone (cut at --epochs), opened and closed as epoch 3's.
  int second = 0;
  for (const LogLine& l : lines)
    if (l.key == "block_start" && ++second == 2) {
      BOOST_TEST(l.metadata.at("first_epoch_num").as_int() == 3);
      BOOST_TEST(l.metadata.at("epoch_count").as_int() == 1);
    }
}

BOOST_AUTO_TEST_CASE(a_run_short_of_its_target_is_aborted_and_resumes_before_its_end) {
  const RunDir dir;
  train::TrainConfig config;
  config.output_dir = dir.path.string();
  config.epochs = 4;
  config.eval_every = 0;  // one block of all epochs, cut where the steps end
  config.target_accuracy = 0.9;
  train::MlperfRecorder recorder(config, /*rank=*/0, /*resumed=*/false);
  recorder.start(train::MlperfRunFacts{}, -1);
  train::RunPosition p;
  run_epoch(recorder, p, 4, 32, false, false, 0.0);
  const int64_t before_its_end = static_cast<int64_t>(fs::file_size(dir.log()));
  // --max-steps 6: the run's steps end in the second epoch, which is evaluated and ends the block.
  recorder.on_epoch_start(p);
  p.step_in_epoch = 2;
  p.global_step = 6;
  p.samples_seen += 64;
  recorder.on_epoch_end(p);
  train::Evaluation e;
  e.quality = 0.5;
  recorder.on_evaluation_start(p);
  recorder.on_evaluation_end(p, e);
  recorder.on_epoch_record(train::EpochRecord{p, /*last=*/true, 0.5, &e, "", 1.0, -1.0, 0.9});
  BOOST_TEST(recorder.bytes_to_resume_from() == static_cast<int64_t>(fs::file_size(dir.log())));
  recorder.on_run_end(train::RunOutcome{p, /*target_reached=*/false});
  // The run's last checkpoint: a resumed run with more steps redoes the second epoch's end.
  BOOST_TEST(recorder.bytes_to_resume_from() > before_its_end);
  const std::vector<LogLine> lines = read_log(dir.log());
  const std::vector<std::string> keys = keys_after_run_start(lines);
  BOOST_TEST(keys.back() == "run_stop");
  BOOST_TEST(keys.at(keys.size() - 2) == "block_stop");
  BOOST_TEST(lines.back().metadata.at("status").as_string() == "aborted");
  BOOST_TEST(lines.back().metadata.at("epoch_num").as_int() == 2);
  const std::string kept = [&] {
    std::ifstream in(dir.log());
    std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return all.substr(0, static_cast<std::size_t>(recorder.bytes_to_resume_from()));
  }();
  BOOST_TEST(kept.find("\"epoch_stop\"") != std::string::npos);              // the first epoch's
  BOOST_TEST(kept.rfind("\"epoch_start\"") > kept.rfind("\"epoch_stop\""));  // the second's start, not its end
}

BOOST_AUTO_TEST_CASE(ranks_other_than_0_write_nothing) {
  const RunDir dir;
  train::TrainConfig config;
  config.output_dir = dir.path.string();
  config.epochs = 1;
  train::MlperfRecorder recorder(config, /*rank=*/1, /*resumed=*/false);
  recorder.start(train::MlperfRunFacts{}, -1);
  train::RunPosition p;
  run_epoch(recorder, p, 2, 8, true, true, 0.5);
  recorder.on_run_end(train::RunOutcome{p, false});
  recorder.on_run_aborted(p, "why");
  BOOST_TEST(!fs::exists(dir.log()));
}

BOOST_AUTO_TEST_SUITE_END()
