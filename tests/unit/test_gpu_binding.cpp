// Which GPU each rank takes (assign_gpus) in the layouts that matter on a DGX-1 and elsewhere, as
// plain data: every rank's host and the GPUs it sees (UUID, bus id, in its CUDA ordinal order), as
// Slurm's binding or CUDA_VISIBLE_DEVICES leave them. And the binding table's pieces: CPU lists,
// NUMA nodes from a sysfs tree made here, the warnings.
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <fstream>
#include <set>

#include "scaletrain/core/error.hpp"
#include "scaletrain/train/gpu_binding.hpp"

namespace st = scaletrain;
using st::train::assign_gpus;
using st::train::RankGpuView;

namespace {

// A DGX-1's eight V100s: GPU i on bus 0000:0{6+i}:00.0 (sockets: 0-3 on the first, 4-7 the second).
std::string uuid(int gpu) { return "GPU-0000000" + std::to_string(gpu) + "-aaaa-bbbb-cccc-dddddddddddd"; }
std::string bus(int gpu) { return "0000:" + std::string(gpu + 6 < 10 ? "0" : "") + std::to_string(gpu + 6) + ":00.0"; }

// A rank on `host` that sees `gpus`, in that ordinal order.
RankGpuView sees(const std::string& host, const std::vector<int>& gpus) {
  RankGpuView v;
  v.host = host;
  for (int g : gpus) {
    v.uuids.push_back(uuid(g));
    v.bus_ids.push_back(bus(g));
  }
  return v;
}

// The physical GPU (its number in uuid()) each rank was given.
std::vector<int> gpus_taken(const std::vector<RankGpuView>& ranks) {
  const auto a = assign_gpus(ranks);
  std::vector<int> out;
  for (std::size_t r = 0; r < a.size(); ++r) {
    BOOST_REQUIRE(a[r].ordinal >= 0);
    BOOST_REQUIRE_EQUAL(a[r].uuid, ranks[r].uuids.at(static_cast<std::size_t>(a[r].ordinal)));
    out.push_back(std::stoi(a[r].uuid.substr(4, 8)));
  }
  return out;
}

bool all_distinct(const std::vector<int>& v) { return std::set<int>(v.begin(), v.end()).size() == v.size(); }

}  // namespace

BOOST_AUTO_TEST_SUITE(gpu_binding)

BOOST_AUTO_TEST_CASE(dgx1_gpu_bind_closest_with_slurms_default_block_cyclic_distribution) {
  // 8 tasks, cyclic over the sockets: even tasks on socket 0 see GPUs 0-3, odd ones 4-7, each set
  // as ordinals 0-3. Local rank modulo 4 gave ranks 0 and 4 GPU 0 and left GPUs 1 and 3 idle.
  std::vector<RankGpuView> ranks;
  for (int r = 0; r < 8; ++r)
    ranks.push_back(sees("dgx01", r % 2 == 0 ? std::vector<int>{0, 1, 2, 3} : std::vector<int>{4, 5, 6, 7}));
  const std::vector<int> got = gpus_taken(ranks);
  BOOST_TEST(got == (std::vector<int>{0, 4, 1, 5, 2, 6, 3, 7}), boost::test_tools::per_element());
  BOOST_TEST(st::train::sharing_warnings(ranks, assign_gpus(ranks)).empty());
}

