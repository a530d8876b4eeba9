// trainctl data synth: a learnable synthetic classification dataset, from a seed. Each class is
// a mixture of three Gaussian blobs in feature space, so that a linear model cannot fit it
// perfectly but a small MLP can.
// trainctl data tokenize: text files as llm.c token files, with a byte-level tokenizer (token =
// byte value, so vocab_size = 256 suffices) for demos and tests that download nothing, or with
// a Hugging Face tokenizer (data/tokenize_files.h), in the format its vocabulary needs.
// trainctl data decode: a token file as text again.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <span>

#include <fmt/format.h>

#include "commands.h"
#include "batch.h"
#include "classification_file.h"
#include "errors.h"
#include "rng.h"
#include "token_file.h"
#include "tokenizer.h"
#include "data/tokenize_files.h"

namespace trainctl {

namespace {
constexpr int kBlobsPerClass = 3;
// Centres this close (in units of the unit noise) make classes overlap, so the loss stays above zero.
constexpr double kCentreSpread = 0.3;

ClassificationData synthesize(int64_t samples, int64_t features, int64_t classes, uint64_t seed,
                              uint64_t sample_stream) {
  // The blob centres depend on the seed alone, so a validation set made with the same seed
  // (and another stream) comes from the same distribution.
  Rng centre_rng(seed, kSyntheticDataStream);
  std::vector<float> centres(static_cast<size_t>(classes * kBlobsPerClass * features));
  for (float& value : centres) value = static_cast<float>(kCentreSpread * centre_rng.normal());

  Rng rng(seed, sample_stream);
  ClassificationData data;
  data.samples = samples;
  data.features = features;
  data.x.resize(static_cast<size_t>(samples * features));
  data.y.resize(static_cast<size_t>(samples));
  for (int64_t i = 0; i < samples; ++i) {
    const auto label = static_cast<int32_t>(rng.below(static_cast<uint64_t>(classes)));
    const auto blob = static_cast<int64_t>(label) * kBlobsPerClass + static_cast<int64_t>(rng.below(kBlobsPerClass));
    data.y[static_cast<size_t>(i)] = label;
    for (int64_t f = 0; f < features; ++f)
      data.x[static_cast<size_t>(i * features + f)] =
          centres[static_cast<size_t>(blob * features + f)] + static_cast<float>(rng.normal());
  }
  return data;
}

// Appends the bytes of `path` to `tokens`, one token each.
void append_byte_tokens(const std::string& path, std::vector<uint16_t>& tokens) {
  std::ifstream in = open_input_file(path);
  const std::string bytes(std::istreambuf_iterator<char>(in), {});
  for (const unsigned char byte : bytes) tokens.push_back(byte);
}

struct TokenizeOptions {
  std::vector<std::string> inputs;
  std::string out, val_out, tokenizer;
  double val_fraction = 0.1;
  std::string documents = "files";
  int threads = 0;  // the usable cores
  size_t chunk_bytes = TokenizeFilesOptions{}.chunk_bytes;
  int64_t shard_tokens = 0;  // one file
  bool special = false, no_bos_eos = false;
};

// The last val_fraction of `total` tokens, for --val-out; none without it.
int64_t validation_tokens(int64_t total, const TokenizeOptions& options) {
  if (options.val_out.empty()) return 0;
  const int64_t val_tokens = std::llround(static_cast<double>(total) * options.val_fraction);
  if (val_tokens == 0 || val_tokens == total)
    throw UsageError(fmt::format("{} tokens cannot be split at --val-fraction {}: one file would be empty", total,
                                 options.val_fraction));
  return val_tokens;
}

// An output file may name a folder that does not exist yet (`-o demo-data/train.bin` in a fresh
// checkout): it is made as the option is read.
CLI::Option* creates_parent_folder(CLI::Option* output) {
  return output->each([](const std::string& path) {
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent);
  });
}

void tokenize_bytes(const TokenizeOptions& options) {
  std::vector<uint16_t> tokens;
  for (const std::string& input : options.inputs) append_byte_tokens(input, tokens);
  const auto total = static_cast<int64_t>(tokens.size());
  const int64_t val_tokens = validation_tokens(total, options);
  const std::span<const uint16_t> all(tokens);
  write_token_file(options.out, all.first(static_cast<size_t>(total - val_tokens)));
  fmt::print("wrote {} ({} tokens)\n", options.out, total - val_tokens);
  if (val_tokens == 0) return;
  write_token_file(options.val_out, all.last(static_cast<size_t>(val_tokens)));
  fmt::print("wrote {} ({} tokens)\n", options.val_out, val_tokens);
}

void tokenize_text(const TokenizeOptions& options) {
  const Tokenizer tokenizer = Tokenizer::load(options.tokenizer);
  const TokenFormat format = token_format_for(tokenizer.vocab_size());
  TokenOutput out(options.out, format, options.shard_tokens);
  tokenize_files(tokenizer, options.inputs,
                 {options.documents == "lines" ? DocumentUnit::kLine : DocumentUnit::kFile,
                  options.threads > 0 ? options.threads : usable_cores(), options.chunk_bytes, options.special,
                  !options.no_bos_eos},
                 out);
  TokenFileWriter& train = out.current();
  const int64_t val_tokens = validation_tokens(train.count(), options);
  std::optional<TokenFileWriter> val;
  if (val_tokens > 0) train.move_last_to(val_tokens, val.emplace(options.val_out, format));
  out.finish();
  for (const auto& file : out.files()) fmt::print("wrote {} ({} tokens)\n", file->path(), file->count());
  if (!val) return;
  val->finish();
  fmt::print("wrote {} ({} tokens)\n", options.val_out, val->count());
}

void add_tokenize_command(CLI::App& data) {
  auto* tokenize = data.add_subcommand(
      "tokenize", "write text files as llm.c token files: one token per byte (vocab_size 256), or a tokenizer's tokens");
  auto options = std::make_shared<TokenizeOptions>();
  tokenize->add_option("inputs", options->inputs, "input files, concatenated in this order")->type_name(path_kind::kFile)->required();
  creates_parent_folder(tokenize->add_option("-o,--out", options->out, "training token file (with --shard-tokens, the shards' name)"))
      ->type_name(path_kind::kFile)
      ->required();
  auto* val_out =
      creates_parent_folder(tokenize->add_option("--val-out", options->val_out, "also write a validation token file"))
          ->type_name(path_kind::kFile);
  tokenize->add_option("--val-fraction", options->val_fraction, "the last fraction of the tokens that goes to --val-out")
      ->capture_default_str()
      ->needs(val_out);
  auto* tokenizer = tokenize->add_option(
      "--tokenizer", options->tokenizer,
      "a Hugging Face tokenizer: tokenizer.json, or a directory with it or with GPT-2's vocab.json and merges.txt; "
      "each document between the tokens its post-processor adds (GPT-2's: <|endoftext|> before it)")->type_name(path_kind::kPath);
  tokenize->add_option("--documents", options->documents, "with --tokenizer: a document is each input file or each non-empty line")
      ->check(CLI::IsMember({"files", "lines"}))
      ->capture_default_str()
      ->needs(tokenizer);
  tokenize->add_option("--threads", options->threads, "with --tokenizer: encoding threads (default: the cores this process may use)")
      ->check(CLI::Range(1, 4096))
      ->needs(tokenizer);
  tokenize->add_option("--chunk-bytes", options->chunk_bytes,
                       "with --tokenizer: the text each thread encodes at a time (about 3x this in memory per thread)")
      ->check(CLI::Range(size_t{1}, size_t{1} << 30))
      ->capture_default_str()
      ->needs(tokenizer);
  tokenize->add_option("--shard-tokens", options->shard_tokens,
                       "with --tokenizer: write shards OUT's stem_000000 on, each ended at the first document start "
                       "after this many tokens")
      ->check(CLI::Range(int64_t{1}, int64_t{std::numeric_limits<int32_t>::max()}))
      ->needs(tokenizer)
      ->excludes(val_out);
  tokenize->add_flag("--special", options->special,
                     "with --tokenizer: text that spells an added token (<|begin_of_text|>, <s>, ...) is that token")
      ->needs(tokenizer);
  tokenize->add_flag("--no-bos-eos", options->no_bos_eos,
                     "with --tokenizer: no tokens around the documents (BOS, EOS, GPT-2's <|endoftext|>)")
      ->needs(tokenizer);
  tokenize->callback([options] {
    if (!(options->val_fraction > 0.0 && options->val_fraction < 1.0))
      throw UsageError(fmt::format("--val-fraction {} is not in (0, 1)", options->val_fraction));
    if (options->tokenizer.empty()) {
      tokenize_bytes(*options);
    } else {
      tokenize_text(*options);
    }
  });
}

// Prints the tokens of a token file as the bytes they stand for, a block at a time.
void add_decode_command(CLI::App& data) {
  auto* decode = data.add_subcommand("decode", "print a token file as text: bytes, or a tokenizer's tokens with --tokenizer");
  struct Options {
    std::string file, tokenizer;
  };
  auto options = std::make_shared<Options>();
  decode->add_option("file", options->file, "token file")->type_name(path_kind::kFile)->required();
  decode->add_option("--tokenizer", options->tokenizer,
                     "tokenizer.json, or a directory with it or with vocab.json and merges.txt (without: one byte per token)")
      ->type_name(path_kind::kPath);
  decode->callback([options] {
    const std::vector<uint32_t> tokens = read_token_file(options->file, int64_t{1} << 32);
    std::optional<Tokenizer> tokenizer;
    if (!options->tokenizer.empty()) tokenizer = Tokenizer::load(options->tokenizer);
    const int64_t vocab_size = tokenizer ? tokenizer->vocab_size() : 256;
    const auto too_large = std::find_if(tokens.begin(), tokens.end(), [&](uint32_t token) { return token >= vocab_size; });
    if (too_large != tokens.end()) {
      const std::string position = fmt::format("{}: token {} at position {}", options->file, *too_large, too_large - tokens.begin());
      throw DataError(tokenizer ? fmt::format("{} is not below the vocab_size {} of the tokenizer {}", position,
                                              vocab_size, options->tokenizer)
                                : fmt::format("{} is not a byte (a tokenizer's token file needs --tokenizer)", position));
    }
    constexpr size_t kBlockTokens = size_t{1} << 16;
    const std::span<const uint32_t> all(tokens);
    for (size_t first = 0; first < all.size(); first += kBlockTokens) {
      const std::span<const uint32_t> block = all.subspan(first, std::min(kBlockTokens, all.size() - first));
      std::string text;
      if (tokenizer) {
        // Whether the block starts a document, as decoding the whole would see it.
        const std::vector<uint32_t>& openers = tokenizer->post_processor_tokens().before;
        text = tokenizer->decode(block, first == 0 || std::find(openers.begin(), openers.end(), all[first - 1]) != openers.end());
      } else {
        text.assign(block.begin(), block.end());
      }
      if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size())
        throw Failure(fmt::format("cannot write the text of {} to stdout", options->file));
    }
  });
}
}  // namespace

