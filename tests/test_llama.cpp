// Tests for Llama (models/llama/llama.cpp) on the CPU reference ops, with a tiny model (2 layers, 4
// query heads sharing 2 key/value heads of 4 columns, 12 wide, so that n_head * head_dim is not
// n_embd; an MLP of 10, context 5, vocabulary 11, batches of 2): the gradient of every parameter
// against central finite differences of the mean loss, untied and tied; LlamaForCausalLM's
// state_dict layout and its weight-decay groups; the layer_done slices; activation recompute
// giving bitwise-equal gradients with less memory; bf16 GEMMs near but not equal to fp32;
// next_token_logits against evaluate's token losses; Hugging Face's init; RoPE's inverse
// frequencies with and without llama3's scaling against their definition; and a device without
// the rope family refused. The PyTorch oracle (tests/integration/llama_pytorch.sh) holds the
// model to LlamaForCausalLM's arithmetic.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "language_model_tests.h"
#include "llama/llama.h"
#include "registry.h"
#include "rng.h"

using trainctl::Llama;
using trainctl::LlamaSpec;
using trainctl::ModelOptions;
using trainctl::ParameterSlice;

namespace {

using language_model_tests::cpu;
using language_model_tests::download;
using language_model_tests::slice_named;
using language_model_tests::upload;

constexpr int64_t kLayers = 2, kHeads = 4, kKvHeads = 2, kHeadDim = 4, kChannels = 12, kMlp = 10, kContext = 5,
                  kVocab = 11, kExamples = 2;

LlamaSpec tiny_spec(bool tied = false) {
  LlamaSpec spec;
  spec.n_layer = kLayers;
  spec.n_head = kHeads;
  spec.n_kv_head = kKvHeads;
  spec.head_dim = kHeadDim;
  spec.n_embd = kChannels;
  spec.intermediate_size = kMlp;
  spec.block_size = kContext;
  spec.vocab_size = kVocab;
  // A small theta: every frequency turns the heads visibly over 5 positions.
  spec.rope_theta = 10.0;
  spec.tie_embeddings = tied;
  return spec;
}

Llama tiny_model(ModelOptions options = {}, bool tied = false) {
  options.max_examples = kExamples;
  return Llama(tiny_spec(tied), cpu(), options);
}

trainctl::Batch token_batch(int64_t examples, uint64_t seed) {
  return language_model_tests::token_batch(examples, kContext, kVocab, seed);
}

// Parameters far from the init (weights ~0.3, RMSNorm weights near 1), so that attention is not
// uniform and every parameter moves the loss.
std::vector<float> lively_parameters(const Llama& model) {
  trainctl::Rng rng(7, trainctl::kSyntheticDataStream);
  std::vector<float> values(static_cast<size_t>(model.parameter_count()));
  for (const ParameterSlice& slice : model.parameter_layout()) {
    const bool norm_weight = slice.shape.size() == 1;
    for (int64_t i = 0; i < slice.count; ++i)
      values[static_cast<size_t>(slice.offset + i)] = static_cast<float>((norm_weight ? 1.0 : 0.0) + 0.3 * rng.normal());
  }
  return values;
}

std::vector<std::string> block_tensor_names() {
  return {"self_attn.q_proj.weight", "self_attn.k_proj.weight",  "self_attn.v_proj.weight",
          "self_attn.o_proj.weight", "mlp.gate_proj.weight",     "mlp.up_proj.weight",
          "mlp.down_proj.weight",    "input_layernorm.weight", "post_attention_layernorm.weight"};
}

}  // namespace

TEST_CASE("llama: the gradient of every parameter matches central finite differences of the mean loss") {
  // As GPT-2's (test_gpt2.cpp): a step of 3e-3 balances the fp32 loss's rounding noise against
  // the truncation error.
  for (const bool tied : {false, true}) {
    CAPTURE(tied);
    Llama model = tiny_model({}, tied);
    language_model_tests::check_gradients(model, lively_parameters(model), token_batch(kExamples, 1), 3e-3f, 5e-5,
                                          5e-3);
  }
}

