// Tests for the validation loss over the ranks' shares of a data set (models/evaluation.h): the
// shares cover the examples once, in rank order, none more than one example longer than another;
// and an MLP's loss and correct terms over every rank's share, in micro-batches that divide no
// share, add up to those of the whole set scored at once, a rank without examples scoring none.
#include <doctest/doctest.h>

#include <vector>

#include "device.h"
#include "evaluation.h"
#include "mlp/mlp.h"
#include "rng.h"

using trainctl::Batch;
using trainctl::BatchResult;
using trainctl::evaluate_examples;
using trainctl::ExampleRange;
using trainctl::rank_share;

namespace {

constexpr int64_t kFeatures = 5;
constexpr int64_t kClasses = 3;

// Standard-normal features, labels cycling through the classes.
class RowSource : public trainctl::BatchSource {
 public:
  explicit RowSource(int64_t rows) : rows_(rows) {
    trainctl::Rng rng(17, trainctl::kSyntheticDataStream);
    for (int64_t i = 0; i < rows * kFeatures; ++i) x_.push_back(static_cast<float>(rng.normal()));
  }
  int64_t examples() const override { return rows_; }
  void gather(const std::vector<int32_t>& indices, Batch& batch) const override {
    const auto count = static_cast<int64_t>(indices.size());
    batch.examples = count;
    float* x = batch.floats("x", {count, kFeatures});
    int32_t* y = batch.ints("y", {count});
    for (int64_t row = 0; row < count; ++row) {
      const int64_t index = indices[static_cast<size_t>(row)];
      for (int64_t feature = 0; feature < kFeatures; ++feature)
        x[row * kFeatures + feature] = x_[static_cast<size_t>(index * kFeatures + feature)];
      y[row] = static_cast<int32_t>(index % kClasses);
    }
  }
  std::string describe() const override { return "rows"; }

 private:
  int64_t rows_;
  std::vector<float> x_;
};

}  // namespace

TEST_CASE("the ranks' shares cover the examples once, in rank order, evenly") {
  for (int64_t examples : {0, 1, 7, 300, 1001}) {
    for (int64_t world_size : {1, 2, 3, 8}) {
      CAPTURE(examples);
      CAPTURE(world_size);
      int64_t next = 0;
      for (int64_t rank = 0; rank < world_size; ++rank) {
        const ExampleRange share = rank_share(examples, rank, world_size);
        CHECK(share.begin == next);
        CHECK(share.end - share.begin >= examples / world_size);
        CHECK(share.end - share.begin <= examples / world_size + 1);
        next = share.end;
      }
      CHECK(next == examples);
    }
  }
}

TEST_CASE("the ranks' shares, scored in micro-batches and added in rank order, score the whole set") {
  constexpr int64_t kRows = 300;
  constexpr int64_t kMicroBatch = 7;
  trainctl::MlpSpec spec;
  spec.inputs = kFeatures;
  spec.hidden = {8};
  spec.classes = kClasses;
  const trainctl::Device& cpu = trainctl::cpu_device();
  trainctl::Mlp model(spec, cpu, {kRows, trainctl::Precision::kFp32});
  model.init_parameters(3);
  const RowSource data(kRows);
  Batch batch;
  std::vector<int32_t> every_row;
  for (int32_t row = 0; row < kRows; ++row) every_row.push_back(row);
  data.gather(every_row, batch);
  const BatchResult whole = model.evaluate(batch);
  REQUIRE(whole.loss_sum > 0.0);

  trainctl::DeviceBuffer<BatchResult> totals(cpu, 1);
  for (int64_t world_size : {1, 2, 3, 5}) {
    CAPTURE(world_size);
    double loss_sum = 0.0;
    int64_t correct = 0;
    for (int64_t rank = 0; rank < world_size; ++rank) {
      const BatchResult share =
          evaluate_examples(model, data, rank_share(kRows, rank, world_size), kMicroBatch, batch, totals.get());
      loss_sum += share.loss_sum;
      correct += share.correct;
    }
    CHECK(loss_sum == doctest::Approx(whole.loss_sum).epsilon(1e-9));
    CHECK(correct == whole.correct);
    const trainctl::ValidationScore score =
        trainctl::validation_score(loss_sum, static_cast<double>(correct), kRows, model);
    CHECK(score.loss == doctest::Approx(whole.loss_sum / kRows).epsilon(1e-9));
    CHECK(score.accuracy == doctest::Approx(static_cast<double>(whole.correct) / kRows));
  }

  // A rank of a world larger than the data set has no example: it scores nothing, its totals zeroed.
  const BatchResult none = evaluate_examples(model, data, rank_share(2, 0, 3), kMicroBatch, batch, totals.get());
  CHECK(none.loss_sum == 0.0);
  CHECK(none.correct == 0);
}
