// Tests for matching named tensors to a model's flat parameter buffer (models/named_tensors.h):
// a checkpoint's tensors fill the layout, each at its offset, the padding after a tensor zero;
// an optimizer state's tensors are picked from among the others; and each way a checkpoint's or
// a published file's tensors can fail to fit is refused in its own words, naming the source and
// the first tensor at fault. Also: the layout worked out from a spec is a built model's.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "bad_input.h"
#include "device.h"
#include "gpt2/gpt2_spec.h"
#include "mlp/mlp_spec.h"
#include "named_tensors.h"
#include "registry.h"

using trainctl::ParameterSlice;
using trainctl::Tensor;
using trainctl::TensorMatch;

namespace {

// wte [3, 2] padded by two rows (4 floats), then ln.weight [2]: 6 + 4 + 2 floats.
std::vector<ParameterSlice> padded_layout() {
  std::vector<ParameterSlice> slices{{"transformer.wte.weight", {3, 2}}, {"transformer.ln.weight", {2}}};
  slices[0].padding = 4;
  return trainctl::laid_out(slices);
}

Tensor filled(const std::string& name, std::vector<int64_t> shape, float first) {
  Tensor tensor{name, std::move(shape), {}};
  for (int64_t i = 0; i < trainctl::element_count(tensor.shape); ++i)
    tensor.values.push_back(first + static_cast<float>(i));
  return tensor;
}

std::vector<Tensor> checkpoint_tensors() {
  return {filled("transformer.wte.weight", {3, 2}, 1), filled("transformer.ln.weight", {2}, 10)};
}

std::string error_of(const std::vector<Tensor>& tensors, TensorMatch match, const std::string& state = "") {
  try {
    trainctl::flatten_tensors(tensors, padded_layout(), match, "checkpoint c.h5", state);
  } catch (const trainctl::BadInput& error) {
    return error.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("a checkpoint's tensors fill the flat buffer at their offsets, the padding zero") {
  const std::vector<ParameterSlice> layout = padded_layout();
  CHECK(layout[1].offset == 10);
  CHECK(trainctl::flat_count(layout) == 12);
  CHECK(trainctl::flatten_tensors(checkpoint_tensors(), layout, TensorMatch::kCheckpoint, "checkpoint c.h5") ==
        std::vector<float>{1, 2, 3, 4, 5, 6, 0, 0, 0, 0, 10, 11});
}

TEST_CASE("an optimizer state's tensors are picked from among the others'") {
  const std::vector<Tensor> states{filled("transformer.wte.weight/exp_avg", {3, 2}, 1),
                                   filled("transformer.wte.weight/exp_avg_sq", {3, 2}, 100),
                                   filled("transformer.ln.weight/exp_avg", {2}, 10),
                                   filled("transformer.ln.weight/exp_avg_sq", {2}, 200)};
  CHECK(trainctl::flatten_tensors(states, padded_layout(), TensorMatch::kCheckpoint, "checkpoint c.h5",
                                  "exp_avg_sq") == std::vector<float>{100, 101, 102, 103, 104, 105, 0, 0, 0, 0, 200, 201});
  CHECK(error_of({states[0], states[1], states[3]}, TensorMatch::kCheckpoint, "exp_avg") ==
        "checkpoint c.h5 holds 1 exp_avg tensors but the config's model has 2");
}

TEST_CASE("a checkpoint must hold exactly the model's tensors, in its order") {
  std::vector<Tensor> tensors = checkpoint_tensors();
  CHECK(error_of({tensors[0]}, TensorMatch::kCheckpoint) ==
        "checkpoint c.h5 holds 1 model tensors but the config's model has 2");
  CHECK(error_of({tensors[1], tensors[0]}, TensorMatch::kCheckpoint) ==
        "checkpoint c.h5 does not fit the config's model: it has transformer.ln.weight [2], the config needs "
        "transformer.wte.weight [3, 2]");
  tensors[1] = filled("transformer.ln.weight", {3}, 0);
  CHECK(error_of(tensors, TensorMatch::kCheckpoint) ==
        "checkpoint c.h5 does not fit the config's model: it has transformer.ln.weight [3], the config needs "
        "transformer.ln.weight [2]");
  // Published names are not a checkpoint's.
  CHECK(error_of({filled("wte.weight", {3, 2}, 1), tensors[1]}, TensorMatch::kCheckpoint) ==
        "checkpoint c.h5 does not fit the config's model: it has wte.weight [3, 2], the config needs "
        "transformer.wte.weight [3, 2]");
}

TEST_CASE("published weights match by name or Hugging Face's base name, in any order, past the tied head") {
  const std::vector<Tensor> hub{filled("lm_head.weight", {3, 2}, 50), filled("ln.weight", {2}, 10),
                                filled("h.0.attn.bias", {1, 1}, 0), filled("transformer.wte.weight", {3, 2}, 1)};
  CHECK(trainctl::flatten_tensors(hub, padded_layout(), TensorMatch::kPretrained, "train.init_from: hub") ==
        std::vector<float>{1, 2, 3, 4, 5, 6, 0, 0, 0, 0, 10, 11});
}

TEST_CASE("published weights that do not fit are refused, naming the first tensor at fault") {
  const Tensor wte = filled("wte.weight", {3, 2}, 1);
  CHECK(error_of({wte}, TensorMatch::kPretrained) ==
        "checkpoint c.h5 has no tensor transformer.ln.weight, which the config's model needs");
  CHECK(error_of({filled("wte.weight", {4, 2}, 1), filled("ln.weight", {2}, 0)}, TensorMatch::kPretrained) ==
        "checkpoint c.h5 holds wte.weight [4, 2] but the config's model needs [3, 2]");
  CHECK(error_of({wte, filled("ln.weight", {2}, 0), filled("h.1.ln_1.weight", {2}, 0)}, TensorMatch::kPretrained) ==
        "checkpoint c.h5 holds h.1.ln_1.weight [2], which the config's model has no place for");
}

TEST_CASE("the layout worked out from a spec is the built model's") {
  trainctl::Gpt2Spec gpt2;
  gpt2.n_layer = 2;
  gpt2.n_head = 2;
  gpt2.n_embd = 8;
  gpt2.block_size = 5;
  gpt2.vocab_size = 11;  // padded to 128 rows
  trainctl::MlpSpec mlp;
  mlp.inputs = 5;
  mlp.hidden = {9, 6};
  mlp.classes = 3;
  for (const trainctl::ModelSpec& spec : {trainctl::ModelSpec{gpt2}, trainctl::ModelSpec{mlp}}) {
    CAPTURE(spec.kind());
    const auto model = trainctl::build_model(spec, trainctl::cpu_device(), {});
    const std::vector<ParameterSlice> built = model->parameter_layout();
    const std::vector<ParameterSlice> worked_out = trainctl::parameter_layout(spec);
    REQUIRE(worked_out.size() == built.size());
    for (size_t i = 0; i < built.size(); ++i) {
      CAPTURE(built[i].name);
      CHECK(worked_out[i].name == built[i].name);
      CHECK(worked_out[i].shape == built[i].shape);
      CHECK(worked_out[i].offset == built[i].offset);
      CHECK(worked_out[i].count == built[i].count);
      CHECK(worked_out[i].padding == built[i].padding);
      CHECK(worked_out[i].decay == built[i].decay);
    }
    CHECK(trainctl::flat_count(worked_out) == model->parameter_count());
  }
}
