// Tests for GPT-2 (models/gpt2/gpt2.cpp) on the CPU reference ops, with a tiny model (2 layers, 2
// heads, 8 wide, context 5, vocabulary 11, batches of 2): the gradient of every parameter
// against central finite differences of the mean loss; the GPT2LMHeadModel state_dict layout
// and its weight-decay groups; its layers (the blocks and ln_f; wte and wpe kept) and the
// layouts model_layers refuses; the layer_done slices (ln_f first, each block, wte and wpe last,
// every parameter once); activation recompute giving bitwise-equal gradients with less memory;
// bf16 GEMMs near but not equal to fp32; next_token_logits against evaluate's token losses; and
// GPT-2's deterministic init.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "device.h"
#include "gpt2/gpt2.h"
#include "language_model_tests.h"
#include "registry.h"
#include "rng.h"

using trainctl::Gpt2;
using trainctl::ModelOptions;
using trainctl::ParameterSlice;

namespace {

using language_model_tests::cpu;
using language_model_tests::download;
using language_model_tests::slice_named;
using language_model_tests::upload;

constexpr int64_t kLayers = 2, kHeads = 2, kChannels = 8, kContext = 5, kVocab = 11, kExamples = 2;
// The rows of wte in the flat buffers: kVocab rounded up to a multiple of 128.
constexpr int64_t kPaddedVocab = 128;

trainctl::Gpt2Spec tiny_spec() {
  trainctl::Gpt2Spec spec;
  spec.n_layer = kLayers;
  spec.n_head = kHeads;
  spec.n_embd = kChannels;
  spec.block_size = kContext;
  spec.vocab_size = kVocab;
  return spec;
}

Gpt2 tiny_model(ModelOptions options = {}) {
  options.max_examples = kExamples;
  return Gpt2(tiny_spec(), cpu(), options);
}

trainctl::Batch token_batch(int64_t examples, uint64_t seed) {
  return language_model_tests::token_batch(examples, kContext, kVocab, seed);
}

// Parameters far from GPT-2's init (weights and biases ~0.3, LayerNorm weights near 1), so that
// attention is not uniform and every bias and LayerNorm parameter moves the loss.
std::vector<float> lively_parameters(const Gpt2& model) {
  trainctl::Rng rng(7, trainctl::kSyntheticDataStream);
  std::vector<float> values(static_cast<size_t>(model.parameter_count()));
  for (const ParameterSlice& slice : model.parameter_layout()) {
    const bool layernorm_weight = slice.name.find(".ln_") != std::string::npos && slice.name.ends_with(".weight");
    for (int64_t i = 0; i < slice.count; ++i)
      values[static_cast<size_t>(slice.offset + i)] =
          static_cast<float>((layernorm_weight ? 1.0 : 0.0) + 0.3 * rng.normal());
  }
  return values;
}

}  // namespace

TEST_CASE("gpt2: the gradient of every parameter matches central finite differences of the mean loss") {
  Gpt2 model = tiny_model();
  // The loss is computed in fp32 (~1e-7 relative): a step of 3e-3 balances rounding noise in the
  // numeric derivative (~3e-5 at worst) against its truncation error (h^2 f''' / 6, 9x larger
  // at 1e-2 than here).
  language_model_tests::check_gradients(model, lively_parameters(model), token_batch(kExamples, 1), 3e-3f, 5e-5,
                                        5e-3);
}

