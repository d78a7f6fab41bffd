// Core pieces: JSON output, the RNG's determinism and distributions, tensor views, and the
// ParameterSet's flat buffers and gradient-ready hook.
#include <sys/resource.h>

#include <boost/test/unit_test.hpp>
#include <cmath>

#include "scaletrain/core/error.hpp"
#include "scaletrain/core/json.hpp"
#include "scaletrain/core/memory.hpp"
#include "scaletrain/core/rng.hpp"
#include "scaletrain/nn/parameters.hpp"
#include "scaletrain/tensor/tensor.hpp"

using namespace scaletrain;

BOOST_AUTO_TEST_SUITE(core)

BOOST_AUTO_TEST_CASE(json_dump_keeps_order_and_escapes) {
  Json j = Json::object();
  j.set("b", 1);
  j.set("a", Json::array_of(std::vector<double>{0.5, 2.0}));
  j.set("s", "quote\" and \\ and \n");
  j.set("n", Json());
  j.set("nan", std::nan(""));
  j.set("t", true);
  BOOST_TEST(j.dump() == R"({"b": 1, "a": [0.5, 2], "s": "quote\" and \\ and \n", "n": null, "nan": null, "t": true})");
  j["b"] = Json(int64_t{5});  // replacing keeps the position
  BOOST_TEST(j.dump().rfind(R"({"b": 5,)", 0) == 0);
  BOOST_TEST(Json::object().dump(2) == "{}");
  Json nested = Json::object();
  nested["x"]["y"] = 3;
  BOOST_TEST(nested.dump(2) == "{\n  \"x\": {\n    \"y\": 3\n  }\n}");
}

BOOST_AUTO_TEST_CASE(json_parse_reads_back_what_dump_writes) {
  Json j = Json::object();
  j.set("int", int64_t{-9007199254740993});  // not representable as a double: must stay integral
  j.set("num", 0.1);
  j.set("exp", 1.5e-300);
  j.set("s", "tab\t \"q\" back\\ \u00e9 \x01");
  j.set("list", Json::array_of(std::vector<int64_t>{1, 2, 3}));
  j.set("empty", Json::array());
  j.set("obj", Json::object());
  j["nested"]["t"] = true;
  j["nested"]["f"] = false;
  j["nested"]["n"] = Json();
  for (int indent : {-1, 2}) {
    const Json back = Json::parse(j.dump(indent));
    BOOST_TEST(back.dump() == j.dump());
    BOOST_TEST(back.at("int").as_int() == int64_t{-9007199254740993});
    BOOST_TEST(back.at("num").as_double() == 0.1);
    BOOST_TEST(back.at("exp").as_double() == 1.5e-300);
    BOOST_TEST(back.at("s").as_string() == "tab\t \"q\" back\\ \u00e9 \x01");
    BOOST_TEST(back.at("list").at(2).as_int() == 3);
    BOOST_TEST(back.at("nested").at("t").as_bool());
    BOOST_TEST(back.at("nested").at("n").is_null());
  }
  // Escapes written by other writers (Python's json.dumps escapes non-ASCII).
  BOOST_TEST(Json::parse(R"("\u00e9\ud83d\ude00\/")").as_string() == "\u00e9\U0001F600/");
  BOOST_TEST(Json::parse("12345678901234567890").as_double() == 12345678901234567890.0);
  BOOST_TEST(Json::parse(" [ ] ").size() == 0u);
}

BOOST_AUTO_TEST_CASE(json_parse_rejects_bad_text_with_the_offset) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "unexpected end at offset 0"},
      {"{\"a\" 1}", "expected ':' at offset 5"},
      {"[1, 2", "expected ']' at offset 5"},
      {"[1] x", "unexpected text after the value at offset 4"},
      {"\"abc", "unterminated string"},
      {"tru", "unexpected character at offset 0"},
      {"\"\\q\"", "bad escape"},
      {"\"\\ud800\"", "lone high surrogate"},
      {"-", "unexpected character"},
      {"1.2.3", "bad number '1.2.3'"},
      {std::string(300, '['), "nesting deeper than 256"},
  };
  for (const auto& [text, message] : bad) {
    try {
      Json::parse(text);
      BOOST_ERROR("parsed bad JSON: " << text);
    } catch (const Error& e) {
      BOOST_TEST(std::string(e.what()).find(message) != std::string::npos, e.what() << " lacks " << message);
    }
  }
  BOOST_CHECK_THROW(Json::parse("1").as_string(), Error);
  BOOST_CHECK_THROW(Json::parse("{}").at("missing"), Error);
  BOOST_CHECK_THROW(Json::parse("[1]").at(1), Error);
  BOOST_CHECK_THROW(Json::parse("1.5").as_int(), Error);
}

BOOST_AUTO_TEST_CASE(st_check_names_the_source_file_and_line) {
  const int line = __LINE__ + 2;
  try {
    ST_CHECK(1 + 1 == 3, "arithmetic is off by " << 1);
    BOOST_FAIL("ST_CHECK did not throw");
  } catch (const Error& e) {
    const std::string expected = "arithmetic is off by 1 (at test_core.cpp:" + std::to_string(line) + ")";
    BOOST_TEST(error_text(e) == expected);
  }
}