TEST_CASE("llama: the layout is LlamaForCausalLM's state_dict, lm_head.weight only untied, decaying only matrices") {
  for (const bool tied : {false, true}) {
    CAPTURE(tied);
    const Llama model = tiny_model({}, tied);
    std::vector<std::string> expected_names{"model.embed_tokens.weight"};
    for (int block = 0; block < kLayers; ++block)
      for (const std::string& tensor : block_tensor_names())
        expected_names.push_back(fmt::format("model.layers.{}.{}", block, tensor));
    expected_names.push_back("model.norm.weight");
    if (!tied) expected_names.push_back("lm_head.weight");

    const auto& layout = model.parameter_layout();
    REQUIRE(layout.size() == expected_names.size());
    int64_t offset = 0;
    for (size_t i = 0; i < layout.size(); ++i) {
      CAPTURE(layout[i].name);
      CHECK(layout[i].name == expected_names[i]);
      CHECK(layout[i].offset == offset);
      CHECK(layout[i].decay == (layout[i].shape.size() == 2));
      CHECK(layout[i].padding == 0);
      offset += layout[i].count;
    }
    CHECK(offset == model.parameter_count());
    const int64_t c = kChannels, q = kHeads * kHeadDim, kv = kKvHeads * kHeadDim;
    const auto shape = [&](const std::string& name) { return slice_named(model, name).shape; };
    CHECK(shape("model.embed_tokens.weight") == std::vector<int64_t>{kVocab, c});
    CHECK(shape("model.layers.1.self_attn.q_proj.weight") == std::vector<int64_t>{q, c});
    CHECK(shape("model.layers.1.self_attn.k_proj.weight") == std::vector<int64_t>{kv, c});
    CHECK(shape("model.layers.1.self_attn.v_proj.weight") == std::vector<int64_t>{kv, c});
    CHECK(shape("model.layers.1.self_attn.o_proj.weight") == std::vector<int64_t>{c, q});
    CHECK(shape("model.layers.1.mlp.gate_proj.weight") == std::vector<int64_t>{kMlp, c});
    CHECK(shape("model.layers.1.mlp.up_proj.weight") == std::vector<int64_t>{kMlp, c});
    CHECK(shape("model.layers.1.mlp.down_proj.weight") == std::vector<int64_t>{c, kMlp});
    CHECK(shape("model.layers.1.post_attention_layernorm.weight") == std::vector<int64_t>{c});
    CHECK(shape("model.norm.weight") == std::vector<int64_t>{c});
    // Per block: q and o, k and v, three MLP matrices, two norms; the embedding, the final norm, the head.
    const int64_t per_block = 2 * q * c + 2 * kv * c + 3 * kMlp * c + 2 * c;
    CHECK(model.parameter_count() == kLayers * per_block + kVocab * c + c + (tied ? 0 : kVocab * c));

    CHECK(model.vocab_size() == kVocab);
    CHECK(model.context_size() == kContext);
    CHECK(model.loss_terms_per_example() == kContext);
    CHECK(std::string(model.term_unit()) == "tokens");
    // 6 N (N without the untied embedding, which is looked up) + 12 L n_head head_dim T.
    const double matrix_parameters = static_cast<double>(model.parameter_count() - (tied ? 0 : kVocab * c));
    CHECK(model.training_flops_per_term() == 6.0 * matrix_parameters + 12.0 * kLayers * q * kContext);
  }
}

TEST_CASE("llama: layer_done reports the final norm and head first, then each block from the last, then the embedding") {
  Llama model = tiny_model();
  model.init_parameters(3);
  language_model_tests::check_layer_done(
      model, token_batch(kExamples, 2),
      {{"model.norm.weight", "lm_head.weight"},
       {"model.layers.1.self_attn.q_proj.weight", "model.layers.1.post_attention_layernorm.weight"},
       {"model.layers.0.self_attn.q_proj.weight", "model.layers.0.post_attention_layernorm.weight"},
       {"model.embed_tokens.weight", "model.embed_tokens.weight"}});
}

TEST_CASE("llama: activation recompute gives bitwise-equal gradients and loss in less memory") {
  ModelOptions recompute;
  recompute.recompute = true;
  Llama stored = tiny_model();
  Llama recomputed = tiny_model(recompute);
  language_model_tests::check_recompute_bitwise(stored, recomputed, lively_parameters(stored),
                                                token_batch(kExamples, 4), token_batch(kExamples, 5));

  ModelOptions stored_options;
  stored_options.max_examples = recompute.max_examples = kExamples;
  const trainctl::ModelSpec spec{tiny_spec()};
  CHECK(trainctl::llama_footprint(spec, recompute).activation_bytes <
        trainctl::llama_footprint(spec, stored_options).activation_bytes);
}

