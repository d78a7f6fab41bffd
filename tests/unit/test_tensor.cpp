// Tensor host access: data<T>() takes exactly the dtype's host type on a CPU tensor and refuses
// anything else with a message naming T, dtype, shape and device; the op dispatchers' answer for
// a device without a kernel; and the device boundary of the tensor layer (to(), copy_from, fill,
// zero through the DeviceMemory a backend sets), driven here by a device whose memory is host
// memory, so that the routing is checked without a GPU.
#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <set>

#include "ops/op_checks.hpp"
#include "scaletrain/core/error.hpp"
#include "scaletrain/tensor/tensor.hpp"
#include "support/gradcheck.hpp"
#include "support/host_backed_device.hpp"

using namespace scaletrain;
using scaletrain::test::check_throws;

static_assert(DTypeOf<float>::value == DType::f32);
static_assert(DTypeOf<int32_t>::value == DType::i32);
static_assert(DTypeOf<int64_t>::value == DType::i64);
static_assert(DTypeOf<uint8_t>::value == DType::u8);

BOOST_AUTO_TEST_SUITE(tensor)

BOOST_AUTO_TEST_CASE(data_accepts_the_dtypes_host_type) {
  Tensor f = Tensor::zeros({4}, DType::f32);
  Tensor i = Tensor::zeros({4}, DType::i32);
  Tensor l = Tensor::zeros({4}, DType::i64);
  Tensor u = Tensor::zeros({4}, DType::u8);
  BOOST_TEST(f.data<float>() == f.raw());
  BOOST_TEST(f.data<const float>() == f.raw());
  BOOST_TEST(i.data<int32_t>() == i.raw());
  BOOST_TEST(l.data<int64_t>() == l.raw());
  BOOST_TEST(u.data<uint8_t>() == u.raw());
  // A view keeps its base's dtype and checks the same way.
  Tensor v = Tensor::view_of(i, 1, {2});
  BOOST_TEST(v.data<int32_t>() == i.data<int32_t>() + 1);
}

BOOST_AUTO_TEST_CASE(data_refuses_another_type_of_the_same_size) {
  // The old check compared element sizes only and let these through.
  Tensor i = Tensor::zeros({4}, DType::i32);
  check_throws([&] { i.data<float>(); }, {"Tensor::data<float>() on a tensor of dtype int32 (shape [4], device cpu)"});
  Tensor f = Tensor::zeros({2, 3}, DType::f32);
  check_throws([&] { f.data<int32_t>(); }, {"Tensor::data<int32_t>()", "dtype float32", "shape [2, 3]"});
  check_throws([&] { Tensor::view_of(f, 0, {4}).data<int32_t>(); }, {"Tensor::data<int32_t>()", "shape [4]"});
}

BOOST_AUTO_TEST_CASE(data_refuses_another_size) {
  Tensor f = Tensor::zeros({4}, DType::f32);
  check_throws([&] { f.data<uint8_t>(); }, {"Tensor::data<uint8_t>()", "dtype float32"});
  check_throws([&] { f.data<int64_t>(); }, {"Tensor::data<int64_t>()", "dtype float32"});
  Tensor u = Tensor::zeros({8}, DType::u8);
  check_throws([&] { u.data<float>(); }, {"Tensor::data<float>()", "dtype uint8", "shape [8]"});
  Tensor l = Tensor::zeros({1}, DType::i64);
  check_throws([&] { l.data<int32_t>(); }, {"Tensor::data<int32_t>()", "dtype int64"});
}

BOOST_AUTO_TEST_CASE(half_precision_has_no_host_type) {
  // f16/bf16 are for the GPU backend: no data<T>() accepts them; raw() gives the bytes.
  for (DType d : {DType::f16, DType::bf16}) {
    Tensor h = Tensor::zeros({3}, d);
    check_throws([&] { h.data<float>(); }, {"Tensor::data<float>()", dtype_name(d)});
    check_throws([&] { h.data<uint8_t>(); }, {"Tensor::data<uint8_t>()", dtype_name(d)});
    BOOST_TEST(h.raw() != nullptr);
  }
}

BOOST_AUTO_TEST_CASE(host_access_to_device_memory_is_refused) {
  // Without an open CUDA Context there is no cuda memory to allocate from.
  check_throws([] { Tensor::empty({2}, DType::f32, Device::cuda); }, {"no cuda memory", "open a Context"});
  const std::string m = detail::host_access_message("float", DType::f32, Device::cuda, {2, 3});
  BOOST_TEST(m ==
             "Tensor::data<float>() on a tensor of dtype float32 (shape [2, 3], device cuda): "
             "host access to device memory; copy it to the CPU first");
}

