// The cuDNN convolution algorithm choice as a plain function of the heuristic's results
// (conv_algorithm.hpp): cuDNN 9 may report fp32 algorithms with FMA or with DEFAULT math, and
// both must be taken with FMA set on the descriptor when TF32 is off; TENSOR_OP results are TF32
// for fp32 data and only --tf32 takes them. The GPU run records the choice in report.json.
#include <boost/test/unit_test.hpp>

#include "scaletrain/ops/conv_algorithm.hpp"
#include "scaletrain/train/device_metrics.hpp"

namespace st = scaletrain;
using st::ops::ConvCandidate;
using st::ops::ConvMath;

namespace {
constexpr std::size_t kLimit = std::size_t{256} << 20;

ConvCandidate candidate(int algo, ConvMath math, bool deterministic = true, std::size_t bytes = 1024,
                        bool runs = true) {
  return ConvCandidate{algo, runs, math, bytes, deterministic};
}
}  // namespace

BOOST_AUTO_TEST_SUITE(conv_algorithm)

BOOST_AUTO_TEST_CASE(fp32_takes_results_reported_with_fma_math) {
  const auto c = st::ops::choose_conv_algorithm(
      {candidate(6, ConvMath::tensor_op), candidate(1, ConvMath::fma), candidate(0, ConvMath::fma)}, false, false,
      kLimit);
  BOOST_TEST(c.index == 1);
  BOOST_TEST((c.descriptor_math == ConvMath::fma));
}

BOOST_AUTO_TEST_CASE(fp32_takes_results_reported_with_default_math_and_sets_fma) {
  // cuDNN 9's legacy heuristics asked with an FMA descriptor may answer DEFAULT for every result.
  const auto c = st::ops::choose_conv_algorithm(
      {candidate(7, ConvMath::tensor_op), candidate(1, ConvMath::default_math), candidate(0, ConvMath::default_math)},
      false, false, kLimit);
  BOOST_TEST(c.index == 1);
  BOOST_TEST((c.descriptor_math == ConvMath::fma));
}

BOOST_AUTO_TEST_CASE(fp32_passes_over_tensor_op_results_and_refuses_when_only_they_remain) {
  const auto c = st::ops::choose_conv_algorithm(
      {candidate(6, ConvMath::tensor_op), candidate(7, ConvMath::tensor_op_allow_conversion)}, false, false, kLimit);
  BOOST_TEST(c.index == -1);
}

BOOST_AUTO_TEST_CASE(tf32_takes_any_math_and_sets_the_results_own) {
  const auto c = st::ops::choose_conv_algorithm({candidate(6, ConvMath::tensor_op), candidate(1, ConvMath::fma)}, false,
                                                true, kLimit);
  BOOST_TEST(c.index == 0);
  BOOST_TEST((c.descriptor_math == ConvMath::tensor_op));
  const auto d = st::ops::choose_conv_algorithm({candidate(1, ConvMath::default_math)}, false, true, kLimit);
  BOOST_TEST(d.index == 0);
  BOOST_TEST((d.descriptor_math == ConvMath::default_math));
}

BOOST_AUTO_TEST_CASE(results_that_do_not_run_or_want_too_much_workspace_are_passed_over) {
  const auto c = st::ops::choose_conv_algorithm(
      {candidate(5, ConvMath::fma, true, 1024, false), candidate(4, ConvMath::fma, true, kLimit + 1),
       candidate(2, ConvMath::default_math, true, kLimit)},
      false, false, kLimit);
  BOOST_TEST(c.index == 2);
}

BOOST_AUTO_TEST_CASE(backward_passes_prefer_the_first_usable_deterministic_result) {
  const std::vector<ConvCandidate> results{candidate(0, ConvMath::fma, false), candidate(3, ConvMath::tensor_op, true),
                                           candidate(1, ConvMath::default_math, true)};
  BOOST_TEST(st::ops::choose_conv_algorithm(results, true, false, kLimit).index == 2);
  BOOST_TEST(st::ops::choose_conv_algorithm(results, false, false, kLimit).index == 0);
  // No deterministic one usable: the fastest usable one all the same.
  BOOST_TEST(st::ops::choose_conv_algorithm({candidate(0, ConvMath::fma, false)}, true, false, kLimit).index == 0);
}

