// Tests for GPT-2's tokenizer (data/gpt2_tokenizer.cpp) and its streaming over files
// (cli/data/tokenize_files.cpp), on a tiny vocabulary written here: GPT-2's 256 byte tokens in its
// id order, a dozen merges and <|endoftext|>. The byte-to-character mapping, merges by rank,
// the pre-tokenizer's splits, split points against whole-text encoding, the loading errors'
// exact messages, tokenizer.json read as vocab.json + merges.txt are (hash and tokens), UTF-8
// checks, several threads at once, and files streamed in chunks at any thread count.
// tests/integration/gpt2_tokenizer.sh holds GPT-2's real vocabulary against js-tiktoken.
#include <doctest/doctest.h>

#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bad_input.h"
#include "config_files.h"
#include "gpt2_tokenizer.h"
#include "token_file.h"
#include "data/tokenize_files.h"

using config_files::TempDir;
using trainctl::Gpt2Tokenizer;

namespace {

// The UTF-8 of a code point below U+0800.
std::string utf8(char32_t character) {
  if (character < 0x80) return std::string(1, static_cast<char>(character));
  return {static_cast<char>(0xc0 | (character >> 6)), static_cast<char>(0x80 | (character & 0x3f))};
}

// GPT-2's first 256 tokens as its vocab.json spells them, in id order: the printable Latin-1
// bytes as themselves, then the other 68 bytes, in byte order, as U+0100 onwards.
std::vector<std::string> byte_token_texts() {
  std::vector<std::string> texts;
  std::vector<int> others;
  for (int byte = 0; byte < 256; ++byte) {
    if ((byte >= '!' && byte <= '~') || (byte >= 0xa1 && byte <= 0xac) || byte >= 0xae) {
      texts.push_back(utf8(static_cast<char32_t>(byte)));
    } else {
      others.push_back(byte);
    }
  }
  for (size_t i = 0; i < others.size(); ++i) texts.push_back(utf8(static_cast<char32_t>(0x100 + i)));
  return texts;
}

// Ranks matter: "e r" before "h e" (lowest rank first, not leftmost first); "t '" before
// "' s" and "Ġ Ċ" before "Ġ Ġ", so that merges across the regex's splits would show.
const std::vector<std::pair<std::string, std::string>> kMerges = {
    {"Ġ", "t"}, {"e", "r"}, {"h", "e"}, {"Ġt", "he"}, {"t", "'"}, {"'", "s"}, {"Ġ", "Ċ"},
    {"Ġ", "Ġ"}, {"c", "1"}, {"Ġ", "b"}, {"a", "a"},   {"Ċ", "Ċ"}, {"i", "n"},
};

struct Vocabulary {
  nlohmann::json vocab = nlohmann::json::object();
  std::map<std::string, uint16_t> id;  // by token text
};

Vocabulary tiny_vocabulary() {
  Vocabulary result;
  std::vector<std::string> texts = byte_token_texts();
  for (const auto& [left, right] : kMerges) texts.push_back(left + right);
  texts.push_back("<|endoftext|>");
  for (size_t i = 0; i < texts.size(); ++i) {
    result.vocab[texts[i]] = i;
    result.id[texts[i]] = static_cast<uint16_t>(i);
  }
  return result;
}

std::string path_in(const TempDir& dir, const std::string& name) { return (dir.path() / name).string(); }

void write_text(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::string merges_txt() {
  std::string text = "#version: 0.2\n";
  for (const auto& [left, right] : kMerges) text += left + " " + right + "\n";
  return text;
}

// vocab.json and merges.txt in `dir`, as GPT2Tokenizer.save_pretrained writes them.
void write_vocab_and_merges(const TempDir& dir, const nlohmann::json& vocab, const std::string& merges) {
  write_text(path_in(dir, "vocab.json"), vocab.dump());
  write_text(path_in(dir, "merges.txt"), merges);
}

// tokenizer.json alone in `dir`, its merges as "left right" strings or as [left, right] pairs.
void write_tokenizer_json(const TempDir& dir, bool merges_as_pairs) {
  nlohmann::json merges = nlohmann::json::array();
  for (const auto& [left, right] : kMerges)
    merges.push_back(merges_as_pairs ? nlohmann::json::array({left, right}) : nlohmann::json(left + " " + right));
  const nlohmann::json json = {{"version", "1.0"},
                               {"model", {{"type", "BPE"}, {"vocab", tiny_vocabulary().vocab}, {"merges", merges}}}};
  write_text(path_in(dir, "tokenizer.json"), json.dump());
}

// The tiny tokenizer, from vocab.json and merges.txt; the directory lives as long as the test binary.
const Gpt2Tokenizer& tiny_tokenizer() {
  static TempDir dir;
  static const Gpt2Tokenizer tokenizer = [] {
    write_vocab_and_merges(dir, tiny_vocabulary().vocab, merges_txt());
    return Gpt2Tokenizer::load(dir.path().string());
  }();
  return tokenizer;
}

// The ids of tokens given by their vocab.json text.
std::vector<uint16_t> ids(const std::vector<std::string>& texts) {
  static const Vocabulary vocabulary = tiny_vocabulary();
  std::vector<uint16_t> result;
  for (const std::string& text : texts) result.push_back(vocabulary.id.at(text));
  return result;
}

std::string load_error(const std::string& directory) {
  try {
    Gpt2Tokenizer::load(directory);
  } catch (const trainctl::BadInput& error) {
    return error.what();
  }
  return "(no error)";
}

std::string bad_input(const std::function<void()>& action) {
  try {
    action();
  } catch (const trainctl::BadInput& error) {
    return error.what();
  }
  return "(no error)";
}

std::vector<uint16_t> concatenated(std::vector<uint16_t> first, const std::vector<uint16_t>& second) {
  first.insert(first.end(), second.begin(), second.end());
  return first;
}

}  // namespace

TEST_CASE("bytes are GPT-2's byte tokens: the printable ones as themselves, the others from U+0100") {
  const Gpt2Tokenizer& tokenizer = tiny_tokenizer();
  CHECK(tokenizer.vocab_size() == 256 + static_cast<int64_t>(kMerges.size()) + 1);
  CHECK(tokenizer.end_of_text() == tokenizer.vocab_size() - 1);
  CHECK(tokenizer.decode(std::vector<uint16_t>{tokenizer.end_of_text()}) == "<|endoftext|>");
  // GPT-2's own ids: "!" 0, "\n" 198, " " 220, and the byte 0 at 188.
  CHECK(tokenizer.encode("!") == std::vector<uint16_t>{0});
  CHECK(tokenizer.encode("\n") == std::vector<uint16_t>{198});
  CHECK(tokenizer.encode(" ") == std::vector<uint16_t>{220});
  CHECK(tokenizer.token_bytes(188) == std::string(1, '\0'));
  CHECK(tokenizer.token_bytes(ids({"Ġ"})[0]) == " ");
  CHECK(tokenizer.token_bytes(ids({"ĉ"})[0]) == "\t");
  CHECK(tokenizer.token_bytes(ids({"ġ"})[0]) == "\x7f");
  CHECK(tokenizer.token_bytes(ids({"ł"})[0]) == "\xa0");
  CHECK(tokenizer.token_bytes(ids({"Ń"})[0]) == "\xad");
  CHECK(tokenizer.token_bytes(ids({"ÿ"})[0]) == "\xff");
  std::set<std::string> bytes;
  for (uint16_t token = 0; token < 256; ++token) bytes.emplace(tokenizer.token_bytes(token));
  CHECK(bytes.size() == 256);
  CHECK(bytes.begin()->size() == 1);
  CHECK(bytes.rbegin()->size() == 1);
  // A multi-byte character is its bytes' tokens when no merge joins them.
  CHECK(tokenizer.encode("é") == ids({"Ã", "©"}));
  CHECK(tokenizer.decode(tokenizer.encode("é")) == "é");
}

TEST_CASE("merges apply lowest rank first, leftmost first among equal ranks, until none applies") {
  const Gpt2Tokenizer& tokenizer = tiny_tokenizer();
  CHECK(tokenizer.encode("her") == ids({"h", "er"}));     // "e r" outranks "h e", which is further left
  CHECK(tokenizer.encode(" the") == ids({"Ġthe"}));       // Ġ t, then h e, then Ġt he
  CHECK(tokenizer.encode("aaa") == ids({"aa", "a"}));     // not a, aa
  CHECK(tokenizer.encode("aaaa") == ids({"aa", "aa"}));
  CHECK(tokenizer.encode(" ther") == ids({"Ġt", "h", "er"}));  // "e r" takes the e first
}

TEST_CASE("GPT-2's regex splits the text before any merge") {
  const Gpt2Tokenizer& tokenizer = tiny_tokenizer();
  CHECK(tokenizer.encode("it's") == ids({"i", "t", "'s"}));  // a contraction is its own pre-token: no "t'"
  CHECK(tokenizer.encode("abc123") == ids({"a", "b", "c", "1", "2", "3"}));  // letters, then digits: no "c1"
  CHECK(tokenizer.encode("a   b") == ids({"a", "ĠĠ", "Ġb"}));  // the last space goes with the word
  CHECK(tokenizer.encode("a  ") == ids({"a", "ĠĠ"}));          // trailing spaces are one pre-token
  CHECK(tokenizer.encode("x  \ny") == ids({"x", "ĠĠ", "Ċ", "y"}));  // "  ", "\n": no "ĠĊ"
  CHECK(tokenizer.encode("x  \n") == ids({"x", "Ġ", "ĠĊ"}));       // at the end, "  \n" is one
  CHECK(tokenizer.encode("\n\nin") == ids({"Ċ", "Ċ", "in"}));  // whitespace before a word leaves it one
  CHECK(tokenizer.encode("in\n\n") == ids({"in", "ĊĊ"}));
  CHECK(tokenizer.encode(" bin") == ids({"Ġb", "in"}));
  CHECK(tokenizer.encode("é1") == ids({"Ã", "©", "1"}));
  CHECK(tokenizer.encode("") == std::vector<uint16_t>{});
  // Text that spells <|endoftext|> is text.
  CHECK(tokenizer.encode("<|endoftext|>").size() == 13);
}

TEST_CASE("cutting a text at its split points leaves its tokens as they are") {
  const Gpt2Tokenizer& tokenizer = tiny_tokenizer();
  // A cut after a newline is no split point: here it changes the tokens.
  CHECK(concatenated(tokenizer.encode("x  \n"), tokenizer.encode("y")) != tokenizer.encode("x  \ny"));
  CHECK(tokenizer.first_split_point("x  \ny") == 1);
  CHECK(tokenizer.first_split_point("  \n") == std::string::npos);
  CHECK(tokenizer.first_split_point("é\u3000b") == 2);  // Unicode whitespace counts
  CHECK(tokenizer.first_split_point("ab") == std::string::npos);

  const std::vector<std::string> pieces = {"a", "t", "h", "e", "r", "s", "'", "'s", "1", "c", "é", "中", "😀",
                                           " ", "  ", "\t", "\n", "\r\n", "\u3000", "\u00a0", "!", ".", "aa"};
  std::mt19937 random(21);
  int cuts = 0;
  for (int text_number = 0; text_number < 1000; ++text_number) {
    std::string text;
    for (int i = std::uniform_int_distribution<int>(0, 24)(random); i > 0; --i)
      text += pieces[std::uniform_int_distribution<size_t>(0, pieces.size() - 1)(random)];
    const std::vector<uint16_t> whole = tokenizer.encode(text);
    for (size_t from = 0; from < text.size();) {
      const size_t found = tokenizer.first_split_point(std::string_view(text).substr(from));
      if (found == std::string::npos) break;
      const size_t cut = from + found;
      CHECK_MESSAGE(concatenated(tokenizer.encode(text.substr(0, cut)), tokenizer.encode(text.substr(cut))) == whole,
                    "cut at ", cut, " of ", nlohmann::json(text).dump());
      ++cuts;
      from = cut;
    }
  }
  CHECK(cuts > 1000);
}

TEST_CASE("tokenizer.json holds the same tokenizer as vocab.json and merges.txt, with the same hash") {
  const Gpt2Tokenizer& pair_files = tiny_tokenizer();
  REQUIRE(pair_files.content_hash().size() == std::string("crc32:").size() + 8);
  CHECK(pair_files.content_hash().starts_with("crc32:"));
  const std::string text = "the other's  thin\n\nthread: 123 aaa é 中文 😀";
  for (const bool merges_as_pairs : {false, true}) {
    TempDir dir;
    write_tokenizer_json(dir, merges_as_pairs);
    const Gpt2Tokenizer json_file = Gpt2Tokenizer::load(dir.path().string());
    CHECK(json_file.content_hash() == pair_files.content_hash());
    CHECK(json_file.encode(text) == pair_files.encode(text));
    CHECK(json_file.vocab_size() == pair_files.vocab_size());
    CHECK(json_file.directory() == dir.path().string());
  }
  // vocab.json and merges.txt win where both forms are present; a merge less is another hash.
  TempDir dir;
  write_tokenizer_json(dir, false);
  std::string fewer = merges_txt();
  fewer.erase(fewer.rfind("i n\n"));
  write_vocab_and_merges(dir, tiny_vocabulary().vocab, fewer);
  const Gpt2Tokenizer fewer_merges = Gpt2Tokenizer::load(dir.path().string());
  CHECK(fewer_merges.content_hash() != pair_files.content_hash());
  CHECK(fewer_merges.encode("in") == ids({"i", "n"}));
  // A merges.txt without its #version line is read the same.
  TempDir unversioned;
  write_vocab_and_merges(unversioned, tiny_vocabulary().vocab, merges_txt().substr(merges_txt().find('\n') + 1));
  CHECK(Gpt2Tokenizer::load(unversioned.path().string()).content_hash() == pair_files.content_hash());
}

TEST_CASE("a directory that holds no tokenizer, or files that do not fit together, name the file at fault") {
  TempDir dir;
  const std::string root = dir.path().string();
  CHECK(load_error(root) == fmt::format("{}: not a tokenizer directory: it holds neither vocab.json and merges.txt "
                                        "nor tokenizer.json", root));
  const std::string vocab = path_in(dir, "vocab.json"), merges = path_in(dir, "merges.txt");
  const Vocabulary good = tiny_vocabulary();

  write_vocab_and_merges(dir, good.vocab, merges_txt() + "Ġ zz\n");
  CHECK(load_error(root) == fmt::format("{}:15: the merge \"Ġ zz\" names \"zz\", which is not a token of {}", merges, vocab));
  write_vocab_and_merges(dir, good.vocab, merges_txt() + "z z\n");
  CHECK(load_error(root) == fmt::format("{}:15: the merge \"z z\" makes \"zz\", which is not a token of {}", merges, vocab));
  write_vocab_and_merges(dir, good.vocab, "#version: 0.2\nĠ t\nĠtt\n");
  CHECK(load_error(root) == fmt::format("{}:3: \"Ġtt\" is not two tokens separated by a space", merges));

  nlohmann::json bad = good.vocab;
  bad.erase("<|endoftext|>");
  write_vocab_and_merges(dir, bad, "");
  CHECK(load_error(root) == fmt::format("{}: no <|endoftext|> token", vocab));
  bad = good.vocab;
  bad["<|endoftext|>"] = 32;  // "A"'s id
  write_vocab_and_merges(dir, bad, "");
  CHECK(load_error(root) == fmt::format("{}: tokens \"<|endoftext|>\" and \"A\" both have id 32", vocab));
  bad = good.vocab;
  bad["<|endoftext|>"] = 400;
  write_vocab_and_merges(dir, bad, "");
  CHECK(load_error(root) == fmt::format("{}: token \"<|endoftext|>\" has id 400, outside 0 to 269 (270 tokens)", vocab));
  bad = good.vocab;
  bad["<|endoftext|>"] = "last";
  write_vocab_and_merges(dir, bad, "");
  CHECK(load_error(root) == fmt::format("{}: the id of token \"<|endoftext|>\" is not an integer", vocab));
  bad = good.vocab;
  bad.erase("<|endoftext|>");
  bad["€"] = 269;
  write_vocab_and_merges(dir, bad, "");
  CHECK(load_error(root) == fmt::format("{}: token \"€\" (id 269) is not byte-level: U+20AC stands for no byte", vocab));
  bad = good.vocab;
  bad.erase("A");
  bad["<|endoftext|>"] = 32;
  write_vocab_and_merges(dir, bad, "");
  CHECK(load_error(root) == fmt::format("{}: no token for byte 0x41 (\"A\")", vocab));
  bad = good.vocab;
  bad.erase("<|endoftext|>");
  bad[std::string(1, '\0')] = 269;  // U+0000: the byte 0 is U+0100
  write_vocab_and_merges(dir, bad, "");
  CHECK(load_error(root) == fmt::format("{}: token \"\\u0000\" (id 269) is not byte-level: U+0000 stands for no byte", vocab));
  write_vocab_and_merges(dir, nlohmann::json::array({"!"}), "");
  CHECK(load_error(root) == fmt::format("{}: the vocabulary is not an object of token: id", vocab));
  write_text(vocab, "{\"!\": 0,");
  CHECK(load_error(root).starts_with(fmt::format("{}: not JSON: ", vocab)));

  TempDir json_dir;
  const std::string tokenizer_json = path_in(json_dir, "tokenizer.json");
  write_text(tokenizer_json, R"({"model": {"type": "WordPiece", "vocab": {}, "merges": []}})");
  CHECK(load_error(json_dir.path().string()) == fmt::format("{}: model.type is \"WordPiece\", not \"BPE\"", tokenizer_json));
  write_text(tokenizer_json, R"({"model": {"type": "BPE"}})");
  CHECK(load_error(json_dir.path().string()) == fmt::format("{}: no model.vocab and model.merges", tokenizer_json));
  nlohmann::json json;
  json["model"]["vocab"] = good.vocab;
  json["model"]["merges"] = nlohmann::json::array({"Ġ t", nlohmann::json::array({"h"})});
  write_text(tokenizer_json, json.dump());
  CHECK(load_error(json_dir.path().string()) ==
        fmt::format("{}: model.merges[1] is neither \"left right\" nor [\"left\", \"right\"]", tokenizer_json));
  json["model"]["merges"] = nlohmann::json::array({nlohmann::json::array({"Ġ", "q"}), nlohmann::json::array({"q", "q"})});
  write_text(tokenizer_json, json.dump());
  CHECK(load_error(json_dir.path().string()) ==
        fmt::format("{}: model.merges[0]: the merge \"Ġ q\" makes \"Ġq\", which is not a token of {}", tokenizer_json,
                    tokenizer_json));
}

TEST_CASE("text that is not UTF-8 and tokens past the vocabulary are bad input") {
  using trainctl::first_invalid_utf8;
  constexpr size_t npos = std::string::npos;
  CHECK(first_invalid_utf8("plain ASCII, longer than eight bytes") == npos);
  CHECK(first_invalid_utf8("é中😀\u00a0") == npos);
  CHECK(first_invalid_utf8("abc\xff") == 3);
  CHECK(first_invalid_utf8("a\x80") == 1);             // a continuation byte alone
  CHECK(first_invalid_utf8("ab\xc0\x80") == 2);        // an overlong NUL
  CHECK(first_invalid_utf8("\xe0\x80\xaf") == 0);      // an overlong '/'
  CHECK(first_invalid_utf8("x\xed\xa0\x80") == 1);     // a surrogate
  CHECK(first_invalid_utf8("\xf4\x90\x80\x80") == 0);  // past U+10FFFF
  CHECK(first_invalid_utf8("12345678\xe2\x82") == 8);  // cut short
  CHECK(first_invalid_utf8("\xe2\x82\xac\xf0\x9f\x98\x80") == npos);

  const Gpt2Tokenizer& tokenizer = tiny_tokenizer();
  CHECK(bad_input([&] { tokenizer.encode("abc\xff"); }) == "text is not UTF-8 at byte offset 3 (byte 0xff)");
  CHECK(bad_input([&] { tokenizer.first_split_point("a \xc3"); }) == "text is not UTF-8 at byte offset 2 (byte 0xc3)");
  const std::string expected = fmt::format("token 270 is not below the vocab_size 270 of the tokenizer in {}",
                                           tokenizer.directory());
  CHECK(bad_input([&] { tokenizer.decode(std::vector<uint16_t>{1, 270}); }) == expected);
  CHECK(bad_input([&] { tokenizer.token_bytes(270); }) == expected);
}

TEST_CASE("several threads encode at once, each as one thread alone") {
  const Gpt2Tokenizer& tokenizer = tiny_tokenizer();
  std::vector<std::string> texts;
  for (int i = 0; i < 8; ++i) texts.push_back(fmt::format("{} the other's thin thread {} aaa\n\n", std::string(i, ' '), i));
  std::vector<std::vector<uint16_t>> alone;
  for (const std::string& text : texts) alone.push_back(tokenizer.encode(text));
  std::vector<std::vector<uint16_t>> together(texts.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < texts.size(); ++i)
    threads.emplace_back([&, i] {
      for (int round = 0; round < 200; ++round) together[i] = tokenizer.encode(texts[i]);
    });
  for (std::thread& thread : threads) thread.join();
  CHECK(together == alone);
}

TEST_CASE("files stream in chunks to the tokens of whole documents, whatever the chunk size and threads") {
  const Gpt2Tokenizer& tokenizer = tiny_tokenizer();
  TempDir dir;
  const std::string first = path_in(dir, "first.txt"), second = path_in(dir, "second.txt"), empty = path_in(dir, "empty.txt");
  std::string first_text;
  for (int i = 0; i < 200; ++i) first_text += fmt::format("the other's  thin\tthread {}:\r\n{}\n\n", i, std::string(i % 7, ' '));
  const std::string second_text = "x  \ny \u3000z é中😀 aaa  ";
  write_text(first, first_text);
  write_text(second, second_text);
  write_text(empty, "");
  const uint16_t end = tokenizer.end_of_text();

  auto tokenize = [&](trainctl::DocumentUnit documents, int threads, size_t chunk_bytes) {
    const std::string out = path_in(dir, fmt::format("out-{}-{}.bin", threads, chunk_bytes));
    trainctl::TokenFileWriter writer(out, trainctl::TokenFormat::kUint16);
    trainctl::tokenize_files(tokenizer, {first, empty, second}, {documents, threads, chunk_bytes}, writer);
    writer.finish();
    const std::vector<uint32_t> tokens = trainctl::read_token_file(out, tokenizer.vocab_size());
    return std::vector<uint16_t>(tokens.begin(), tokens.end());
  };
  std::vector<uint16_t> whole_files = {end};
  whole_files = concatenated(concatenated(whole_files, tokenizer.encode(first_text)), {end, end});
  whole_files = concatenated(whole_files, tokenizer.encode(second_text));
  std::vector<uint16_t> whole_lines;
  for (const std::string& text : {first_text, second_text}) {
    for (size_t start = 0; start <= text.size();) {
      const size_t newline = std::min(text.find('\n', start), text.size());
      std::string line = text.substr(start, newline - start);
      if (newline < text.size() && line.ends_with('\r')) line.pop_back();
      if (!line.empty()) whole_lines = concatenated(concatenated(whole_lines, {end}), tokenizer.encode(line));
      start = newline + 1;
    }
  }
  struct Pass {
    int threads;
    size_t chunk_bytes;
  };
  for (const Pass pass : {Pass{1, 4 << 20}, Pass{1, 1}, Pass{3, 7}, Pass{2, 64}}) {
    CAPTURE(pass.threads);
    CAPTURE(pass.chunk_bytes);
    CHECK(tokenize(trainctl::DocumentUnit::kFile, pass.threads, pass.chunk_bytes) == whole_files);
    CHECK(tokenize(trainctl::DocumentUnit::kLine, pass.threads, pass.chunk_bytes) == whole_lines);
  }

  const std::string bad = path_in(dir, "bad.txt");
  write_text(bad, first_text + "\xe2\x82" + "ok");
  trainctl::TokenFileWriter writer(path_in(dir, "bad.bin"), trainctl::TokenFormat::kUint16);
  CHECK(bad_input([&] { trainctl::tokenize_files(tokenizer, {bad}, {trainctl::DocumentUnit::kFile, 2, 100}, writer); }) ==
        fmt::format("{}: not UTF-8 at byte offset {} (byte 0xe2)", bad, first_text.size()));
}