BOOST_AUTO_TEST_CASE(an_op_without_a_kernel_says_so) {
  BOOST_TEST(std::string(device_name(Device::cuda)) == "cuda");
  check_throws([] { ops::no_kernel("relu_forward", Device::cuda); }, {"relu_forward: no kernel for device cuda"});
}

BOOST_AUTO_TEST_CASE(device_tensors_cross_the_boundary_only_through_to_and_copy_from) {
  auto memory = std::make_shared<test::HostBackedMemory>();
  set_device_memory(Device::cuda, memory);
  BOOST_TEST(device_memory_is_set(Device::cuda));
  {
    Tensor host = Tensor::empty({2, 3});
    for (int i = 0; i < 6; ++i) host.data<float>()[i] = 0.5f * i;
    Tensor dev = host.to(Device::cuda);
    BOOST_TEST((dev.device() == Device::cuda));
    BOOST_TEST(memory->copies_to_device == 1);
    check_throws([&] { dev.data<float>(); }, {"device cuda", "copy it to the CPU first"});
    Tensor view = Tensor::view_of(dev, 3, {3});  // a view stays on the device, offset in bytes
    Tensor back = view.to(Device::cpu);
    BOOST_TEST(memory->copies_to_host == 1);
    BOOST_TEST(back.data<float>()[0] == 1.5f);
    BOOST_TEST(back.data<float>()[2] == 2.5f);
    Tensor dup = dev.clone();  // device to device
    BOOST_TEST(memory->copies_on_device == 1);
    dup.fill(7.0f);
    BOOST_TEST(dup.to(Device::cpu).data<float>()[5] == 7.0f);
    dev.zero();
    BOOST_TEST(dev.to(Device::cpu).data<float>()[4] == 0.0f);
    BOOST_TEST(host.to(Device::cpu).raw() == host.raw());  // already there: shared, not copied
    BOOST_TEST(memory->live.size() == 2u);                 // dev and dup
    set_device_memory(Device::cuda, nullptr);
    // The storage keeps its memory alive: tensors may outlive the Context that made them.
    BOOST_TEST(dup.to(Device::cpu).data<float>()[0] == 7.0f);
    check_throws([] { Tensor::empty({1}, DType::f32, Device::cuda); }, {"no cuda memory"});
  }
  BOOST_TEST(memory->live.empty());
  BOOST_TEST(!device_memory_is_set(Device::cuda));
}

BOOST_AUTO_TEST_CASE(host_tensors_are_pinned_only_while_a_device_memory_is_set) {
  BOOST_TEST(!Tensor::empty_pinned({4}).pinned());  // no GPU Context: ordinary host memory
  Tensor kept;
  {
    test::HostBackedDevice device;
    Tensor t = Tensor::empty_pinned({2, 3}, DType::u8);
    BOOST_TEST(t.pinned());
    BOOST_TEST(device.memory().pinned.size() == 1u);
    t.data<uint8_t>()[5] = 7;  // host memory: data<T>() works
    Tensor copy = Tensor::empty({6}, DType::u8);
    copy.copy_from(t);
    BOOST_TEST(copy.data<uint8_t>()[5] == 7);
    kept = Tensor::empty_pinned({1});
  }
  BOOST_TEST(kept.pinned());  // the storage keeps the pinning memory alive and releases into it
}

// Host tensor memory is counted while a storage lives (64-byte rounded, a view adds nothing) and
// its peak can be started again, as report.json's CPU memory figures and the models' memory test
// read them.
BOOST_AUTO_TEST_CASE(host_tensor_memory_is_counted_while_held) {
  const std::size_t before = host_tensor_memory_stats().in_use_bytes;
  {
    Tensor t = Tensor::empty({1000}, DType::f32);  // 4000 bytes: 4032 counted
    Tensor view = Tensor::view_of(t, 0, {10});
    Tensor none = Tensor::empty({0}, DType::u8);  // an empty tensor still holds a block of 64
    BOOST_TEST(host_tensor_memory_stats().in_use_bytes == before + 4032 + 64);
    BOOST_TEST(host_tensor_memory_stats().peak_in_use_bytes >= before + 4032 + 64);
  }
  BOOST_TEST(host_tensor_memory_stats().in_use_bytes == before);

  reset_host_tensor_memory_peak();
  BOOST_TEST(host_tensor_memory_stats().peak_in_use_bytes == before);
  { Tensor big = Tensor::empty({1 << 18}, DType::f32); }  // 1 MiB, freed at once
  const AllocatorStats after = host_tensor_memory_stats();
  BOOST_TEST(after.in_use_bytes == before);
  BOOST_TEST(after.peak_in_use_bytes == before + (std::size_t{1} << 20));
  BOOST_TEST(after.reserved_bytes == after.in_use_bytes);  // nothing cached on the host
}

BOOST_AUTO_TEST_SUITE_END()
