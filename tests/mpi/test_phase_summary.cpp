// Phase timers and their cross-rank summary on 1, 2 and 4 ranks. Each rank records phase times
// that depend on its rank, as binary fractions, so min / mean / max are exact and the slowest
// rank is known; plus the scoped timer and the atomic JSON writer.
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "scaletrain/comm/communicator.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/report/phase_timer.hpp"
#include "scaletrain/report/summary.hpp"

using scaletrain::comm::Communicator;
using namespace scaletrain::report;

namespace {
void check_stats(const RankStats& s, double min, double mean, double max, int slowest, const char* what) {
  BOOST_TEST(s.min == min, what << ": min");
  BOOST_TEST(s.mean == mean, what << ": mean");
  BOOST_TEST(s.max == max, what << ": max");
  BOOST_TEST(s.slowest_rank == slowest, what << ": slowest rank");
}
}  // namespace

BOOST_AUTO_TEST_SUITE(phase_summary)

BOOST_AUTO_TEST_CASE(phase_names_and_accumulation) {
  BOOST_TEST(std::string(phase_name(Phase::data_wait)) == "data_wait");
  BOOST_TEST(std::string(phase_name(Phase::forward)) == "forward");
  BOOST_TEST(std::string(phase_name(Phase::backward)) == "backward");
  BOOST_TEST(std::string(phase_name(Phase::allreduce)) == "allreduce");
  BOOST_TEST(std::string(phase_name(Phase::optimizer)) == "optimizer");
  BOOST_TEST(std::string(phase_name(Phase::evaluation)) == "evaluation");
  PhaseTimers t;
  t.add(Phase::forward, 0.25);
  t.add(Phase::forward, 0.5);
  BOOST_TEST(t.total(Phase::forward) == 0.75);
  BOOST_TEST(t.count(Phase::forward) == 2);
  BOOST_TEST(t.total(Phase::backward) == 0.0);
  BOOST_TEST(t.count(Phase::backward) == 0);
  t.reset();
  BOOST_TEST(t.total(Phase::forward) == 0.0);
}

BOOST_AUTO_TEST_CASE(scoped_phase_measures_wall_time) {
  PhaseTimers t;
  {
    ScopedPhase s(t, Phase::optimizer);
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
  }
  BOOST_TEST(t.count(Phase::optimizer) == 1);
  BOOST_TEST(t.total(Phase::optimizer) >= 0.029);
  BOOST_TEST(t.total(Phase::optimizer) < 5.0);
  // Recorded even when the scope ends with an exception.
  try {
    ScopedPhase s(t, Phase::evaluation);
    throw std::runtime_error("x");
  } catch (const std::runtime_error&) {
  }
  BOOST_TEST(t.count(Phase::evaluation) == 1);
}

BOOST_AUTO_TEST_CASE(min_mean_max_slowest_rank) {
  Communicator comm = Communicator::world();
  const int p = comm.size(), r = comm.rank();
  PhaseTimers t;
  t.add(Phase::forward, 0.25 * (r + 1));  // 0.5 (r + 1) in two intervals: slowest is the last rank
  t.add(Phase::forward, 0.25 * (r + 1));
  t.add(Phase::backward, 1.0 * (p - r));  // slowest is rank 0
  t.add(Phase::allreduce, 0.75);          // a tie: the lowest rank is named
  t.add(Phase::data_wait, r == 1 ? 2.0 : 0.125);

  std::vector<RankStats> s = phase_stats(comm, t);
  BOOST_REQUIRE(s.size() == static_cast<std::size_t>(kNumPhases));
  check_stats(s[static_cast<int>(Phase::forward)], 0.5, 0.25 * (p + 1), 0.5 * p, p - 1, "forward");
  check_stats(s[static_cast<int>(Phase::backward)], 1.0, 0.5 * (p + 1), p, 0, "backward");
  check_stats(s[static_cast<int>(Phase::allreduce)], 0.75, 0.75, 0.75, 0, "allreduce");
  check_stats(s[static_cast<int>(Phase::optimizer)], 0.0, 0.0, 0.0, 0, "optimizer");
  if (p == 1)
    check_stats(s[static_cast<int>(Phase::data_wait)], 0.125, 0.125, 0.125, 0, "data_wait");
  else
    check_stats(s[static_cast<int>(Phase::data_wait)], 0.125, (2.0 + 0.125 * (p - 1)) / p, 2.0, 1, "data_wait");

  // The JSON form: every phase name, each with the four documented keys.
  const std::string json = scaletrain::report::phase_summary(comm, t).dump();
  for (Phase ph : all_phases()) BOOST_TEST(json.find('"' + std::string(phase_name(ph)) + "\": {") != std::string::npos);
  BOOST_TEST(json.find("\"allreduce\": {\"min_s\": 0.75, \"mean_s\": 0.75, \"max_s\": 0.75, \"slowest_rank\": 0}") !=
                 std::string::npos,
             json);
  std::ostringstream backward;
  backward << "\"backward\": {\"min_s\": 1, \"mean_s\": " << 0.5 * (p + 1) << ", \"max_s\": " << p
           << ", \"slowest_rank\": 0}";
  BOOST_TEST(json.find(backward.str()) != std::string::npos, json);
}

BOOST_AUTO_TEST_CASE(stats_of_one_value) {
  Communicator comm = Communicator::world();
  const int p = comm.size(), r = comm.rank();
  // r^2 over ranks: min 0, max (p-1)^2 on the last rank, mean (p-1)(2p-1)/6.
  RankStats s = rank_stats(comm, static_cast<double>(r * r));
  check_stats(s, 0.0, (p - 1) * (2.0 * p - 1) / 6.0, (p - 1.0) * (p - 1.0), p - 1, "r^2");
  const std::string json = stats_over_ranks(comm, 3.0).dump();
  BOOST_TEST(json == "{\"min\": 3, \"mean\": 3, \"max\": 3, \"slowest_rank\": 0}");
}

BOOST_AUTO_TEST_CASE(write_json_atomic_replaces_the_file) {
  namespace fs = std::filesystem;
  Communicator comm = Communicator::world();
  const fs::path dir = fs::temp_directory_path() / ("st_phase_summary_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "report.json").string();
  std::ofstream(path) << "old contents";
  scaletrain::Json j = scaletrain::Json::object();
  j.set("world_size", comm.size());
  j.set("hosts", scaletrain::Json::array_of(comm.all_hosts()));
  write_json_atomic(path, j);
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  BOOST_TEST(text == j.dump(2) + "\n");
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir)) entries += e.path().filename() == "report.json" ? 1 : 100;
  BOOST_TEST(entries == 1);  // no temporary file left behind
  // A directory that does not exist: a clear error naming the path.
  const std::string bad = (dir / "missing" / "report.json").string();
  BOOST_CHECK_EXCEPTION(write_json_atomic(bad, j), scaletrain::Error, [&](const scaletrain::Error& e) {
    return std::string(e.what()).find("cannot write " + bad) != std::string::npos;
  });
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_SUITE_END()
