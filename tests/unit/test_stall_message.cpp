// The stall watchdog's message (comm::describe_stall): silent ranks come first and are named with
// their host and where they were last heard, ranks still working are named with their activity
// and how long it has lasted, ranks waiting in a collective are listed apart, and long lists are
// cut with a count.
#include <boost/test/unit_test.hpp>
#include <string>
#include <vector>

#include "scaletrain/comm/stall_watchdog.hpp"

using scaletrain::comm::describe_stall;
using scaletrain::comm::RankProgress;

namespace {
RankProgress rank(int r, const std::string& activity, bool waiting, double stuck, bool silent = false) {
  RankProgress p;
  p.rank = r;
  p.host = "node" + std::to_string(r / 8 + 1);
  p.activity = activity;
  p.step = 124;
  p.waiting = waiting;
  p.stuck_s = stuck;
  p.silent = silent;
  p.silent_s = silent ? stuck : 0.0;
  return p;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(stall_message)

BOOST_AUTO_TEST_CASE(names_silent_and_working_ranks_before_the_waiting_ones) {
  const std::vector<RankProgress> ranks = {rank(0, "allreduce", true, 61.2), rank(3, "data_wait", false, 61.4),
                                           rank(9, "backward", false, 63.0, true)};
  const std::string m = describe_stall(ranks, 60, "--stall-warn-s");
  BOOST_TEST(m ==
             "no progress for 63 s (--stall-warn-s 60); not arrived: rank 9 on node2 (silent for 63 s, last heard in "
             "backward of step 124); rank 3 on node1 (data_wait of step 124 for 61 s); waiting in a collective: rank 0 "
             "on node1 (allreduce of step 124)");
}

BOOST_AUTO_TEST_CASE(never_heard_and_long_lists) {
  std::vector<RankProgress> ranks;
  for (int r = 0; r < 10; ++r) ranks.push_back(rank(r, "allreduce", true, 5.0));
  RankProgress lost = rank(10, "start-up", false, 7.0, true);
  lost.heard = false;
  ranks.push_back(lost);
  const std::string m = describe_stall(ranks, 5, "--stall-abort-s");
  BOOST_TEST(m.find("not arrived: rank 10 on node2 (silent for 7 s, never heard since the watchdog started)") !=
                 std::string::npos,
             m);
  BOOST_TEST(m.find("waiting in a collective: rank 0 on node1 (allreduce of step 124); rank 1") != std::string::npos,
             m);
  BOOST_TEST(m.find("; and 6 more") != std::string::npos, m);
  // Every rank waiting: a collective entered with a mismatch, or one that never completes.
  const std::string all = describe_stall(std::vector<RankProgress>(ranks.begin(), ranks.begin() + 2), 5, "x");
  BOOST_TEST(all.find("not arrived: none (every rank waits in a collective)") != std::string::npos, all);
}

BOOST_AUTO_TEST_SUITE_END()