TEST_CASE("gpt2: the layout is GPT2LMHeadModel's state_dict without lm_head, decaying only matrices") {
  const Gpt2 model = tiny_model();
  std::vector<std::string> expected_names{"transformer.wte.weight", "transformer.wpe.weight"};
  for (int block = 0; block < kLayers; ++block)
    for (const char* tensor : {"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
                               "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
                               "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"})
      expected_names.push_back(fmt::format("transformer.h.{}.{}", block, tensor));
  expected_names.push_back("transformer.ln_f.weight");
  expected_names.push_back("transformer.ln_f.bias");

  const auto& layout = model.parameter_layout();
  REQUIRE(layout.size() == expected_names.size());
  int64_t offset = 0;
  for (size_t i = 0; i < layout.size(); ++i) {
    CAPTURE(layout[i].name);
    CHECK(layout[i].name == expected_names[i]);
    CHECK(layout[i].offset == offset);
    CHECK(layout[i].decay == (layout[i].shape.size() == 2));
    CHECK(layout[i].padding == (i == 0 ? (kPaddedVocab - kVocab) * kChannels : 0));
    offset += layout[i].count + layout[i].padding;
  }
  CHECK(offset == model.parameter_count());
  const int64_t c = kChannels;
  CHECK(slice_named(model, "transformer.wte.weight").shape == std::vector<int64_t>{kVocab, c});
  CHECK(slice_named(model, "transformer.wpe.weight").shape == std::vector<int64_t>{kContext, c});
  CHECK(slice_named(model, "transformer.h.1.attn.c_attn.weight").shape == std::vector<int64_t>{c, 3 * c});
  CHECK(slice_named(model, "transformer.h.1.attn.c_attn.bias").shape == std::vector<int64_t>{3 * c});
  CHECK(slice_named(model, "transformer.h.1.attn.c_proj.weight").shape == std::vector<int64_t>{c, c});
  CHECK(slice_named(model, "transformer.h.1.mlp.c_fc.weight").shape == std::vector<int64_t>{c, 4 * c});
  CHECK(slice_named(model, "transformer.h.1.mlp.c_fc.bias").shape == std::vector<int64_t>{4 * c});
  CHECK(slice_named(model, "transformer.h.1.mlp.c_proj.weight").shape == std::vector<int64_t>{4 * c, c});
  CHECK(slice_named(model, "transformer.ln_f.bias").shape == std::vector<int64_t>{c});
  // 12 C^2 + 13 C per block, (V + T) C for the embeddings (V padded), 2 C for ln_f.
  CHECK(model.parameter_count() == kLayers * (12 * c * c + 13 * c) + (kPaddedVocab + kContext) * c + 2 * c);

  CHECK(model.vocab_size() == kVocab);
  CHECK(model.context_size() == kContext);
  CHECK(model.loss_terms_per_example() == kContext);
  CHECK(std::string(model.term_unit()) == "tokens");
  const double non_embedding = static_cast<double>(model.parameter_count() - kContext * c);
  CHECK(model.training_flops_per_term() == 6.0 * non_embedding + 12.0 * kLayers * c * kContext);
}

TEST_CASE("gpt2: the layers are the blocks, then ln_f; wte and wpe are kept, wte being the head too") {
  const Gpt2 model = tiny_model();
  for (const ParameterSlice& slice : model.parameter_layout()) {
    CAPTURE(slice.name);
    if (slice.name.starts_with("transformer.h."))
      CHECK(slice.layer == std::stoi(slice.name.substr(std::strlen("transformer.h."))));
    else if (slice.name.starts_with("transformer.ln_f."))
      CHECK(slice.layer == kLayers);
    else
      CHECK(slice.layer == trainctl::kKeptLayer);
  }
  const trainctl::ModelLayers layers = trainctl::model_layers(model.parameter_layout());
  REQUIRE(layers.layers.size() == kLayers + 1);
  REQUIRE(layers.kept);
  const int64_t c = kChannels, block = 12 * c * c + 13 * c, kept = (kPaddedVocab + kContext) * c;
  CHECK(layers.kept->begin == 0);
  CHECK(layers.kept->count() == kept);
  for (int64_t b = 0; b < kLayers; ++b) {
    CHECK(layers.layers[static_cast<size_t>(b)].begin == kept + b * block);
    CHECK(layers.layers[static_cast<size_t>(b)].count() == block);
  }
  CHECK(layers.layers.back().count() == 2 * c);
  CHECK(layers.layers.back().end == model.parameter_count());
}

