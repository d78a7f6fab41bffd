// DeviceBatches (train/device_batches.hpp), the double-buffered source behind --input-copy
// overlap, on a CPU context (BatchUpload's host copies; the CUDA one's events are the GPU check
// script's, gpu.observability and gpu.resnet20_training). The host source here is a stand-in with
// ONE buffer that it overwrites at every next() call, as the loader's recycled buffers may be: a
// batch handed out as a view of the host source, or copied after its next call, would show the
// wrong batch's values.
#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <memory>
#include <set>
#include <vector>

#include "scaletrain/backend/context.hpp"
#include "train/device_batches.hpp"

namespace st = scaletrain;
using st::train::Batch;

namespace {

// Batches of `rows` samples; batch k of epoch e holds pixels and labels 100 e + k, and a host-side
// tensor "tokens" (not a device key) with 7 k. Its last_step_work is {k, 10 k}.
class OneBufferSource final : public st::train::BatchSource {
 public:
  OneBufferSource(int64_t steps, int64_t rows, int64_t last_rows = 0)
      : steps_(steps), rows_(rows), last_rows_(last_rows > 0 ? last_rows : rows) {}

  int64_t steps_per_epoch() const override { return steps_; }
  void start_epoch(int epoch, int64_t first_step) override {
    epoch_ = epoch;
    step_ = first_step;
    ++starts;
  }
  bool next(Batch& batch) override {
    ++calls;
    if (step_ >= steps_) return false;
    const int64_t rows = step_ + 1 == steps_ ? last_rows_ : rows_;
    if (!images_.defined() || images_.dim(0) != rows) {
      images_ = st::Tensor::empty({rows, 2, 2, 1}, st::DType::u8);
      labels_ = st::Tensor::empty({rows}, st::DType::i32);
      tokens_ = st::Tensor::empty({rows}, st::DType::i64);
    }
    const int value = 100 * epoch_ + static_cast<int>(step_);
    for (int64_t i = 0; i < images_.numel(); ++i) images_.data<uint8_t>()[i] = static_cast<uint8_t>(value);
    for (int64_t i = 0; i < rows; ++i) {
      labels_.data<int32_t>()[i] = value;
      tokens_.data<int64_t>()[i] = 7 * step_;
    }
    batch = Batch();
    batch.slot("images") = images_;
    batch.slot("labels") = labels_;
    batch.slot("tokens") = tokens_;
    work_ = st::train::StepWork{step_, 10 * step_};
    ++step_;
    return true;
  }
  std::optional<st::train::StepWork> last_step_work() const override { return work_; }
  int64_t bytes_read() const override { return 1000 * calls; }

  int calls = 0, starts = 0;

 private:
  int64_t steps_, rows_, last_rows_;
  int epoch_ = 0;
  int64_t step_ = 0;
  st::Tensor images_, labels_, tokens_;
  std::optional<st::train::StepWork> work_;
};

struct Fixture {
  st::Context ctx{st::Device::cpu, 1};
  OneBufferSource* host = nullptr;
  std::unique_ptr<st::train::DeviceBatches> batches;