BOOST_AUTO_TEST_CASE(dgx1_gpu_bind_closest_with_block_block_distribution) {
  std::vector<RankGpuView> ranks;
  for (int r = 0; r < 8; ++r)
    ranks.push_back(sees("dgx01", r < 4 ? std::vector<int>{0, 1, 2, 3} : std::vector<int>{4, 5, 6, 7}));
  BOOST_TEST(gpus_taken(ranks) == (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(gpus_per_task_one_or_gpu_bind_single_each_rank_sees_one) {
  std::vector<RankGpuView> ranks;
  for (int r = 0; r < 8; ++r) ranks.push_back(sees("dgx01", {(r * 3) % 8}));  // whatever one Slurm gave
  const std::vector<int> got = gpus_taken(ranks);
  for (int r = 0; r < 8; ++r) BOOST_TEST(got[r] == (r * 3) % 8);
  BOOST_TEST(assign_gpus(ranks)[3].ordinal == 0);  // its only ordinal
}

BOOST_AUTO_TEST_CASE(cuda_visible_devices_by_hand_in_another_order_are_shared_out_by_bus_id) {
  // CUDA_VISIBLE_DEVICES=3,2,1,0 for all four ranks: ordinal 0 is GPU 3. Rank 0 takes the lowest
  // bus id, GPU 0, at ordinal 3; the ranks still get one GPU each.
  std::vector<RankGpuView> ranks(4, sees("n1", {3, 2, 1, 0}));
  BOOST_TEST(gpus_taken(ranks) == (std::vector<int>{0, 1, 2, 3}), boost::test_tools::per_element());
  BOOST_TEST(assign_gpus(ranks)[0].ordinal == 3);
}

BOOST_AUTO_TEST_CASE(mig_instances_of_one_gpu_are_told_apart_by_uuid) {
  // Two MIG instances of one A100: one bus id, two UUIDs. Bus ids alone would put both ranks on one.
  RankGpuView v;
  v.host = "a100";
  v.uuids = {"MIG-11111111-2222-3333-4444-555555555555", "MIG-66666666-7777-8888-9999-000000000000"};
  v.bus_ids = {"0000:07:00.0", "0000:07:00.0"};
  const auto a = assign_gpus({v, v});
  BOOST_TEST(a[0].uuid != a[1].uuid);
  BOOST_TEST(a[0].sharing.size() == 1u);
}

BOOST_AUTO_TEST_CASE(more_ranks_than_gpus_share_evenly_and_are_named) {
  std::vector<RankGpuView> ranks(5, sees("n1", {0, 1}));
  const std::vector<int> got = gpus_taken(ranks);
  BOOST_TEST(got == (std::vector<int>{0, 1, 0, 1, 0}), boost::test_tools::per_element());
  const auto a = assign_gpus(ranks);
  BOOST_TEST(a[2].sharing == (std::vector<int>{0, 2, 4}), boost::test_tools::per_element());
  const auto w = st::train::sharing_warnings(ranks, a);
  BOOST_REQUIRE(w.size() == 2u);
  BOOST_TEST(w[0].rfind("warning: ranks 0, 2 and 4 on host n1 share a GPU, 0000:06:00.0 (" + uuid(0) + ")", 0) == 0u,
             w[0]);
  BOOST_TEST(w[1].rfind("warning: ranks 1 and 3 on host n1 share a GPU, 0000:07:00.0", 0) == 0u, w[1]);
}

BOOST_AUTO_TEST_CASE(one_gpu_shared_on_purpose_by_two_ranks) {
  const std::vector<RankGpuView> ranks(2, sees("vm", {0}));
  BOOST_TEST(gpus_taken(ranks) == (std::vector<int>{0, 0}), boost::test_tools::per_element());
  BOOST_TEST(st::train::sharing_warnings(ranks, assign_gpus(ranks)).size() == 1u);
}

BOOST_AUTO_TEST_CASE(overlapping_sets_share_only_when_every_gpu_a_rank_sees_is_taken) {
  // Rank 0 sees {0, 1}, rank 1 {1, 2}, rank 2 {0, 1}, rank 3 {2}: 0 -> 0, 1 -> 1 (0 is not its),
  // 2 -> 0 or 1 both taken once: the lower bus id, 0; 3 -> 2.
  const std::vector<RankGpuView> ranks = {sees("n", {0, 1}), sees("n", {1, 2}), sees("n", {0, 1}), sees("n", {2})};
  BOOST_TEST(gpus_taken(ranks) == (std::vector<int>{0, 1, 0, 2}), boost::test_tools::per_element());
  // Rank 2 seeing {2, 3}: both untaken, the lower bus id; rank 3 seeing {0, 1}, both taken: GPU 0.
  const std::vector<RankGpuView> other = {sees("n", {0, 1}), sees("n", {1, 2}), sees("n", {2, 3}), sees("n", {0, 1})};
  BOOST_TEST(gpus_taken(other) == (std::vector<int>{0, 1, 2, 0}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(ranks_on_other_hosts_never_count_against_each_other) {
  std::vector<RankGpuView> ranks;
  for (int node = 0; node < 3; ++node)
    for (int r = 0; r < 8; ++r) ranks.push_back(sees("dgx0" + std::to_string(node), {0, 1, 2, 3, 4, 5, 6, 7}));
  const std::vector<int> got = gpus_taken(ranks);
  for (int node = 0; node < 3; ++node) {
    const std::vector<int> mine(got.begin() + node * 8, got.begin() + node * 8 + 8);
    BOOST_TEST(all_distinct(mine));
  }
  BOOST_TEST(st::train::sharing_warnings(ranks, assign_gpus(ranks)).empty());
}

BOOST_AUTO_TEST_CASE(views_and_rows_cross_the_exchange_unchanged) {
  const RankGpuView v = sees("dgx01", {4, 5});
  const RankGpuView back = st::train::decode_view(st::train::encode_view(v));
  BOOST_TEST(back.host == v.host);
  BOOST_TEST(back.uuids == v.uuids, boost::test_tools::per_element());
  BOOST_TEST(back.bus_ids == v.bus_ids, boost::test_tools::per_element());
  BOOST_TEST(st::train::decode_view(st::train::encode_view(RankGpuView{"h", {}, {}})).uuids.empty());
  st::train::BindingRow row{3, "dgx01", bus(5), uuid(5), 1, {25, 26, 27}, {1}};
  const auto r = st::train::decode_row(st::train::encode_row(row));
  BOOST_TEST(r.rank == 3);
  BOOST_TEST(r.gpu_numa_node == 1);
  BOOST_TEST(r.cpus == row.cpus, boost::test_tools::per_element());
  BOOST_TEST(r.cpu_numa_nodes == row.cpu_numa_nodes, boost::test_tools::per_element());
  BOOST_CHECK_THROW(st::train::decode_view("no tabs"), st::Error);
}

BOOST_AUTO_TEST_CASE(cpu_lists_as_sysfs_and_taskset_write_them) {
  BOOST_TEST(st::train::cpu_list({4, 0, 1, 2, 3, 20, 21, 22, 23, 24, 40}) == "0-4,20-24,40");
  BOOST_TEST(st::train::cpu_list({}) == "");
  BOOST_TEST(st::train::parse_cpu_list("0-3,8,10-11\n") == (std::vector<int>{0, 1, 2, 3, 8, 10, 11}),
             boost::test_tools::per_element());
  BOOST_TEST(st::train::parse_cpu_list("").empty());
  BOOST_CHECK_THROW(st::train::parse_cpu_list("0-x"), st::Error);
  BOOST_CHECK_THROW(st::train::parse_cpu_list("5-3"), st::Error);
  BOOST_TEST(!st::train::affinity_cpus().empty());  // this process runs somewhere
}

BOOST_AUTO_TEST_CASE(numa_nodes_from_a_sysfs_tree) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / ("st_sysfs_" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "devices/system/node/node0");
  fs::create_directories(root / "devices/system/node/node1");
  fs::create_directories(root / "devices/system/node/has_cpu");  // not a node folder
  std::ofstream(root / "devices/system/node/node0/cpulist") << "0-19,40-59\n";
  std::ofstream(root / "devices/system/node/node1/cpulist") << "20-39,60-79\n";
  fs::create_directories(root / "bus/pci/devices/0000:86:00.0");
  std::ofstream(root / "bus/pci/devices/0000:86:00.0/numa_node") << "1\n";
  fs::create_directories(root / "bus/pci/devices/0000:06:00.0");
  std::ofstream(root / "bus/pci/devices/0000:06:00.0/numa_node") << "-1\n";  // a VM's answer
  BOOST_TEST(st::train::pci_numa_node("0000:86:00.0", root.string()) == 1);
  BOOST_TEST(st::train::pci_numa_node("0000:86:00.0", root.string()) == 1);
  BOOST_TEST(st::train::pci_numa_node("0000:06:00.0", root.string()) == -1);
  BOOST_TEST(st::train::pci_numa_node("0000:99:00.0", root.string()) == -1);
  BOOST_TEST(st::train::numa_nodes_of({0, 1, 2}, root.string()) == (std::vector<int>{0}),
             boost::test_tools::per_element());
  BOOST_TEST(st::train::numa_nodes_of({19, 20}, root.string()) == (std::vector<int>{0, 1}),
             boost::test_tools::per_element());
  BOOST_TEST(st::train::numa_nodes_of({0}, (root / "none").string()).empty());
  fs::remove_all(root);
}

// NCCL refuses two ranks of one communicator on one GPU: the members that would share one are
// named before NCCL is asked (issue 27), by host and UUID, and only within the group asked about.
BOOST_AUTO_TEST_CASE(ranks_sharing_a_gpu_within_a_communicator_are_named) {
  using st::train::BindingRow;
  const std::vector<BindingRow> rows = {
      {0, "n1", bus(0), uuid(0), 0, {0}, {0}}, {1, "n1", bus(1), uuid(1), 0, {1}, {0}},
      {2, "n1", bus(1), uuid(1), 0, {2}, {0}},  // rank 1's GPU again
      {3, "n2", bus(0), uuid(0), 0, {0}, {0}},  // GPU 0's UUID, but on another host: another GPU
      {4, "n2", bus(0), uuid(0), 0, {1}, {0}},  // rank 3's GPU again
      {5, "n2", bus(0), uuid(0), 0, {2}, {0}},  // and again
      {6, "n3", bus(2), "", 0, {0}, {0}},       // UUID not known: the bus id tells
      {7, "n3", bus(2), "", 0, {1}, {0}},
  };
  BOOST_TEST(st::train::gpus_shared_within(rows, {0, 1}) == "");
  BOOST_TEST(st::train::gpus_shared_within(rows, {0, 3}) == "");  // one GPU each, on two hosts
  BOOST_TEST(st::train::gpus_shared_within(rows, {0}) == "");
  BOOST_TEST(st::train::gpus_shared_within(rows, {1, 2}) ==
             "ranks 1 and 2 share GPU " + bus(1) + " (" + uuid(1) + ") on host n1");
  BOOST_TEST(st::train::gpus_shared_within(rows, {0, 1, 2, 3, 4, 5, 6, 7}) ==
             "ranks 1 and 2 share GPU " + bus(1) + " (" + uuid(1) + ") on host n1; ranks 3, 4 and 5 share GPU " +
                 bus(0) + " (" + uuid(0) + ") on host n2; ranks 6 and 7 share GPU " + bus(2) + " on host n3");
  BOOST_CHECK_THROW(st::train::gpus_shared_within(rows, {0, 9}), st::Error);
}

BOOST_AUTO_TEST_CASE(the_table_and_a_warning_for_cores_away_from_their_gpu) {
  using st::train::BindingRow;
  const std::vector<BindingRow> rows = {
      {0, "dgx01", bus(0), uuid(0), 0, {0, 1, 2, 3, 4}, {0}},
      {1, "dgx01", bus(4), uuid(4), 1, {5, 6, 7, 8, 9}, {0}},          // on socket 0, its GPU on node 1
      {2, "dgx01", bus(1), uuid(1), 0, {0, 1, 2, 3, 20, 21}, {0, 1}},  // spans both: not warned
      {3, "dgx01", bus(5), uuid(5), -1, {25}, {1}},                    // GPU's node unknown: not warned
  };
  const auto table = st::train::binding_table(rows, 64);
  BOOST_REQUIRE(table.size() == 5u);
  BOOST_TEST(table[1] == "  rank 0  dgx01  " + bus(0) + " " + uuid(0) + "  NUMA 0  cores 0-4 (NUMA 0)");
  BOOST_TEST(table[4] == "  rank 3  dgx01  " + bus(5) + " " + uuid(5) + "  NUMA ?  cores 25 (NUMA 1)");
  const auto shortened = st::train::binding_table(rows, 2);
  BOOST_REQUIRE(shortened.size() == 4u);
  BOOST_TEST(shortened[3] == "  ... 2 more ranks: every rank's row is in report.json (device.binding)");
  const auto w = st::train::binding_warnings(rows);
  BOOST_REQUIRE(w.size() == 1u);
  BOOST_TEST(
      w[0].rfind("warning: rank 1 on host dgx01 runs on cores 5-9 (NUMA 0), its GPU " + bus(4) + " is on NUMA node 1",
                 0) == 0u,
      w[0]);
  const st::Json j = st::train::binding_json(rows);
  BOOST_TEST(j.size() == 4u);
  BOOST_TEST(j.at(std::size_t{1}).at("cpus").as_string() == "5-9");
  BOOST_TEST(j.at(std::size_t{3}).at("gpu_numa_node").is_null());
}

BOOST_AUTO_TEST_SUITE_END()