TEST_CASE("model_layers refuses a layer out of order, one split by another, and a kept layer split") {
  const auto layout = [](std::vector<int> layers) {
    std::vector<ParameterSlice> slices;
    for (size_t i = 0; i < layers.size(); ++i) slices.push_back({fmt::format("t{}", i), {2}, 0, 0, true, 0, layers[i]});
    return trainctl::laid_out(slices);
  };
  const trainctl::ModelLayers fine = trainctl::model_layers(layout({-1, -1, 0, 0, 1}));
  CHECK(fine.layers.size() == 2);
  CHECK(fine.kept->count() == 4);
  CHECK_THROWS_WITH_AS(trainctl::model_layers(layout({0, 2})),
                       "t1 is in layer 2, after layer 0: layers are numbered from 0 in layout order", std::logic_error);
  CHECK_THROWS_WITH_AS(trainctl::model_layers(layout({0, 1, 0})),
                       "t2 is in layer 0, after layer 1: layers are numbered from 0 in layout order", std::logic_error);
  CHECK_THROWS_WITH_AS(trainctl::model_layers(layout({-1, 0, -1})), "t2 is not adjacent to the rest of its layer -1",
                       std::logic_error);
}

TEST_CASE("gpt2: layer_done reports ln_f first, then each block from the last, then wte and wpe, each once") {
  Gpt2 model = tiny_model();
  model.init_parameters(3);
  language_model_tests::check_layer_done(model, token_batch(kExamples, 2),
                                         {{"transformer.ln_f.weight", "transformer.ln_f.bias"},
                                          {"transformer.h.1.ln_1.weight", "transformer.h.1.mlp.c_proj.bias"},
                                          {"transformer.h.0.ln_1.weight", "transformer.h.0.mlp.c_proj.bias"},
                                          {"transformer.wte.weight", "transformer.wpe.weight"}});
}

TEST_CASE("gpt2: activation recompute gives bitwise-equal gradients and loss in less memory") {
  ModelOptions recompute;
  recompute.recompute = true;
  Gpt2 stored = tiny_model();
  Gpt2 recomputed = tiny_model(recompute);
  language_model_tests::check_recompute_bitwise(stored, recomputed, lively_parameters(stored),
                                                token_batch(kExamples, 4), token_batch(kExamples, 5));

  // What each allocates, as tests/test_estimate.cpp holds the footprint to the allocations.
  ModelOptions stored_options;
  stored_options.max_examples = recompute.max_examples = kExamples;
  const trainctl::ModelSpec spec{tiny_spec()};
  const int64_t stored_bytes = trainctl::gpt2_footprint(spec, stored_options).activation_bytes;
  const int64_t recomputed_bytes = trainctl::gpt2_footprint(spec, recompute).activation_bytes;
  MESSAGE(fmt::format("activation bytes: {} without recompute, {} with it", stored_bytes, recomputed_bytes));
  CHECK(recomputed_bytes < stored_bytes);
}

TEST_CASE("gpt2: bf16 GEMMs give a loss near fp32's but not equal to it") {
  ModelOptions bf16;
  bf16.precision = trainctl::Precision::kBf16;
  Gpt2 fp32_model = tiny_model();
  Gpt2 bf16_model = tiny_model(bf16);
  language_model_tests::check_bf16_near_fp32(fp32_model, bf16_model, lively_parameters(fp32_model),
                                             token_batch(kExamples, 6));
}

// The padded vocabulary takes no probability: next_token_logits gives the kVocab logits alone, and
// a softmax over them, per prefix, is the unpadded computation of evaluate's loss.
TEST_CASE("gpt2: next_token_logits of each prefix gives evaluate's token losses and argmax hits") {
  Gpt2 model = tiny_model();
  upload(model, lively_parameters(model));
  language_model_tests::check_next_token_logits(model, token_batch(1, 8));
}

