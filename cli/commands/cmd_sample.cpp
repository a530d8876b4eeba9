// trainctl sample RUN_OR_CKPT --prompt TEXT: continues the prompt with a checkpoint's language
// model on the CPU and prints the prompt followed by the generated text. The tokenizer is the one
// the run trained with (data.tokenizer, which checkpoints record with its content hash), or one
// given by --tokenizer, which must have the recorded hash; a run without one trained on bytes
// (token = byte value), as `trainctl data tokenize` writes them. Temperature 0 is greedy
// decoding (argmax, ties to the lowest token id); otherwise tokens are drawn from
// softmax(logits / temperature), optionally over the top_k most likely, with common/rng.h from
// --seed, so a sample is reproducible.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <optional>

#include <fmt/format.h>

#include "bad_input.h"
#include "commands.h"
#include "errors.h"
#include "rng.h"
#include "runs/stored_checkpoint.h"
#include "tokenizer.h"

namespace trainctl {

namespace {

constexpr int64_t kByteTokens = 256;

struct SampleOptions {
  std::string path, prompt, tokenizer;
  int64_t tokens = 200;
  double temperature = 1.0;
  int64_t top_k = 0;  // 0: every token
  uint64_t seed = 0;
};

std::unique_ptr<LanguageModel> load_language_model(const StoredCheckpoint& stored) {
  std::unique_ptr<Model> model = load_model_on_cpu(stored, ModelOptions{});
  auto* language_model = dynamic_cast<LanguageModel*>(model.get());
  if (language_model == nullptr)
    throw BadInput(fmt::format("{} holds model.kind = {}; sample needs a language model", stored.path,
                               stored.spec.model.kind()));
  model.release();
  return std::unique_ptr<LanguageModel>(language_model);
}

// The next token among ids [0, vocab).
int32_t choose_token(const float* logits, int32_t vocab, const SampleOptions& options, Rng& rng) {
  if (options.temperature == 0.0) {
    int32_t best = 0;
    for (int32_t id = 1; id < vocab; ++id)
      if (logits[id] > logits[best]) best = id;
    return best;
  }
  std::vector<int32_t> ids(static_cast<size_t>(vocab));
  std::iota(ids.begin(), ids.end(), 0);
  if (options.top_k > 0 && options.top_k < vocab) {
    // The k largest logits, ties to the lower id; then back in id order, which the draw walks.
    std::nth_element(ids.begin(), ids.begin() + options.top_k, ids.end(), [logits](int32_t a, int32_t b) {
      return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
    });
    ids.resize(static_cast<size_t>(options.top_k));
    std::sort(ids.begin(), ids.end());
  }
  const float max_logit = logits[*std::max_element(ids.begin(), ids.end(), [logits](int32_t a, int32_t b) {
    return logits[a] < logits[b];
  })];
  std::vector<double> weights;
  for (int32_t id : ids) weights.push_back(std::exp((static_cast<double>(logits[id]) - max_logit) / options.temperature));
  const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
  const double draw = rng.unit() * total;
  double cumulative = 0.0;
  for (size_t i = 0; i < ids.size(); ++i) {
    cumulative += weights[i];
    if (draw < cumulative) return ids[i];
  }
  return ids.back();  // the draw fell in the rounding of the sum
}

// The tokenizer to decode with: --tokenizer's, which must be the recorded one where the run
// recorded one; else the recorded one, which must not have changed since; else none (bytes).
std::optional<Tokenizer> tokenizer_for(const StoredCheckpoint& stored, const std::string& given) {
  const CheckpointMeta& meta = stored.checkpoint.meta;
  if (!given.empty()) {
    Tokenizer tokenizer = Tokenizer::load(given);
    if (!meta.tokenizer_hash.empty() && tokenizer.content_hash() != meta.tokenizer_hash)
      throw BadInput(fmt::format("--tokenizer {}: its content hash {} is not {}, that of the tokenizer {} was trained "
                                 "with ({})",
                                 given, tokenizer.content_hash(), meta.tokenizer_hash, stored.path, meta.tokenizer_path));
    return tokenizer;
  }
  if (meta.tokenizer_hash.empty()) return std::nullopt;
  Tokenizer tokenizer = [&] {
    try {
      return Tokenizer::load(meta.tokenizer_path);
    } catch (const BadInput& error) {
      throw BadInput(fmt::format("{} was trained with the tokenizer {}, which cannot be read now ({}); give its copy "
                                 "with --tokenizer",
                                 stored.path, meta.tokenizer_path, error.what()));
    }
  }();
  if (tokenizer.content_hash() != meta.tokenizer_hash)
    throw BadInput(fmt::format("the tokenizer {} has changed since {} was trained with it (content hash {} then, {} "
                               "now); give the one it was trained with by --tokenizer",
                               meta.tokenizer_path, stored.path, meta.tokenizer_hash, tokenizer.content_hash()));
  return tokenizer;
}

void sample(const SampleOptions& options) {
  if (options.prompt.empty()) throw UsageError("--prompt is empty: sample continues a prompt of at least one byte");
  const StoredCheckpoint stored = load_stored_checkpoint(options.path);
  const std::unique_ptr<LanguageModel> model = load_language_model(stored);
  const std::optional<Tokenizer> tokenizer = tokenizer_for(stored, options.tokenizer);

  std::vector<int32_t> tokens;
  if (tokenizer) {
    // The prompt as the file's post-processor has a text begin (Llama 3's <|begin_of_text|>).
    tokens.assign(tokenizer->post_processor_tokens().before.begin(), tokenizer->post_processor_tokens().before.end());
    for (const uint32_t token : tokenizer->encode(options.prompt)) tokens.push_back(static_cast<int32_t>(token));
  } else {
    for (char byte : options.prompt) tokens.push_back(static_cast<unsigned char>(byte));
  }
  for (int32_t token : tokens)
    if (token >= model->vocab_size())
      throw UsageError(fmt::format("--prompt {} {} is not a token of the model in {} (vocab_size = {})",
                                   tokenizer ? "token" : "byte", token, stored.path, model->vocab_size()));
  // Only ids that decode can be printed: a larger vocabulary is sampled over the tokenizer's ids
  // (the first 256 without one).
  const auto candidates = static_cast<int32_t>(std::min(model->vocab_size(), tokenizer ? tokenizer->vocab_size() : kByteTokens));
  Rng rng(options.seed, kSampleStream);
  std::vector<float> logits(static_cast<size_t>(model->vocab_size()));
  fmt::print("{}", options.prompt);
  for (int64_t i = 0; i < options.tokens; ++i) {
    const int64_t length = std::min<int64_t>(static_cast<int64_t>(tokens.size()), model->context_size());
    model->next_token_logits(tokens.data() + tokens.size() - length, length, logits.data());
    const int32_t token = choose_token(logits.data(), candidates, options, rng);
    tokens.push_back(token);
    if (tokenizer) {
      const std::string_view bytes = tokenizer->token_bytes(static_cast<uint32_t>(token));
      std::fwrite(bytes.data(), 1, bytes.size(), stdout);
    } else {
      std::fputc(token, stdout);
    }
    std::fflush(stdout);
  }
  fmt::print("\n");
}

}  // namespace

void add_sample_command(CLI::App& app) {
  auto* command = app.add_subcommand("sample", "continue a prompt with a checkpoint's language model (CPU)");
  auto options = std::make_shared<SampleOptions>();
  command->add_option("path", options->path, "checkpoint file, or a run directory for its newest valid one")->type_name(path_kind::kPath)
      ->required();
  command->add_option("--prompt", options->prompt, "text to continue")->required();
  command->add_option("--tokenizer", options->tokenizer,
                      "tokenizer.json or tokenizer directory (default: the one the run trained with, if any; else bytes)")
      ->type_name(path_kind::kPath);
  command->add_option("--tokens", options->tokens, "tokens to generate")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
  command->add_option("--temperature", options->temperature, "softmax temperature; 0 is greedy")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 100.0));
  command->add_option("--top-k", options->top_k, "draw only among the K most likely tokens")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  command->add_option("--seed", options->seed, "seed of the draws")->capture_default_str();
  command->callback([options] { sample(*options); });
}

}  // namespace trainctl
