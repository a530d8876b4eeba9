// Tests for token data (data/token_file.cpp, data/token_source.cpp, `trainctl data tokenize` in
// cli/commands/cmd_data.cpp): both of llm.c's formats (GPT-2's uint16, Llama 3's uint32) written
// and read back; the exact errors for a wrong magic, a wrong version for the magic, a file size
// that does not match the header, a token >= vocab_size, a token that does not fit the format,
// a shard shorter than block_size + 1 and a pattern that matches nothing; the windows of two
// shards, listed in sorted order and in either format, mapped to tokens and targets; the
// streaming writer and its validation split; and tokenize's round trip, split and errors.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "commands.h"
#include "config_files.h"
#include "error_message.h"
#include "errors.h"
#include "token_file.h"
#include "token_source.h"

using config_files::TempDir;
using trainctl::DataError;
using trainctl::TokenFormat;

namespace {

std::string path_in(const TempDir& dir, const std::string& name) { return (dir.path() / name).string(); }

// A token file written byte for byte, with any header (write_token_file writes valid ones only).
template <class Token>
std::string write_raw(const TempDir& dir, const std::string& name, int32_t magic, int32_t version, int32_t count,
                      const std::vector<Token>& tokens) {
  std::array<int32_t, trainctl::kTokenFileHeaderInts> header{};
  header[0] = magic;
  header[1] = version;
  header[2] = count;
  const std::string path = path_in(dir, name);
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(header.data()), sizeof(header));
  out.write(reinterpret_cast<const char*>(tokens.data()), static_cast<std::streamsize>(tokens.size() * sizeof(Token)));
  return path;
}

template <class Token>
std::string write_valid(const TempDir& dir, const std::string& name, const std::vector<Token>& tokens) {
  const std::string path = path_in(dir, name);
  trainctl::write_token_file(path, std::span<const Token>(tokens));
  return path;
}

std::string data_error(const std::function<void()>& action) {
  return error_message<DataError>([&] { action(); });
}

template <class Token = uint16_t>
std::vector<Token> counting(uint32_t first, size_t count) {
  std::vector<Token> tokens(count);
  for (size_t i = 0; i < count; ++i) tokens[i] = static_cast<Token>(first + i);
  return tokens;
}

template <class Token>
std::vector<uint32_t> widened(const std::vector<Token>& tokens) {
  return {tokens.begin(), tokens.end()};
}

}  // namespace

TEST_CASE("a token file of either format round-trips through write and read, leaving no temporary") {
  CHECK(trainctl::token_format_for(256) == TokenFormat::kUint16);
  CHECK(trainctl::token_format_for(65536) == TokenFormat::kUint16);
  CHECK(trainctl::token_format_for(65537) == TokenFormat::kUint32);
  CHECK(trainctl::token_format_for(128256) == TokenFormat::kUint32);

  TempDir dir;
  const std::vector<uint16_t> narrow = {0, 1, 255, 256, 50256, 65535};
  const std::string gpt2 = write_valid(dir, "gpt2.bin", narrow);
  CHECK(trainctl::read_token_file(gpt2, 65536) == widened(narrow));
  CHECK(std::filesystem::file_size(gpt2) == 1024 + 2 * narrow.size());
  CHECK(trainctl::read_token_header(gpt2).format == TokenFormat::kUint16);
  CHECK(trainctl::read_token_header(gpt2).count == 6);

  const std::vector<uint32_t> wide = {0, 65535, 65536, 128000, 128255, 4000000000U};
  const std::string llama3 = write_valid(dir, "llama3.bin", wide);
  CHECK(trainctl::read_token_file(llama3, int64_t{1} << 32) == wide);
  CHECK(std::filesystem::file_size(llama3) == 1024 + 4 * wide.size());
  const trainctl::TokenFileHeader header = trainctl::read_token_header(llama3);
  CHECK(header.format == TokenFormat::kUint32);
  CHECK(header.count == 6);
  // llm.c's header, as its data_common.py writes it: magic 20240801, version 7, the count.
  std::array<int32_t, 3> fields{};
  std::ifstream(llama3, std::ios::binary).read(reinterpret_cast<char*>(fields.data()), sizeof(fields));
  CHECK(fields == std::array<int32_t, 3>{20240801, 7, 6});
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path()), {}) == 2);
}

