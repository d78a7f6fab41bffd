// Tests for the recommendation data layer: the negative sampler (never a positive, reproducible,
// independent of how positives are split, uniform over the non-positives by a chi-square test),
// the evaluation negatives, leave-one-out on hand-made interactions, the MovieLens reader's
// errors, and the split reader's checks (each error naming the file and the index).
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <fstream>
#include <set>

#include "scaletrain/core/error.hpp"
#include "scaletrain/data/dataset.hpp"
#include "scaletrain/data/movielens.hpp"
#include "scaletrain/data/negative_sampler.hpp"
#include "scaletrain/data/recommendation.hpp"
#include "scaletrain/io/hdf5.hpp"
#include "scaletrain/tensor/tensor.hpp"
#include "support/gradcheck.hpp"

namespace fs = std::filesystem;
using namespace scaletrain;
using namespace scaletrain::data;
using scaletrain::test::check_throws;

namespace {

fs::path fresh_dir(const std::string& name) {
  io::h5_silence_errors();
  fs::path dir = fs::temp_directory_path() / ("scaletrain_test_rec_" + std::to_string(::getpid())) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// Users 0..3 over 50 items: user 0 sparse, user 1 has 40 of 50 items (the by-rank path), user 2
// one item, user 3 none.
struct SmallPositives {
  std::vector<int32_t> user, item;
  SmallPositives() {
    for (int32_t i : {3, 7, 7, 20, 49}) add(0, i);          // a repeat on purpose
    for (int32_t i = 0; i < 40; ++i) add(1, (i * 7) % 50);  // 7 is prime to 50: distinct
    add(2, 0);
  }
  void add(int32_t u, int32_t i) {
    user.push_back(u);
    item.push_back(i);
  }
  UserPositives positives() const {
    return UserPositives(4, 50, user.data(), item.data(), static_cast<int64_t>(user.size()));
  }
};

// Chi-square statistic of `counts` over the non-positive items of `user` against uniform.
double chi_square(const UserPositives& p, int32_t user, const std::vector<int64_t>& counts, int64_t draws) {
  const double expected = static_cast<double>(draws) / static_cast<double>(p.num_items() - p.count(user));
  double chi2 = 0.0;
  for (int32_t i = 0; i < p.num_items(); ++i) {
    if (p.contains(user, i)) {
      BOOST_CHECK_EQUAL(counts[i], 0);
      continue;
    }
    chi2 += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  return chi2;
}

void write_train_shard_raw(const fs::path& path, int64_t users, int64_t items, const std::vector<int32_t>& u,
                           const std::vector<int32_t>& i) {
  io::H5File f(path.string(), io::H5File::Mode::create_truncate);
  f.set_attribute("scaletrain_format", int64_t(2));
  f.set_fixed_string_attribute("task", kTaskRecommendation);
  f.set_attribute("num_users", users);
  f.set_attribute("num_items", items);
  Tensor tu = Tensor::empty({int64_t(u.size())}, DType::i32), ti = Tensor::empty({int64_t(i.size())}, DType::i32);
  std::copy(u.begin(), u.end(), tu.data<int32_t>());
  std::copy(i.begin(), i.end(), ti.data<int32_t>());
  f.write("user", tu);
  f.write("item", ti);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(recommendation_data)

BOOST_AUTO_TEST_CASE(user_positives_sorted_distinct_and_rank_mapping) {
  const SmallPositives s;
  const UserPositives p = s.positives();
  BOOST_CHECK_EQUAL(p.count(0), 4);  // 7 counted once
  BOOST_CHECK_EQUAL(p.count(1), 40);
  BOOST_CHECK_EQUAL(p.count(3), 0);
  BOOST_CHECK(p.contains(0, 7) && !p.contains(0, 8));
  for (int32_t u = 0; u < 4; ++u) {  // brute force: the r-th item that is not a positive
    int64_t r = 0;
    for (int32_t i = 0; i < 50; ++i)
      if (!p.contains(u, i)) BOOST_CHECK_EQUAL(p.nth_non_positive(u, r++), i);
    BOOST_CHECK_EQUAL(r, 50 - p.count(u));
  }
}

BOOST_AUTO_TEST_CASE(sampled_negatives_are_never_positives) {
  const SmallPositives s;
  const UserPositives p = s.positives();
  const NegativeSampler sampler(p, kDefaultNegativesPerPositive, 42);
  std::vector<int32_t> out(4);
  for (int64_t epoch = 0; epoch < 5; ++epoch)
    for (int64_t index = 0; index < 2000; ++index) {
      const int32_t user = static_cast<int32_t>(index % 4);
      sampler.sample(epoch, index, user, out.data());
      for (int32_t n : out) {
        BOOST_REQUIRE(n >= 0 && n < 50);
        BOOST_REQUIRE_MESSAGE(!p.contains(user, n), "item " << n << " is a positive of user " << user);
      }
    }
}

BOOST_AUTO_TEST_CASE(negatives_reproducible_and_independent_of_split) {
  const SmallPositives s;
  const UserPositives p = s.positives();
  const NegativeSampler sampler(p, 4, 7);
  const int64_t n = static_cast<int64_t>(s.user.size());
  std::vector<int32_t> whole(n * 4), again(n * 4), parts(n * 4), other_epoch(n * 4), other_seed(n * 4);
  sampler.sample_range(3, 0, n, s.user.data(), whole.data());
  sampler.sample_range(3, 0, n, s.user.data(), again.data());
  BOOST_CHECK(whole == again);
  // As two "ranks" would: the second half first, then the first.
  const int64_t half = n / 2;
  sampler.sample_range(3, half, n, s.user.data() + half, parts.data() + half * 4);
  sampler.sample_range(3, 0, half, s.user.data(), parts.data());
  BOOST_CHECK(whole == parts);
  sampler.sample_range(4, 0, n, s.user.data(), other_epoch.data());
  BOOST_CHECK(whole != other_epoch);
  NegativeSampler(p, 4, 8).sample_range(3, 0, n, s.user.data(), other_seed.data());
  BOOST_CHECK(whole != other_seed);
}

BOOST_AUTO_TEST_CASE(negatives_uniform_over_non_positives_chi_square) {
  // 40,000 draws per user. Bounds: the 0.999 quantiles of chi-square with 45 (user 0: 46
  // candidates) and 9 (user 1: 10 candidates) degrees of freedom, 80.08 and 27.88: a correct
  // sampler fails one of them with probability about 0.002 (fixed seed: the outcome is fixed).
  const SmallPositives s;
  const UserPositives p = s.positives();
  const NegativeSampler sampler(p, 4, 2024);
  for (const auto& [user, bound] : {std::pair<int32_t, double>{0, 80.08}, {1, 27.88}}) {
    std::vector<int64_t> counts(50, 0);
    std::vector<int32_t> out(4);
    const int64_t draws = 40000;
    for (int64_t index = 0; index < draws / 4; ++index) {
      sampler.sample(0, index, user, out.data());
      for (int32_t n : out) ++counts[n];
    }
    const double chi2 = chi_square(p, user, counts, draws);
    BOOST_TEST_MESSAGE("user " << user << ": chi-square " << chi2 << " (bound " << bound << ")");
    BOOST_CHECK_LT(chi2, bound);
  }
}

BOOST_AUTO_TEST_CASE(user_with_every_item_is_an_error) {
  std::vector<int32_t> user(5, 1), item{0, 1, 2, 3, 4};
  const UserPositives p(2, 5, user.data(), item.data(), 5);
  check_throws([&] { NegativeSampler(p, 4, 0); }, {"user 1", "all 5 items"});
  check_throws([&] { NegativeSampler(p, 0, 0); }, {"at least 1"});
}

BOOST_AUTO_TEST_CASE(eval_negatives_distinct_not_positives_and_refused_when_too_few) {
  const SmallPositives s;
  const UserPositives p = s.positives();
  // k = 9: user 1 (10 candidates) takes the shuffle path, the others draw by rank.
  const std::vector<int32_t> neg = sample_eval_negatives(p, 9, 5);
  BOOST_REQUIRE_EQUAL(neg.size(), 4u * 9u);
  for (int32_t u = 0; u < 4; ++u) {
    const std::set<int32_t> row(neg.begin() + u * 9, neg.begin() + (u + 1) * 9);
    BOOST_CHECK_EQUAL(row.size(), 9u);
    for (int32_t n : row) BOOST_CHECK(n >= 0 && n < 50 && !p.contains(u, n));
  }
  BOOST_CHECK(neg == sample_eval_negatives(p, 9, 5));
  BOOST_CHECK(neg != sample_eval_negatives(p, 9, 6));
  check_throws([&] { sample_eval_negatives(p, 11, 5); }, {"user 1", "40 positives", "10 non-positive", "11"});
}

BOOST_AUTO_TEST_CASE(leave_one_out_holds_out_the_latest_interaction) {
  // user 0: (item 2, t 5), (item 1, t 9), (item 3, t 9, later line): held out 3, ties to the later line.
  // user 1: item 4 twice (t 1, then t 8) and item 0 at t 6: the repeat counts once, at t 8: held out 4.
  // user 2: a single rating: held out, no training positive.
  const std::vector<Interaction> in{{0, 2, 5, 1}, {1, 4, 1, 2}, {0, 1, 9, 3}, {0, 3, 9, 4},
                                    {1, 0, 6, 5}, {2, 1, 3, 6}, {1, 4, 8, 7}};
  const RecommendationData d = leave_one_out(3, 6, in, 2, 11);
  BOOST_CHECK((d.heldout_item == std::vector<int32_t>{3, 4, 1}));
  BOOST_CHECK((d.train_user == std::vector<int32_t>{0, 0, 1}));
  BOOST_CHECK((d.train_item == std::vector<int32_t>{2, 1, 0}));  // by user, then time
  BOOST_CHECK_EQUAL(d.users_without_training, 1);
  BOOST_REQUIRE_EQUAL(d.negatives.size(), 6u);
  const std::set<int32_t> pos0{1, 2, 3}, pos1{0, 4}, pos2{1};
  for (int j = 0; j < 2; ++j) {
    BOOST_CHECK(!pos0.count(d.negatives[j]));
    BOOST_CHECK(!pos1.count(d.negatives[2 + j]));
    BOOST_CHECK(!pos2.count(d.negatives[4 + j]));
  }
  check_throws([&] { leave_one_out(4, 6, in, 2, 11); }, {"user 3", "no interaction"});
}

BOOST_AUTO_TEST_CASE(movielens_reader_formats_and_errors) {
  const fs::path dir = fresh_dir("ml");
  check_throws([&] { read_movielens_ratings(dir.string()); }, {dir.string(), "ratings.csv", "ratings.dat"});
  std::ofstream(dir / "ratings.dat") << "10::500::4::978300760\n3::20::2.5::978300761\r\n";
  Ratings r = read_movielens_ratings(dir.string());
  BOOST_REQUIRE_EQUAL(r.interactions.size(), 2u);
  BOOST_CHECK_EQUAL(r.interactions[1].user, 3);
  BOOST_CHECK_EQUAL(r.interactions[1].item, 20);
  BOOST_CHECK_EQUAL(r.interactions[1].timestamp, 978300761);
  BOOST_CHECK_EQUAL(r.interactions[1].line, 2);
  int64_t users = 0, items = 0;
  const std::vector<Interaction> dense = remap_dense(r.interactions, users, items);
  BOOST_CHECK_EQUAL(users, 2);
  BOOST_CHECK_EQUAL(dense[0].user, 1);  // 10 after 3
  BOOST_CHECK_EQUAL(dense[0].item, 1);  // 500 after 20
  // ratings.csv takes precedence; its errors name file:line.
  std::ofstream(dir / "ratings.csv") << "userId,movieId,rating,timestamp\n1,2,3.5,100\n1,x,3.5,100\n";
  const std::string csv = (dir / "ratings.csv").string();
  check_throws([&] { read_movielens_ratings(dir.string()); }, {csv + ":3", "malformed", "1,x,3.5,100"});
  std::ofstream(dir / "ratings.csv") << "userId,movieId,rating,timestamp\n";
  check_throws([&] { read_movielens_ratings(dir.string()); }, {csv, "no ratings"});
  std::ofstream(dir / "ratings.csv") << "1,2,3.5,100\n";
  check_throws([&] { read_movielens_ratings(dir.string()); }, {csv + ":1", "header"});
}

BOOST_AUTO_TEST_CASE(split_round_trip) {
  const fs::path dir = fresh_dir("roundtrip");
  fs::create_directories(dir / "train");
  fs::create_directories(dir / "val");
  RecommendationData d;
  d.num_users = 3;
  d.num_items = 6;
  d.train_user = {0, 0, 1, 2, 2};
  d.train_item = {1, 2, 3, 4, 5};
  d.heldout_item = {3, 4, 0};
  d.negatives_per_user = 2;
  d.negatives = {4, 5, 0, 1, 2, 3};
  for (int rank = 0; rank < 2; ++rank) write_recommendation_dataset(dir.string(), d, 2, rank, 2);
  const RecommendationSplit train = open_recommendation_split(dir.string(), "train");
  BOOST_CHECK(!train.is_evaluation());
  BOOST_CHECK_EQUAL(train.shards.size(), 2u);
  BOOST_CHECK(train.user == d.train_user && train.item == d.train_item);
  const RecommendationSplit val = open_recommendation_split(dir.string(), "val");
  BOOST_CHECK(val.is_evaluation());
  BOOST_CHECK_EQUAL(val.negatives_per_user, 2);
  BOOST_CHECK((val.user == std::vector<int32_t>{0, 1, 2}));
  BOOST_CHECK(val.item == d.heldout_item && val.negatives == d.negatives);
  BOOST_CHECK_EQUAL(split_task(dir.string(), "val"), kTaskRecommendation);
  check_train_and_eval_agree(train, val);
  // A negative that is a training positive of its user: item 2 for user 0 (trains on 1 and 2).
  RecommendationSplit leaky = val;
  leaky.negatives[1] = 2;
  check_throws([&] { check_train_and_eval_agree(train, leaky); }, {"negative 2 of user 0 (row 0)", "train"});
  RecommendationSplit wider = val;
  wider.num_items = 7;
  check_throws([&] { check_train_and_eval_agree(train, wider); }, {"3/6", "3/7"});
  check_throws([&] { check_train_and_eval_agree(val, train); }, {"expected training positives"});
}

BOOST_AUTO_TEST_CASE(reader_refuses_bad_splits_naming_file_and_index) {
  const fs::path dir = fresh_dir("bad");
  fs::create_directories(dir / "train");
  const fs::path shard = dir / "train" / "shard-00000-of-00001.h5";
  write_train_shard_raw(shard, 3, 5, {0, 1, 2}, {0, 4, 7});
  check_throws([&] { open_recommendation_split(dir.string(), "train"); }, {shard.string(), "item[2] = 7", "[0, 5)"});
  write_train_shard_raw(shard, 3, 5, {}, {});
  check_throws([&] { open_recommendation_split(dir.string(), "train"); }, {"train", "no positives", "empty split"});
  {
    io::H5File f(shard.string(), io::H5File::Mode::create_truncate);
    f.set_attribute("scaletrain_format", int64_t(2));
    f.set_fixed_string_attribute("task", kTaskRecommendation);
    f.set_attribute("num_users", int64_t(3));
    f.set_attribute("num_items", int64_t(5));
    f.write("user", Tensor::zeros({2}, DType::i64));
    f.write("item", Tensor::zeros({2}, DType::i32));
  }
  check_throws([&] { open_recommendation_split(dir.string(), "train"); }, {shard.string(), "'user'", "int64"});
  check_throws([&] { open_recommendation_split(dir.string(), "nosuch"); }, {"nosuch", "no such split"});

  // Evaluation: user 1 has no row; a negative equal to the held-out item.
  fs::create_directories(dir / "val");
  const std::string val = (dir / "val" / "shard-00000-of-00001.h5").string();
  write_recommendation_eval_shard(val, 3, 5, {0, 2}, {1, 3}, {2, 4, 0, 1}, 2);
  check_throws([&] { open_recommendation_split(dir.string(), "val"); }, {"user 1 has no held-out item", val});
  // User 1 held out twice, in two shards: both places are named.
  const std::string val2 = (dir / "val" / "shard-00001-of-00002.h5").string();
  write_recommendation_eval_shard(val, 3, 5, {0, 1}, {1, 3}, {2, 4, 0, 2}, 2);
  write_recommendation_eval_shard(val2, 3, 5, {2, 1}, {1, 3}, {2, 4, 0, 2}, 2);
  check_throws([&] { open_recommendation_split(dir.string(), "val"); },
               {"user 1 has two held-out items", "row 1 of " + val, "row 1 of " + val2});
  fs::remove(val2);
  write_recommendation_eval_shard(val, 2, 5, {0, 1}, {1, 3}, {2, 4, 3, 1}, 2);
  check_throws([&] { open_recommendation_split(dir.string(), "val"); },
               {val, "negatives[1, 0] = 3", "held-out item of user 1"});
  check_throws(
      [&] {
        write_recommendation_eval_shard(val, 2, 5, {0, 1}, {1, 5}, {2, 4, 3, 1}, 2);
      },
      {val, "item[1] = 5"});
}

BOOST_AUTO_TEST_SUITE_END()