BOOST_AUTO_TEST_CASE(rng_is_deterministic_and_well_spread) {
  Rng a(42), b(42), c(43);
  for (int i = 0; i < 100; ++i) BOOST_TEST(a.next_u64() == b.next_u64());
  BOOST_TEST(Rng(42).next_u64() != c.next_u64());
  BOOST_TEST(Rng::derive(1, 2, 3).next_u64() == Rng::derive(1, 2, 3).next_u64());
  BOOST_TEST(Rng::derive(1, 2, 3).next_u64() != Rng::derive(1, 3, 2).next_u64());
  Rng r(7);
  const int n = 200000;
  double sum = 0, sq = 0, nsum = 0, nsq = 0;
  int counts[10] = {0};
  for (int i = 0; i < n; ++i) {
    const double u = r.uniform();
    BOOST_REQUIRE(u >= 0.0 && u < 1.0);
    sum += u;
    sq += u * u;
    const double z = r.normal();
    nsum += z;
    nsq += z * z;
    counts[r.below(10)]++;
  }
  BOOST_TEST(std::fabs(sum / n - 0.5) < 0.005);
  BOOST_TEST(std::fabs(sq / n - 1.0 / 3.0) < 0.005);
  BOOST_TEST(std::fabs(nsum / n) < 0.01);
  BOOST_TEST(std::fabs(nsq / n - 1.0) < 0.01);
  for (int k = 0; k < 10; ++k) BOOST_TEST(std::abs(counts[k] - n / 10) < n / 100);
}

BOOST_AUTO_TEST_CASE(tensor_views_share_storage) {
  Tensor base = Tensor::zeros({10});
  Tensor v = Tensor::view_of(base, 4, {2, 3});
  v.fill(7.0f);
  const float* p = base.data<float>();
  for (int i = 0; i < 10; ++i) BOOST_TEST(p[i] == ((i >= 4) ? 7.0f : 0.0f));
  BOOST_TEST(v.data<float>() == base.data<float>() + 4);
  BOOST_CHECK_THROW(Tensor::view_of(base, 5, {6}), Error);
  BOOST_CHECK_THROW(base.reshape({3, 3}), Error);
  BOOST_CHECK_THROW(base.data<int64_t>(), Error);
  Tensor c = base.clone();
  c.zero();
  BOOST_TEST(base.data<float>()[9] == 7.0f);
  BOOST_TEST(reinterpret_cast<uintptr_t>(Tensor::empty({3}).raw()) % 64 == 0);
}

BOOST_AUTO_TEST_CASE(parameter_set_flat_layout_and_hook) {
  nn::ParameterSet ps;
  const int w = ps.add_parameter("conv.weight", {2, 1, 3, 3});
  const int b = ps.add_parameter("fc.bias", {4});
  ps.add_buffer("bn.running_mean", {5});
  BOOST_CHECK_THROW(ps.add_parameter("fc.bias", {1}), Error);
  ps.finalize();
  BOOST_TEST(ps.parameter_count() == 22);
  BOOST_TEST(ps.flat_values().numel() == 22);
  BOOST_TEST(ps.flat_buffers().numel() == 5);
  BOOST_TEST(ps.value(b).data<float>() == ps.flat_values().data<float>() + 18);
  BOOST_TEST(ps.grad(w).data<float>() == ps.flat_grads().data<float>());
  BOOST_TEST(ps.find("bn.running_mean") != nullptr);
  BOOST_TEST(ps.find("nope") == nullptr);
  BOOST_TEST(ps.state_infos().size() == 3u);
  std::vector<int> ready;
  ps.set_grad_ready_hook([&](int i) { ready.push_back(i); });
  ps.mark_grad_ready(b);
  ps.mark_grad_ready(w);
  BOOST_TEST((ready == std::vector<int>{b, w}));
  BOOST_CHECK_THROW(ps.add_parameter("late", {1}), Error);
}

// keep_freed_host_memory: a freed 64 MiB tensor's memory serves the next one without a page
// fault per page (glibc's default maps and unmaps a block that large on every allocation: 16,384
// faults). Not under AddressSanitizer, whose allocator keeps freed memory in quarantine.
#if !defined(__SANITIZE_ADDRESS__)
BOOST_AUTO_TEST_CASE(freed_host_memory_is_reused_without_page_faults) {
  keep_freed_host_memory();
  const auto minor_faults = [] {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u.ru_minflt;
  };
  constexpr int64_t kFloats = int64_t{16} << 20;  // 64 MiB
  Tensor::empty({kFloats}).fill(1.0f);            // the first: its pages fault in once
  const long before = minor_faults();
  Tensor again = Tensor::empty({kFloats});
  again.fill(2.0f);
  const long faults = minor_faults() - before;
  BOOST_TEST(again.data<float>()[kFloats - 1] == 2.0f);
  BOOST_TEST(faults < 1000, faults << " page faults touching a reused 64 MiB block");
}
#endif

BOOST_AUTO_TEST_SUITE_END()