TEST_CASE("a token file written as its tokens come holds them all, and can hand its last ones to another") {
  for (const TokenFormat format : {TokenFormat::kUint16, TokenFormat::kUint32}) {
    CAPTURE(trainctl::token_format_name(format));
    TempDir dir;
    const std::string train = path_in(dir, "train.bin"), val = path_in(dir, "val.bin");
    {
      trainctl::TokenFileWriter unfinished(train, format);
      unfinished.append(counting(0, 5));
    }
    CHECK(std::filesystem::is_empty(dir.path()));

    trainctl::TokenFileWriter train_writer(train, format);
    trainctl::TokenFileWriter val_writer(val, format);
    train_writer.append(counting(0, 5));
    train_writer.append(std::vector<uint32_t>{});
    train_writer.append(counting<uint32_t>(5, 7));  // uint32 tokens into either format
    val_writer.append(counting(100, 2));
    CHECK(train_writer.count() == 12);
    train_writer.move_last_to(3, val_writer);
    train_writer.append(counting(200, 1));
    train_writer.finish();
    val_writer.finish();
    std::vector<uint32_t> expected_train = counting<uint32_t>(0, 9);
    expected_train.push_back(200);
    CHECK(trainctl::read_token_file(train, 65536) == expected_train);
    CHECK(trainctl::read_token_file(val, 65536) == std::vector<uint32_t>{100, 101, 9, 10, 11});
    CHECK(trainctl::read_token_header(val).format == format);
    CHECK(std::distance(std::filesystem::directory_iterator(dir.path()), {}) == 2);
  }
  TempDir dir;
  trainctl::TokenFileWriter narrow(path_in(dir, "narrow.bin"), TokenFormat::kUint16);
  CHECK(data_error([&] { narrow.append(std::vector<uint32_t>{7, 65536}); }) ==
        fmt::format("{}: token 65536 does not fit GPT-2's uint16 format", path_in(dir, "narrow.bin")));
}

TEST_CASE("bad token files are rejected with a message naming the file and the problem") {
  TempDir dir;
  const std::vector<uint16_t> tokens = counting(0, 8);

  std::string path = write_raw(dir, "magic.bin", 20240521, 1, 8, tokens);
  CHECK(data_error([&] { trainctl::read_token_file(path, 256); }) ==
        fmt::format("{}: not a token file: magic number 20240521, expected 20240520 (GPT-2's uint16 format) or "
                    "20240801 (Llama 3's uint32 format)", path));

  path = write_raw(dir, "version.bin", 20240520, 2, 8, tokens);
  CHECK(data_error([&] { trainctl::read_token_file(path, 256); }) ==
        fmt::format("{}: token file version 2, expected 1 (GPT-2's uint16 format)", path));
  // Each magic with its own version only: Llama 3's version under GPT-2's magic, and the reverse.
  path = write_raw(dir, "mixed.bin", 20240520, 7, 8, tokens);
  CHECK(data_error([&] { trainctl::read_token_file(path, 256); }) ==
        fmt::format("{}: token file version 7, expected 1 (GPT-2's uint16 format)", path));
  path = write_raw(dir, "mixed32.bin", 20240801, 1, 4, tokens);
  CHECK(data_error([&] { trainctl::read_token_file(path, 256); }) ==
        fmt::format("{}: token file version 1, expected 7 (Llama 3's uint32 format)", path));

  path = write_raw(dir, "short.bin", 20240520, 1, 9, tokens);
  CHECK(data_error([&] { trainctl::read_token_file(path, 256); }) ==
        fmt::format("{}: file size 1040 bytes does not match the header's token count 9 (1042 bytes)", path));

  path = write_raw(dir, "long.bin", 20240520, 1, 7, tokens);
  CHECK(data_error([&] { trainctl::read_token_file(path, 256); }) ==
        fmt::format("{}: file size 1040 bytes does not match the header's token count 7 (1038 bytes)", path));
  // 8 uint16 tokens are 4 uint32 ones, not 8.
  path = write_raw(dir, "wide_count.bin", 20240801, 7, 8, tokens);
  CHECK(data_error([&] { trainctl::read_token_file(path, 256); }) ==
        fmt::format("{}: file size 1040 bytes does not match the header's token count 8 (1056 bytes)", path));

  path = path_in(dir, "tiny.bin");
  std::ofstream(path, std::ios::binary) << "12345";
  CHECK(data_error([&] { trainctl::read_token_file(path, 256); }) ==
        fmt::format("{}: 5 bytes, shorter than the 1024-byte header of a token file", path));

  path = write_valid(dir, "vocab.bin", std::vector<uint16_t>{3, 255, 256, 7, 300});
  CHECK(data_error([&] { trainctl::read_token_file(path, 256); }) ==
        fmt::format("{}: token 256 at position 2 is not below model.vocab_size = 256", path));
  path = write_valid(dir, "vocab32.bin", std::vector<uint32_t>{3, 128000, 128256, 7});
  CHECK(data_error([&] { trainctl::read_token_file(path, 128256); }) ==
        fmt::format("{}: token 128256 at position 2 is not below model.vocab_size = 128256", path));
  CHECK(data_error([&] { trainctl::MappedTokenFile(path, 128256); }) ==
        fmt::format("{}: token 128256 at position 2 is not below model.vocab_size = 128256", path));

  path = path_in(dir, "missing.bin");
  CHECK(data_error([&] { trainctl::read_token_file(path, 256); }) ==
        fmt::format("cannot read token file {}: No such file or directory", path));
}