TEST_CASE("llama: bf16 GEMMs give a loss near fp32's but not equal to it") {
  ModelOptions bf16;
  bf16.precision = trainctl::Precision::kBf16;
  Llama fp32_model = tiny_model();
  Llama bf16_model = tiny_model(bf16);
  language_model_tests::check_bf16_near_fp32(fp32_model, bf16_model, lively_parameters(fp32_model),
                                             token_batch(kExamples, 6));
}

TEST_CASE("llama: next_token_logits of each prefix gives evaluate's token losses and argmax hits") {
  // Causal, and RoPE's angles depend on the position alone.
  Llama model = tiny_model();
  upload(model, lively_parameters(model));
  language_model_tests::check_next_token_logits(model, token_batch(1, 8));
}

TEST_CASE("llama: init is deterministic and Hugging Face's (std 0.02, RMSNorm weights 1)") {
  Llama a = tiny_model(), b = tiny_model(), c = tiny_model();
  a.init_parameters(11);
  b.init_parameters(11);
  c.init_parameters(12);
  const std::vector<float> first = download(a.parameters(), a.parameter_count());
  CHECK(first == download(b.parameters(), b.parameter_count()));
  CHECK(first != download(c.parameters(), c.parameter_count()));
  double sum = 0.0, sum_squares = 0.0;
  int64_t count = 0;
  for (const ParameterSlice& slice : a.parameter_layout()) {
    const auto begin = first.begin() + slice.offset;
    if (slice.shape.size() == 1) {
      CAPTURE(slice.name);
      CHECK(std::all_of(begin, begin + slice.count, [](float value) { return value == 1.0f; }));
      continue;
    }
    for (auto value = begin; value != begin + slice.count; ++value) {
      sum += *value;
      sum_squares += static_cast<double>(*value) * *value;
      ++count;
    }
  }
  const double mean = sum / static_cast<double>(count);
  const double std = std::sqrt(sum_squares / static_cast<double>(count) - mean * mean);
  MESSAGE(fmt::format("init std of the matrices: {:.5f} (0.02)", std));
  CHECK(std::abs(std - 0.02) < 0.002);
}

// transformers' rule in double: the result must be the float computation's to float rounding.
TEST_CASE("llama: RoPE's inverse frequencies are theta^(-2i/d), with llama3's scaling where asked") {
  LlamaSpec spec = tiny_spec();
  spec.head_dim = 64;
  spec.rope_theta = 500000.0;
  const auto definition = [&](int64_t i) { return std::pow(spec.rope_theta, -2.0 * static_cast<double>(i) / 64.0); };
  std::vector<float> plain = trainctl::llama_inverse_frequencies(spec);
  REQUIRE(plain.size() == 32);
  for (int64_t i = 0; i < 32; ++i) CHECK(std::abs(plain[i] / definition(i) - 1.0) < 1e-6);

  // Llama 3.2's: wavelengths below 8192 / 4 kept, above 8192 / 1 divided by 32, between blended.
  spec.rope_scaling = trainctl::Llama3RopeScaling{32.0, 1.0, 4.0, 8192};
  const std::vector<float> scaled = trainctl::llama_inverse_frequencies(spec);
  int kept = 0, divided = 0, blended = 0;
  for (int64_t i = 0; i < 32; ++i) {
    const double frequency = definition(i), wavelength = 2.0 * std::numbers::pi / frequency;
    double expected = frequency;
    if (wavelength > 8192.0) {
      expected = frequency / 32.0;
      ++divided;
    } else if (wavelength >= 2048.0) {
      const double smooth = (8192.0 / wavelength - 1.0) / (4.0 - 1.0);
      expected = (1.0 - smooth) * frequency / 32.0 + smooth * frequency;
      ++blended;
    } else {
      ++kept;
    }
    CAPTURE(i);
    CHECK(std::abs(scaled[i] / expected - 1.0) < 1e-5);
  }
  MESSAGE(fmt::format("llama3 scaling: {} frequencies kept, {} blended, {} divided", kept, blended, divided));
  CHECK(kept > 0);
  CHECK(blended > 0);
  CHECK(divided > 0);
}

TEST_CASE("llama: a device without the rope family is refused before building, naming it") {
  trainctl::Device holed = cpu();
  holed.name = "holed";
  holed.rope = std::nullopt;
  const trainctl::ModelSpec spec{tiny_spec()};
  CHECK_THROWS_WITH_AS(trainctl::build_model(spec, holed, {}),
                       "model.kind = \"llama\" needs the rope ops, which device \"holed\" does not have yet",
                       trainctl::ModelInputError);
  CHECK_NOTHROW(trainctl::require_op_families(spec, cpu()));
}
