// Tests for token data (data/token_file.cpp, data/token_source.cpp, `trainctl data tokenize` in
// cli/commands/cmd_data.cpp): the exact errors for a wrong magic, a wrong version, a file size that does
// not match the header, a token >= vocab_size, a shard shorter than block_size + 1 and a pattern
// that matches nothing; a write/read round trip; the windows of two shards, listed in sorted
// order, mapped to tokens and targets; the streaming writer and its validation split; and
// tokenize's round trip, split and errors.
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
#include "errors.h"
#include "token_file.h"
#include "token_source.h"

using config_files::TempDir;
using trainctl::DataError;

namespace {

std::string path_in(const TempDir& dir, const std::string& name) { return (dir.path() / name).string(); }

// A token file written byte for byte, with any header (write_token_file writes valid ones only).
std::string write_raw(const TempDir& dir, const std::string& name, int32_t magic, int32_t version, int32_t count,
                      const std::vector<uint16_t>& tokens) {
  std::array<int32_t, trainctl::kTokenFileHeaderInts> header{};
  header[0] = magic;
  header[1] = version;
  header[2] = count;
  const std::string path = path_in(dir, name);
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(header.data()), sizeof(header));
  out.write(reinterpret_cast<const char*>(tokens.data()), static_cast<std::streamsize>(tokens.size() * sizeof(uint16_t)));
  return path;
}

std::string write_valid(const TempDir& dir, const std::string& name, const std::vector<uint16_t>& tokens) {
  const std::string path = path_in(dir, name);
  trainctl::write_token_file(path, tokens);
  return path;
}

std::string data_error(const std::function<void()>& action) {
  try {
    action();
  } catch (const DataError& error) {
    return error.what();
  }
  return "(no error)";
}

std::vector<uint16_t> counting(uint16_t first, size_t count) {
  std::vector<uint16_t> tokens(count);
  for (size_t i = 0; i < count; ++i) tokens[i] = static_cast<uint16_t>(first + i);
  return tokens;
}

}  // namespace

TEST_CASE("a token file round-trips through write and read, leaving no temporary") {
  TempDir dir;
  const std::vector<uint16_t> tokens = {0, 1, 255, 256, 50256, 65535};
  const std::string path = write_valid(dir, "tokens.bin", tokens);
  CHECK(trainctl::read_token_file(path, 65536) == tokens);
  CHECK(std::filesystem::file_size(path) == 1024 + 2 * tokens.size());
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path()), {}) == 1);
}

TEST_CASE("a token file written as its tokens come holds them all, and can hand its last ones to another") {
  TempDir dir;
  const std::string train = path_in(dir, "train.bin"), val = path_in(dir, "val.bin");
  {
    trainctl::TokenFileWriter unfinished(train);
    unfinished.append(counting(0, 5));
  }
  CHECK(std::filesystem::is_empty(dir.path()));

  trainctl::TokenFileWriter train_writer(train);
  trainctl::TokenFileWriter val_writer(val);
  train_writer.append(counting(0, 5));
  train_writer.append({});
  train_writer.append(counting(5, 7));
  val_writer.append(counting(100, 2));
  CHECK(train_writer.count() == 12);
  train_writer.move_last_to(3, val_writer);
  train_writer.append(counting(200, 1));
  train_writer.finish();
  val_writer.finish();
  std::vector<uint16_t> expected_train = counting(0, 9);
  expected_train.push_back(200);
  CHECK(trainctl::read_token_file(train, 65536) == expected_train);
  CHECK(trainctl::read_token_file(val, 65536) == std::vector<uint16_t>{100, 101, 9, 10, 11});
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path()), {}) == 2);
}

TEST_CASE("bad token files are rejected with a message naming the file and the problem") {
  TempDir dir;
  const std::vector<uint16_t> tokens = counting(0, 8);

  std::string path = write_raw(dir, "magic.bin", 20240521, 1, 8, tokens);
  CHECK(data_error([&] { trainctl::read_token_file(path, 256); }) ==
        fmt::format("{}: not a token file: magic number 20240521, expected 20240520", path));

  path = write_raw(dir, "version.bin", 20240520, 2, 8, tokens);
  CHECK(data_error([&] { trainctl::read_token_file(path, 256); }) ==
        fmt::format("{}: token file version 2, expected 1", path));

  path = write_raw(dir, "short.bin", 20240520, 1, 9, tokens);
  CHECK(data_error([&] { trainctl::read_token_file(path, 256); }) ==
        fmt::format("{}: file size 1040 bytes does not match the header's token count 9 (1042 bytes)", path));

  path = write_raw(dir, "long.bin", 20240520, 1, 7, tokens);
  CHECK(data_error([&] { trainctl::read_token_file(path, 256); }) ==
        fmt::format("{}: file size 1040 bytes does not match the header's token count 7 (1038 bytes)", path));

  path = path_in(dir, "tiny.bin");
  std::ofstream(path, std::ios::binary) << "12345";
  CHECK(data_error([&] { trainctl::read_token_file(path, 256); }) ==
        fmt::format("{}: 5 bytes, shorter than the 1024-byte header of a token file", path));

  path = write_valid(dir, "vocab.bin", {3, 255, 256, 7, 300});
  CHECK(data_error([&] { trainctl::read_token_file(path, 256); }) ==
        fmt::format("{}: token 256 at position 2 is not below model.vocab_size = 256", path));

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

TEST_CASE("shards are listed in sorted order and windows never cross them") {
  TempDir dir;
  // Written in reverse order: the listing, not the file system, decides the order.
  const std::string second = write_valid(dir, "shard_b.bin", counting(200, 8));  // (8 - 1) / 3 = 2 windows
  const std::string first = write_valid(dir, "shard_a.bin", counting(100, 10));  // (10 - 1) / 3 = 3 windows
  const std::string pattern = path_in(dir, "shard_?.bin");
  CHECK(trainctl::token_file_paths(pattern) == std::vector<std::string>{first, second});

  const trainctl::TokenSource source(pattern, 3, 256);
  CHECK(source.examples() == 5);
  CHECK(source.describe() == pattern);
  trainctl::Batch batch;
  source.gather({4, 0, 2, 3}, batch);
  CHECK(batch.examples == 4);
  CHECK(batch.tensor("tokens").shape == std::vector<int64_t>{4, 3});
  CHECK(batch.tensor("targets").shape == std::vector<int64_t>{4, 3});
  // Example 4: shard b's window 1 (tokens 3..6); 0: shard a's window 0; 2: shard a's window 2
  // (tokens 6..9, its last); 3: shard b's window 0.
  const std::vector<int32_t> tokens = {203, 204, 205, 100, 101, 102, 106, 107, 108, 200, 201, 202};
  const std::vector<int32_t> targets = {204, 205, 206, 101, 102, 103, 107, 108, 109, 201, 202, 203};
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
  try {
    tokenize(args);
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error)";
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

  std::vector<uint16_t> expected;
  for (const unsigned char byte : a_bytes + b_bytes) expected.push_back(byte);
  REQUIRE(expected.size() == 21);
  const std::vector<uint16_t> train_tokens = trainctl::read_token_file(train, 256);
  const std::vector<uint16_t> val_tokens = trainctl::read_token_file(val, 256);
  // round(21 * 0.25) = 5 tokens for validation.
  CHECK(train_tokens == std::vector<uint16_t>(expected.begin(), expected.end() - 5));
  CHECK(val_tokens == std::vector<uint16_t>(expected.end() - 5, expected.end()));

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