TEST_CASE("a shard shorter than block_size + 1 tokens is rejected") {
  TempDir dir;
  write_valid(dir, "a.bin", counting(0, 9));
  const std::string short_path = write_valid(dir, "b.bin", counting(0, 8));
  CHECK(data_error([&] { trainctl::TokenSource(path_in(dir, "*.bin"), 8, 256); }) ==
        fmt::format("{}: 8 tokens, fewer than model.block_size + 1 = 9", short_path));
  CHECK(trainctl::TokenSource(path_in(dir, "*.bin"), 7, 256).examples() == 2);
}

TEST_CASE("a pattern that matches nothing is an error naming the pattern") {
  TempDir dir;
  const std::string pattern = path_in(dir, "train_*.bin");
  CHECK(data_error([&] { trainctl::token_file_paths(pattern); }) == fmt::format("no file matches {}", pattern));
  // Without wildcards a pattern is its file, which the reader then reports missing.
  CHECK(trainctl::token_file_paths("train.bin") == std::vector<std::string>{"train.bin"});
}

TEST_CASE("shards are listed in sorted order, either format, and windows never cross them") {
  TempDir dir;
  // Written in reverse order: the listing, not the file system, decides the order. Shard b is in
  // Llama 3's format with tokens past 65535; shard a in GPT-2's.
  const std::string second = write_valid(dir, "shard_b.bin", counting<uint32_t>(70000, 8));  // (8 - 1) / 3 = 2 windows
  const std::string first = write_valid(dir, "shard_a.bin", counting(100, 10));  // (10 - 1) / 3 = 3 windows
  const std::string pattern = path_in(dir, "shard_?.bin");
  CHECK(trainctl::token_file_paths(pattern) == std::vector<std::string>{first, second});
  CHECK(data_error([&] { trainctl::TokenSource(pattern, 3, 65536); }) ==
        fmt::format("{}: token 70000 at position 0 is not below model.vocab_size = 65536", second));

  const trainctl::TokenSource source(pattern, 3, 70008);
  CHECK(source.examples() == 5);
  CHECK(source.describe() == pattern);
  trainctl::Batch batch;
  source.gather({4, 0, 2, 3}, batch);
  CHECK(batch.examples == 4);
  CHECK(batch.tensor("tokens").shape == std::vector<int64_t>{4, 3});
  CHECK(batch.tensor("targets").shape == std::vector<int64_t>{4, 3});
  // Example 4: shard b's window 1 (tokens 3..6); 0: shard a's window 0; 2: shard a's window 2
  // (tokens 6..9, its last); 3: shard b's window 0.
  const std::vector<int32_t> tokens = {70003, 70004, 70005, 100, 101, 102, 106, 107, 108, 70000, 70001, 70002};
  const std::vector<int32_t> targets = {70004, 70005, 70006, 101, 102, 103, 107, 108, 109, 70001, 70002, 70003};
  CHECK(batch.tensor("tokens").ints == tokens);
  CHECK(batch.tensor("targets").ints == targets);
}

