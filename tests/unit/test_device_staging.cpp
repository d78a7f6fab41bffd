// The CPU DeviceStaging, the host mirror the reducers' staged path is tested with: each method
// copies exactly its range and nothing else, the copies are counted per range, a wait for a
// range never copied out and a range outside the buffer are refused with clear errors, and only
// f32 buffers on the context's device are accepted. (The CUDA one: tests/gpu/test_device_staging.)
#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <vector>

#include "scaletrain/backend/context.hpp"
#include "scaletrain/backend/device_staging.hpp"
#include "scaletrain/core/error.hpp"
#include "support/gradcheck.hpp"

using namespace scaletrain;
using scaletrain::test::check_throws;

namespace {
Tensor counting(int64_t n, float base) {
  Tensor t = Tensor::empty({n});
  for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = base + static_cast<float>(i);
  return t;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(device_staging)

BOOST_AUTO_TEST_CASE(copies_exactly_the_ranges_asked_for) {
  Context ctx;
  Tensor buffer = counting(10, 100.0f);
  auto staging = DeviceStaging::create(ctx, buffer);
  BOOST_TEST((staging->device() == Device::cpu));
  BOOST_TEST(staging->size() == 10);
  BOOST_TEST(staging->device_data() == buffer.raw());
  float* host = staging->host();
  BOOST_TEST_REQUIRE(host != nullptr);
  BOOST_TEST(static_cast<void*>(host) != buffer.raw());  // a mirror, not the buffer itself
  for (int i = 0; i < 10; ++i) host[i] = -1.0f;

  staging->copy_to_host_after_compute(2, 3);
  staging->wait_host(2, 3);
  for (int i = 0; i < 10; ++i) BOOST_TEST(host[i] == (i >= 2 && i < 5 ? 100.0f + i : -1.0f), "host " << i);

  // The host changes its range and sends it back; the rest of the buffer is untouched.
  for (int i = 2; i < 5; ++i) host[i] = 0.5f * static_cast<float>(i);
  host[0] = host[9] = 7.0f;  // outside the range sent back
  staging->copy_to_device(2, 3);
  staging->device_ready_for_compute();
  for (int i = 0; i < 10; ++i)
    BOOST_TEST(buffer.data<float>()[i] == (i >= 2 && i < 5 ? 0.5f * i : 100.0f + i), "buffer " << i);

  // Empty ranges and the whole buffer are ranges too.
  staging->copy_to_host_after_compute(10, 0);
  staging->wait_host(10, 0);
  staging->copy_to_host_after_compute(0, 10);
  staging->wait_host(0, 10);
  for (int i = 0; i < 10; ++i) BOOST_TEST(host[i] == buffer.data<float>()[i]);

  BOOST_TEST(staging->copies(2).to_host == 1);
  BOOST_TEST(staging->copies(2).to_device == 1);
  BOOST_TEST(staging->copies(0).to_host == 1);
  BOOST_TEST(staging->copies(0).to_device == 0);
  BOOST_TEST(staging->copies(5).to_host == 0);
}

BOOST_AUTO_TEST_CASE(a_view_is_mirrored_from_its_own_first_element) {
  Context ctx;
  Tensor base = counting(12, 0.0f);
  Tensor view = Tensor::view_of(base, 4, {6});
  auto staging = DeviceStaging::create(ctx, view);
  BOOST_TEST(staging->size() == 6);
  staging->copy_to_host_after_compute(0, 6);
  staging->wait_host(0, 6);
  for (int i = 0; i < 6; ++i) BOOST_TEST(staging->host()[i] == 4.0f + i);
  staging->host()[5] = -3.0f;
  staging->copy_to_device(5, 1);
  BOOST_TEST(base.data<float>()[9] == -3.0f);
  BOOST_TEST(base.data<float>()[10] == 10.0f);
}

BOOST_AUTO_TEST_CASE(misuse_is_refused_clearly) {
  Context ctx;
  Tensor buffer = counting(10, 0.0f);
  auto staging = DeviceStaging::create(ctx, buffer);
  // Outside the buffer, in every method.
  check_throws([&] { staging->copy_to_host_after_compute(8, 3); }, {"[8, 11)", "outside", "10 elements"});
  check_throws([&] { staging->copy_to_host_after_compute(-1, 2); }, {"outside"});
  check_throws([&] { staging->copy_to_device(0, 11); }, {"copy_to_device", "outside"});
  check_throws([&] { staging->copy_to_device(3, -1); }, {"outside"});
  check_throws([&] { staging->wait_host(11, 0); }, {"wait_host", "outside"});
  // A wait for a range that was never copied out, or for another range at the same start.
  check_throws([&] { staging->wait_host(0, 4); }, {"[0, 4)", "never copied"});
  staging->copy_to_host_after_compute(0, 4);
  check_throws([&] { staging->wait_host(0, 5); }, {"[0, 5)", "never copied"});
  staging->wait_host(0, 4);
  // Nothing counted for refused calls.
  BOOST_TEST(staging->copies(8).to_host == 0);
  BOOST_TEST(staging->copies(0).to_device == 0);
  // Only f32, and only a defined buffer.
  Tensor ints = Tensor::zeros({4}, DType::i32);
  check_throws([&] { DeviceStaging::create(ctx, ints); }, {"f32", "int32"});
  Tensor undefined;
  check_throws([&] { DeviceStaging::create(ctx, undefined); }, {"undefined"});
}

BOOST_AUTO_TEST_SUITE_END()