  explicit Fixture(int64_t steps, int64_t rows = 3, int64_t last_rows = 0) {
    auto source = std::make_unique<OneBufferSource>(steps, rows, last_rows);
    host = source.get();
    batches = std::make_unique<st::train::DeviceBatches>(std::move(source), ctx,
                                                         std::vector<std::string>{"images", "labels"});
  }
};

// The batch holds epoch e's step k in every tensor, every element.
void check_batch(const Batch& b, int epoch, int64_t step) {
  const int value = 100 * epoch + static_cast<int>(step);
  const st::Tensor& images = b.at("images");
  for (int64_t i = 0; i < images.numel(); ++i) BOOST_TEST(images.data<uint8_t>()[i] == static_cast<uint8_t>(value));
  for (int64_t i = 0; i < b.size(); ++i) {
    BOOST_TEST(b.at("labels").data<int32_t>()[i] == value);
    BOOST_TEST(b.at("tokens").data<int64_t>()[i] == 7 * step);
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(device_batches)

BOOST_AUTO_TEST_CASE(every_batch_arrives_whole_from_two_alternating_buffers_one_ahead) {
  Fixture f(5);
  f.batches->start_epoch(0, 0);
  std::vector<const void*> buffers;
  Batch b;
  for (int64_t k = 0; k < 5; ++k) {
    BOOST_TEST_REQUIRE(f.batches->next(b));
    check_batch(b, 0, k);
    // The host source was asked for the next batch already (one ahead), and its work is batch k's.
    BOOST_TEST(f.host->calls == static_cast<int>(k) + 2);
    BOOST_TEST(f.batches->last_step_work()->samples == k);
    BOOST_TEST(f.batches->last_step_work()->units == 10 * k);
    buffers.push_back(b.at("images").raw());
  }
  BOOST_TEST(!f.batches->next(b));
  BOOST_TEST(!f.batches->next(b));
  // Two buffers, taken in turn; neither is the host source's.
  BOOST_TEST(std::set<const void*>(buffers.begin(), buffers.end()).size() == 2u);
  for (std::size_t k = 2; k < buffers.size(); ++k) BOOST_TEST(buffers[k] == buffers[k - 2]);
  BOOST_TEST(buffers[0] != buffers[1]);
  const auto& c = f.batches->counts();
  BOOST_TEST(c.batches == 5);
  BOOST_TEST(c.copies == 15);     // images, labels and the host-side tokens (a CPU context copies them all)
  BOOST_TEST(c.serialized == 2);  // each buffer's memory is fresh once, for a fixed shape
  BOOST_TEST(c.bytes == 5 * (12 + 12 + 24));
  BOOST_TEST(f.batches->bytes_read() == 1000 * f.host->calls);
}

BOOST_AUTO_TEST_CASE(epochs_restart_cleanly_after_a_full_or_abandoned_epoch) {
  Fixture f(4);
  Batch b;
  f.batches->start_epoch(0, 0);
  BOOST_TEST_REQUIRE(f.batches->next(b));
  BOOST_TEST_REQUIRE(f.batches->next(b));
  check_batch(b, 0, 1);
  // Abandoned after 2 steps (a batch is staged): the next epoch begins at its own first batch.
  f.batches->start_epoch(1, 0);
  BOOST_TEST(f.host->starts == 2);
  for (int64_t k = 0; k < 4; ++k) {
    BOOST_TEST_REQUIRE(f.batches->next(b));
    check_batch(b, 1, k);
    BOOST_TEST(f.batches->last_step_work()->samples == k);
  }
  BOOST_TEST(!f.batches->next(b));
  // A resumed epoch starts at its step: the batches are those of the epoch from there.
  f.batches->start_epoch(2, 2);
  BOOST_TEST_REQUIRE(f.batches->next(b));
  check_batch(b, 2, 2);
  BOOST_TEST_REQUIRE(f.batches->next(b));
  check_batch(b, 2, 3);
  BOOST_TEST(!f.batches->next(b));
}

BOOST_AUTO_TEST_CASE(a_smaller_last_batch_gets_buffers_of_its_shape) {
  Fixture f(3, 4, 2);
  Batch b;
  f.batches->start_epoch(0, 0);
  for (int64_t k = 0; k < 3; ++k) {
    BOOST_TEST_REQUIRE(f.batches->next(b));
    BOOST_TEST(b.size() == (k == 2 ? 2 : 4));
    check_batch(b, 0, k);
  }
  BOOST_TEST(!f.batches->next(b));
  // The first use of each buffer and the reshaped last batch: fresh memory, copies behind compute.
  BOOST_TEST(f.batches->counts().serialized == 3);
}

BOOST_AUTO_TEST_CASE(one_buffer_is_refused) {
  st::Context ctx{st::Device::cpu, 1};
  BOOST_CHECK_THROW(
      st::train::DeviceBatches(std::make_unique<OneBufferSource>(2, 2), ctx, std::vector<std::string>{"images"}, 1),
      std::exception);
}

BOOST_AUTO_TEST_SUITE_END()