namespace {

// Runs `trainctl data tokenize ARGS...` through the CLI's own parser.
void tokenize(std::vector<std::string> args) {
  CLI::App app;
  trainctl::add_data_command(app);
  args.insert(args.begin(), {"data", "tokenize"});
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments last first
  app.parse(args);
}

template <class Error>
std::string tokenize_error(const std::vector<std::string>& args) {
  return error_message<Error>([&] { tokenize(args); });
}

}  // namespace

TEST_CASE("data tokenize writes the inputs' bytes in order, the last fraction to the validation file") {
  TempDir dir;
  const std::string a = path_in(dir, "a.txt"), b = path_in(dir, "b.txt");
  const std::string a_bytes = "hello, ", b_bytes = std::string("w\xc3\xb6rld\x00\xff\n!!!!!!", 14);
  std::ofstream(a, std::ios::binary) << a_bytes;
  std::ofstream(b, std::ios::binary) << b_bytes;
  const std::string train = path_in(dir, "train.bin"), val = path_in(dir, "val.bin");
  tokenize({a, b, "-o", train, "--val-out", val, "--val-fraction", "0.25"});

  std::vector<uint32_t> expected;
  for (const unsigned char byte : a_bytes + b_bytes) expected.push_back(byte);
  REQUIRE(expected.size() == 21);
  const std::vector<uint32_t> train_tokens = trainctl::read_token_file(train, 256);
  const std::vector<uint32_t> val_tokens = trainctl::read_token_file(val, 256);
  // round(21 * 0.25) = 5 tokens for validation.
  CHECK(train_tokens == std::vector<uint32_t>(expected.begin(), expected.end() - 5));
  CHECK(val_tokens == std::vector<uint32_t>(expected.end() - 5, expected.end()));
  CHECK(trainctl::read_token_header(train).format == TokenFormat::kUint16);

  const std::string whole = path_in(dir, "whole.bin");
  tokenize({a, b, "-o", whole});
  CHECK(trainctl::read_token_file(whole, 256) == expected);
}

TEST_CASE("data tokenize rejects bad arguments and unreadable inputs") {
  TempDir dir;
  const std::string input = path_in(dir, "in.txt"), out = path_in(dir, "out.bin"), val = path_in(dir, "val.bin");
  std::ofstream(input, std::ios::binary) << "ab";
  CHECK(tokenize_error<CLI::RequiresError>({input, "-o", out, "--val-fraction", "0.2"}) ==
        "--val-fraction requires --val-out");
  CHECK(tokenize_error<trainctl::UsageError>({input, "-o", out, "--val-out", val, "--val-fraction", "1"}) ==
        "--val-fraction 1 is not in (0, 1)");
  CHECK(tokenize_error<trainctl::UsageError>({input, "-o", out, "--val-out", val, "--val-fraction", "0"}) ==
        "--val-fraction 0 is not in (0, 1)");
  CHECK(tokenize_error<trainctl::UsageError>({input, "-o", out, "--val-out", val}) ==
        "2 tokens cannot be split at --val-fraction 0.1: one file would be empty");
  const std::string missing = path_in(dir, "missing.txt");
  CHECK(tokenize_error<trainctl::UsageError>({input, missing, "-o", out}) ==
        fmt::format("cannot read {}: No such file or directory", missing));
  CHECK(tokenize_error<trainctl::UsageError>({dir.path().string(), "-o", out}) ==
        fmt::format("cannot read {}: it is a directory", dir.path().string()));
  CHECK_FALSE(std::filesystem::exists(out));
}