TEST_CASE("gpt2: the padded vocabulary rows get a gradient of exactly zero") {
  Gpt2 model = tiny_model();
  upload(model, lively_parameters(model));
  const ParameterSlice& wte = slice_named(model, "transformer.wte.weight");
  const int64_t first_padded = wte.offset + wte.count;
  REQUIRE(wte.padding == (kPaddedVocab - kVocab) * kChannels);
  // Over two accumulated micro-batches.
  model.forward_backward(token_batch(kExamples, 9), 0.1f);
  model.forward_backward(token_batch(kExamples, 10), 0.1f);
  const std::vector<float> gradients = download(model.gradients(), model.parameter_count());
  CHECK(std::all_of(gradients.begin() + first_padded, gradients.begin() + first_padded + wte.padding,
                    [](float g) { return g == 0.0f; }));
  CHECK(std::any_of(gradients.begin() + wte.offset, gradients.begin() + first_padded, [](float g) { return g != 0.0f; }));
}

TEST_CASE("gpt2: init is deterministic and GPT-2's (std 0.02, c_proj scaled, biases 0, LayerNorm 1)") {
  Gpt2 a = tiny_model(), b = tiny_model(), c = tiny_model();
  a.init_parameters(11);
  b.init_parameters(11);
  c.init_parameters(12);
  const std::vector<float> first = download(a.parameters(), a.parameter_count());
  CHECK(first == download(b.parameters(), b.parameter_count()));
  CHECK(first != download(c.parameters(), c.parameter_count()));

  // The spread of all weights of one kind, pooled.
  auto std_of = [&](bool residual_projection) {
    double sum = 0.0, sum_squares = 0.0;
    int64_t count = 0;
    for (const ParameterSlice& slice : a.parameter_layout()) {
      if (slice.shape.size() != 2 || slice.name.ends_with("c_proj.weight") != residual_projection) continue;
      for (int64_t i = 0; i < slice.count; ++i) {
        const double value = first[static_cast<size_t>(slice.offset + i)];
        sum += value;
        sum_squares += value * value;
        ++count;
      }
    }
    const double mean = sum / static_cast<double>(count);
    return std::sqrt(sum_squares / static_cast<double>(count) - mean * mean);
  };
  const double weight_std = std_of(false), projection_std = std_of(true);
  const double expected_projection_std = 0.02 / std::sqrt(2.0 * kLayers);
  MESSAGE(fmt::format("init std: weights {:.5f} (0.02), residual projections {:.5f} ({:.5f})", weight_std,
                      projection_std, expected_projection_std));
  CHECK(std::abs(weight_std - 0.02) < 0.002);
  CHECK(std::abs(projection_std - expected_projection_std) < 0.1 * expected_projection_std);
  for (const ParameterSlice& slice : a.parameter_layout()) {
    if (slice.shape.size() != 1) continue;
    CAPTURE(slice.name);
    const float expected = slice.name.ends_with(".weight") ? 1.0f : 0.0f;
    const auto begin = first.begin() + slice.offset;
    CHECK(std::all_of(begin, begin + slice.count, [expected](float value) { return value == expected; }));
  }
}

TEST_CASE("gpt2: a device without the transformer's op families is refused before building, naming them") {
  trainctl::Device holed = cpu();
  holed.name = "holed";
  holed.embedding = std::nullopt;
  holed.attention = std::nullopt;
  const trainctl::ModelSpec spec{tiny_spec()};
  CHECK_THROWS_WITH_AS(trainctl::build_model(spec, holed, {}),
                       "model.kind = \"gpt2\" needs the embedding, attention ops, which device \"holed\" does not "
                       "have yet",
                       trainctl::ModelInputError);
  CHECK_NOTHROW(trainctl::require_op_families(spec, cpu()));
}