// A search's results carry times: the record gives the chosen (deterministic) algorithm's time
// and the fastest usable one's, determinism aside, passing over what does not run, wants too much
// workspace or runs another math; heuristic results carry none.
BOOST_AUTO_TEST_CASE(search_times_give_the_chosen_and_the_fastest_usable) {
  auto timed = [](ConvCandidate c, float ms) {
    c.time_ms = ms;
    return c;
  };
  const std::vector<ConvCandidate> results{timed(candidate(7, ConvMath::fma, true, 1024, false), 0.1f),
                                           timed(candidate(6, ConvMath::fma, false, kLimit + 1), 0.2f),
                                           timed(candidate(5, ConvMath::tensor_op, false), 0.3f),
                                           timed(candidate(0, ConvMath::fma, false), 0.5f),
                                           timed(candidate(1, ConvMath::fma, true), 0.8f)};
  const auto choice = st::ops::choose_conv_algorithm(results, true, false, kLimit);
  BOOST_TEST_REQUIRE(choice.index == 4);
  const st::ops::ConvSearchTimes t = st::ops::conv_search_times(results, choice, false, kLimit);
  BOOST_TEST(t.chosen_ms == 0.8, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(t.fastest_ms == 0.5, boost::test_tools::tolerance(1e-6));
  BOOST_TEST(t.fastest_algo == 0);
  // --tf32 takes the tensor-op result too.
  const st::ops::ConvSearchTimes any = st::ops::conv_search_times(results, choice, true, kLimit);
  BOOST_TEST(any.fastest_algo == 5);
  // Heuristic results: no times.
  const std::vector<ConvCandidate> heuristic{candidate(1, ConvMath::fma)};
  const st::ops::ConvSearchTimes none = st::ops::conv_search_times(
      heuristic, st::ops::choose_conv_algorithm(heuristic, true, false, kLimit), false, kLimit);
  BOOST_TEST(none.chosen_ms == -1.0);
  BOOST_TEST(none.fastest_ms == -1.0);
  BOOST_TEST(none.fastest_algo == -1);
}

BOOST_AUTO_TEST_CASE(math_names_follow_cudnn_math_type_values) {
  // ConvMath is cast from cudnnMathType_t: DEFAULT 0, TENSOR_OP 1, ALLOW_CONVERSION 2, FMA 3.
  BOOST_TEST(std::string(st::ops::conv_math_name(static_cast<ConvMath>(0))) == "default");
  BOOST_TEST(std::string(st::ops::conv_math_name(static_cast<ConvMath>(1))) == "tensor_op");
  BOOST_TEST(std::string(st::ops::conv_math_name(static_cast<ConvMath>(2))) == "tensor_op_allow_conversion");
  BOOST_TEST(std::string(st::ops::conv_math_name(static_cast<ConvMath>(3))) == "fma");
}

BOOST_AUTO_TEST_CASE(the_report_lists_each_recorded_choice) {
  st::ops::ConvAlgorithmRecord r;
  r.direction = "conv2d_backward_filter";
  r.n = 32, r.h = 56, r.w = 56, r.c = 64, r.o = 256, r.kh = 1, r.kw = 1, r.stride = 1, r.padding = 0;
  r.algo = 1, r.math = ConvMath::fma, r.workspace_bytes = 4096, r.deterministic = true;
  const st::Json j = st::train::conv_algorithms_json({r});
  BOOST_TEST(j.size() == 1u);
  const st::Json& e = j.at(std::size_t{0});
  BOOST_TEST(e.at("direction").as_string() == "conv2d_backward_filter");
  BOOST_TEST(e.at("input_nhwc").at(3).as_int() == 64);
  BOOST_TEST(e.at("weight_oihw").at(0).as_int() == 256);
  BOOST_TEST(e.at("math").as_string() == "fma");
  BOOST_TEST(e.at("algo").as_int() == 1);
  BOOST_TEST(e.at("workspace_bytes").as_int() == 4096);
  BOOST_TEST(e.at("deterministic").as_bool());
  BOOST_TEST(!e.at("tf32").as_bool());
  BOOST_TEST(e.at("search_ms").is_null());  // chosen by heuristics: no times
  BOOST_TEST(e.at("fastest_algo").is_null());
  // Chosen by a search: its times.
  r.chosen_by = "search";
  r.search = {0.8, 0.5, 0};
  const st::Json searched = st::train::conv_algorithms_json({r}).at(std::size_t{0});
  BOOST_TEST(searched.at("search_ms").as_double() == 0.8);
  BOOST_TEST(searched.at("fastest_ms").as_double() == 0.5);
  BOOST_TEST(searched.at("fastest_algo").as_int() == 0);
  r.chosen_by = "heuristic";
  r.search = {};
  // A grouped, rectangular convolution: the weight holds C / groups input channels; the width's
  // stride and padding have their own keys.
  r.c = 64, r.groups = 4, r.kh = 1, r.kw = 7, r.stride = 1, r.stride_w = 2, r.padding = 0, r.padding_w = 3;
  const st::Json grouped = st::train::conv_algorithms_json({r});
  const st::Json& g = grouped.at(std::size_t{0});
  BOOST_TEST(g.at("weight_oihw").at(1).as_int() == 16);
  BOOST_TEST(g.at("groups").as_int() == 4);
  BOOST_TEST(g.at("stride_w").as_int() == 2);
  BOOST_TEST(g.at("padding_w").as_int() == 3);
}

BOOST_AUTO_TEST_CASE(records_are_kept_in_order) {
  const std::size_t before = st::ops::conv_algorithm_records().size();
  st::ops::ConvAlgorithmRecord r;
  r.direction = "conv2d_forward";
  r.algo = 42;
  st::ops::record_conv_algorithm(r);
  const auto all = st::ops::conv_algorithm_records();
  BOOST_TEST(all.size() == before + 1);
  BOOST_TEST(all.back().algo == 42);
}

BOOST_AUTO_TEST_SUITE_END()