void add_data_command(CLI::App& app) {
  auto* data = app.add_subcommand("data", "datasets");
  data->require_subcommand(1);
  auto* synth = data->add_subcommand("synth", "write a synthetic classification dataset (HDF5 x [N,D], y [N])");
  struct Options {
    std::string out, val_out;
    int64_t samples = 8192, val_samples = 1024, features = 32, classes = 4;
    uint64_t seed = 0;
  };
  auto options = std::make_shared<Options>();
  creates_parent_folder(synth->add_option("-o,--out", options->out, "training set file"))
      ->type_name(path_kind::kFile)
      ->required();
  synth->add_option("--samples", options->samples, "training samples")->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{1} << 31));
  synth->add_option("--features", options->features, "features per sample")->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  synth->add_option("--classes", options->classes, "classes")->capture_default_str()->check(CLI::Range(int64_t{2}, int64_t{1} << 20));
  synth->add_option("--seed", options->seed, "seed")->capture_default_str();
  creates_parent_folder(
      synth->add_option("--val-out", options->val_out, "also write a validation set from the same distribution"))
      ->type_name(path_kind::kFile);
  synth->add_option("--val-samples", options->val_samples, "validation samples")->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{1} << 31));
  synth->callback([options] {
    write_classification_file(options->out, synthesize(options->samples, options->features, options->classes,
                                                       options->seed, kSyntheticDataStream + 1));
    fmt::print("wrote {} ({} samples, {} features, {} classes, seed {})\n", options->out, options->samples,
               options->features, options->classes, options->seed);
    if (options->val_out.empty()) return;
    write_classification_file(options->val_out, synthesize(options->val_samples, options->features, options->classes,
                                                           options->seed, kSyntheticDataStream + 2));
    fmt::print("wrote {} ({} samples)\n", options->val_out, options->val_samples);
  });
  add_tokenize_command(*data);
  add_decode_command(*data);
}

}  // namespace trainctl
