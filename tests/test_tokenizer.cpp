// Tests for the tokenizers (data/tokenizer.cpp, data/tokenizer_files.cpp) and their streaming
// over files (cli/data/tokenize_files.cpp), on tiny vocabularies written here in each form
// trainctl reads: GPT-2's vocab.json and merges.txt (its 256 byte tokens in its id order, a dozen
// merges and <|endoftext|>), and tokenizer.json as GPT-2, Llama 3 (its regex, ignore_merges,
// added tokens past the vocabulary, a TemplateProcessing BOS) and Llama 2 (Prepend and Replace,
// or Metaspace; byte fallback, unk) write it. The byte-to-character mapping, merges by rank, the
// regexes' splits (U+0085 as Oniguruma's whitespace), split points against whole-text encoding
// for each family, decoding, the refusals' exact messages, UTF-8 checks, several threads at once,
// files streamed in chunks at any thread count, and shards cut at document starts.
// tests/integration/gpt2_tokenizer.sh and hf_tokenizers.sh hold the real vocabularies against
// independent implementations.
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
#include "errors.h"
#include "token_file.h"
#include "tokenizer.h"
#include "data/tokenize_files.h"
#include "error_message.h"

using config_files::TempDir;
using trainctl::Tokenizer;
using Tokens = std::vector<uint32_t>;

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

// How GPT-2's mapping spells one byte.
std::string byte_text(unsigned char byte) {
  static const std::vector<std::string> texts = [] {
    std::vector<std::string> by_byte(256);
    std::vector<int> others;
    for (int b = 0; b < 256; ++b) {
      if ((b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || b >= 0xae) {
        by_byte[b] = utf8(static_cast<char32_t>(b));
      } else {
        others.push_back(b);
      }
    }
    for (size_t i = 0; i < others.size(); ++i) by_byte[others[i]] = utf8(static_cast<char32_t>(0x100 + i));
    return by_byte;
  }();
  return texts[byte];
}

using MergeList = std::vector<std::pair<std::string, std::string>>;

// Ranks matter: "e r" before "h e" (lowest rank first, not leftmost first); "t '" before
// "' s" and "Ġ Ċ" before "Ġ Ġ", so that merges across the regex's splits would show.
const MergeList kMerges = {
    {"Ġ", "t"}, {"e", "r"}, {"h", "e"}, {"Ġt", "he"}, {"t", "'"}, {"'", "s"}, {"Ġ", "Ċ"},
    {"Ġ", "Ġ"}, {"c", "1"}, {"Ġ", "b"}, {"a", "a"},   {"Ċ", "Ċ"}, {"i", "n"},
};

struct Vocabulary {
  nlohmann::json vocab = nlohmann::json::object();
  std::map<std::string, uint32_t> id;  // by token text
};

// The byte tokens, then each merge's result and `extra`, in order.
Vocabulary vocabulary(const MergeList& merges, const std::vector<std::string>& extra) {
  Vocabulary result;
  std::vector<std::string> texts = byte_token_texts();
  for (const auto& [left, right] : merges) texts.push_back(left + right);
  texts.insert(texts.end(), extra.begin(), extra.end());
  for (size_t i = 0; i < texts.size(); ++i) {
    result.vocab[texts[i]] = i;
    result.id[texts[i]] = static_cast<uint32_t>(i);
  }
  return result;
}

Vocabulary tiny_vocabulary() { return vocabulary(kMerges, {"<|endoftext|>"}); }

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

nlohmann::json merges_json(const MergeList& merges, bool as_pairs) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& [left, right] : merges)
    list.push_back(as_pairs ? nlohmann::json::array({left, right}) : nlohmann::json(left + " " + right));
  return list;
}

nlohmann::json added_token(uint32_t id, const std::string& content) {
  return {{"id", id},         {"content", content}, {"single_word", false}, {"lstrip", false},
          {"rstrip", false},  {"normalized", false}, {"special", true}};
}

// tokenizer.json alone in `dir`, as GPT-2's is written, its merges as "left right" strings or as
// [left, right] pairs.
void write_tokenizer_json(const TempDir& dir, bool merges_as_pairs) {
  nlohmann::json end_of_text = added_token(269, "<|endoftext|>");
  end_of_text["normalized"] = true;
  const nlohmann::json byte_level = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  const nlohmann::json json = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", nlohmann::json::array({end_of_text})},
      {"normalizer", nullptr},
      {"pre_tokenizer", byte_level},
      {"post_processor", byte_level},
      {"decoder", byte_level},
      {"model", {{"type", "BPE"}, {"vocab", tiny_vocabulary().vocab}, {"merges", merges_json(kMerges, merges_as_pairs)}}}};
  write_text(path_in(dir, "tokenizer.json"), json.dump());
}

// The tiny tokenizer, from vocab.json and merges.txt; the directory lives as long as the test binary.
const Tokenizer& tiny_tokenizer() {
  static TempDir dir;
  static const Tokenizer tokenizer = [] {
    write_vocab_and_merges(dir, tiny_vocabulary().vocab, merges_txt());
    return Tokenizer::load(dir.path().string());
  }();
  return tokenizer;
}

// The ids of tokens given by their text in `vocabulary`.
Tokens ids_in(const Vocabulary& vocabulary, const std::vector<std::string>& texts) {
  Tokens result;
  for (const std::string& text : texts) result.push_back(vocabulary.id.at(text));
  return result;
}

Tokens ids(const std::vector<std::string>& texts) {
  static const Vocabulary vocabulary = tiny_vocabulary();
  return ids_in(vocabulary, texts);
}

const char* const kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// U+0085 (NEL) as GPT-2's mapping spells its bytes, c2 85.
const std::string kNel = byte_text(0xc2) + byte_text(0x85);
const MergeList kLlama3Merges = {{"Ġ", "t"}, {"h", "e"}, {"Ġt", "he"}, {"1", "2"}, {"12", "3"}, {"a", "b"},
                                 {"'", "S"}, {"Ċ", "Ċ"}, {byte_text(0xc2), byte_text(0x85)}, {kNel, kNel}};
// "abc" is a token no merge makes: ignore_merges takes it whole.
const Vocabulary& llama3_vocabulary() {
  static const Vocabulary llama3 = vocabulary(kLlama3Merges, {"abc"});
  return llama3;
}
Tokens llama3_ids(const std::vector<std::string>& texts) { return ids_in(llama3_vocabulary(), texts); }

// A tokenizer.json as Llama 3's is written: its Split regex before a ByteLevel without one,
// ignore_merges, <|begin_of_text|> and <|end_of_text|> past the model's vocabulary, and a
// TemplateProcessing that puts <|begin_of_text|> before a text.
nlohmann::json llama3_json() {
  const auto begin = static_cast<uint32_t>(llama3_vocabulary().vocab.size());
  return {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", {added_token(begin, "<|begin_of_text|>"), added_token(begin + 1, "<|end_of_text|>")}},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"}, {"pattern", {{"Regex", kLlama3Regex}}}, {"behavior", "Isolated"}, {"invert", false}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}}}}}},
      {"post_processor",
       {{"type", "Sequence"},
        {"processors",
         {{{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", true}},
          {{"type", "TemplateProcessing"},
           {"single",
            {{{"SpecialToken", {{"id", "<|begin_of_text|>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
           {"special_tokens",
            {{"<|begin_of_text|>", {{"id", "<|begin_of_text|>"}, {"ids", {begin}}, {"tokens", {"<|begin_of_text|>"}}}}}}}}}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", true},
        {"vocab", llama3_vocabulary().vocab},
        {"merges", merges_json(kLlama3Merges, true)}}}};
}

// `json` written as DIR/tokenizer.json and loaded from the file's path; the directory lives as
// long as the test binary.
Tokenizer load_json(const nlohmann::json& json) {
  static std::vector<std::unique_ptr<TempDir>> dirs;
  dirs.push_back(std::make_unique<TempDir>());
  const std::string path = path_in(*dirs.back(), "tokenizer.json");
  write_text(path, json.dump());
  return Tokenizer::load(path);
}

const Tokenizer& llama3_tokenizer() {
  static const Tokenizer tokenizer = load_json(llama3_json());
  return tokenizer;
}

// Llama 2's form: <unk>, <s>, </s>, the 256 <0xNN> byte tokens, characters and merges' results,
// ▁ standing for a space. No token holds ▁ after another character.
const std::string kSpace = "\u2581";
const MergeList kLlama2Merges = {{kSpace, "h"},          {"e", "l"},         {kSpace + "h", "el"}, {"l", "o"},
                                 {kSpace + "hel", "lo"}, {kSpace, kSpace},   {"a", "b"},          {kSpace, "w"}};
struct Llama2Vocabulary {
  nlohmann::json vocab = nlohmann::json::object();
  std::map<std::string, uint32_t> id;
};
const Llama2Vocabulary& llama2_vocabulary() {
  static const Llama2Vocabulary vocabulary = [] {
    std::vector<std::string> texts = {"<unk>", "<s>", "</s>"};
    for (int byte = 0; byte < 256; ++byte) texts.push_back(fmt::format("<0x{:02X}>", byte));
    for (const char* character : {"▁", "a", "b", "d", "e", "h", "l", "o", "r", "w"}) texts.push_back(character);
    for (const auto& [left, right] : kLlama2Merges) texts.push_back(left + right);
    Llama2Vocabulary result;
    for (size_t i = 0; i < texts.size(); ++i) {
      result.vocab[texts[i]] = i;
      result.id[texts[i]] = static_cast<uint32_t>(i);
    }
    return result;
  }();
  return vocabulary;
}
Tokens llama2_ids(const std::vector<std::string>& texts) {
  Tokens result;
  for (const std::string& text : texts) result.push_back(llama2_vocabulary().id.at(text));
  return result;
}

// A tokenizer.json as Llama 2's is written (the Prepend and Replace normalizers, no
// pre-tokenizer), or with a Metaspace pre-tokenizer instead, as newer conversions write it.
nlohmann::json llama2_json(bool metaspace, bool byte_fallback = true, bool fuse_unk = true) {
  nlohmann::json json = {
      {"version", "1.0"},
      {"added_tokens", {added_token(0, "<unk>"), added_token(1, "<s>"), added_token(2, "</s>")}},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers",
         {{{"type", "Prepend"}, {"prepend", kSpace}},
          {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kSpace}}}}}},
      {"pre_tokenizer", nullptr},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}}},
      {"model",
       {{"type", "BPE"},
        {"unk_token", "<unk>"},
        {"fuse_unk", fuse_unk},
        {"byte_fallback", byte_fallback},
        {"vocab", llama2_vocabulary().vocab},
        {"merges", merges_json(kLlama2Merges, false)}}}};
  if (metaspace) {
    json["normalizer"] = nullptr;
    json["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", kSpace}, {"prepend_scheme", "first"}, {"split", false}};
  }
  return json;
}

const Tokenizer& llama2_tokenizer() {
  static const Tokenizer tokenizer = load_json(llama2_json(false));
  return tokenizer;
}

std::string load_error(const std::string& path) {
  return error_message<trainctl::BadInput>([&] { (void)Tokenizer::load(path); });
}

std::string bad_input(const std::function<void()>& action) {
  return error_message<trainctl::BadInput>([&] { action(); });
}

Tokens concatenated(Tokens first, const Tokens& second) {
  first.insert(first.end(), second.begin(), second.end());
  return first;
}

}  // namespace

TEST_CASE("bytes are GPT-2's byte tokens: the printable ones as themselves, the others from U+0100") {
  const Tokenizer& tokenizer = tiny_tokenizer();
  CHECK(tokenizer.vocab_size() == 256 + static_cast<int64_t>(kMerges.size()) + 1);
  // GPT-2's documents are led by <|endoftext|>, as llm.c writes them; its file adds nothing to a text.
  CHECK(tokenizer.document_tokens().before == Tokens{269});
  CHECK(tokenizer.document_tokens().after.empty());
  CHECK(tokenizer.post_processor_tokens().before.empty());
  CHECK(tokenizer.decode(Tokens{269}) == "<|endoftext|>");
  // GPT-2's own ids: "!" 0, "\n" 198, " " 220, and the byte 0 at 188.
  CHECK(tokenizer.encode("!") == Tokens{0});
  CHECK(tokenizer.encode("\n") == Tokens{198});
  CHECK(tokenizer.encode(" ") == Tokens{220});
  CHECK(tokenizer.token_bytes(188) == std::string(1, '\0'));
  CHECK(tokenizer.token_bytes(ids({"Ġ"})[0]) == " ");
  CHECK(tokenizer.token_bytes(ids({"ĉ"})[0]) == "\t");
  CHECK(tokenizer.token_bytes(ids({"ġ"})[0]) == "\x7f");
  CHECK(tokenizer.token_bytes(ids({"ł"})[0]) == "\xa0");
  CHECK(tokenizer.token_bytes(ids({"Ń"})[0]) == "\xad");
  CHECK(tokenizer.token_bytes(ids({"ÿ"})[0]) == "\xff");
  std::set<std::string> bytes;
  for (uint32_t token = 0; token < 256; ++token) bytes.emplace(tokenizer.token_bytes(token));
  CHECK(bytes.size() == 256);
  CHECK(bytes.begin()->size() == 1);
  CHECK(bytes.rbegin()->size() == 1);
  // A multi-byte character is its bytes' tokens when no merge joins them.
  CHECK(tokenizer.encode("é") == ids({"Ã", "©"}));
  CHECK(tokenizer.decode(tokenizer.encode("é")) == "é");
}

TEST_CASE("merges apply lowest rank first, leftmost first among equal ranks, until none applies") {
  const Tokenizer& tokenizer = tiny_tokenizer();
  CHECK(tokenizer.encode("her") == ids({"h", "er"}));     // "e r" outranks "h e", which is further left
  CHECK(tokenizer.encode(" the") == ids({"Ġthe"}));       // Ġ t, then h e, then Ġt he
  CHECK(tokenizer.encode("aaa") == ids({"aa", "a"}));     // not a, aa
  CHECK(tokenizer.encode("aaaa") == ids({"aa", "aa"}));
  CHECK(tokenizer.encode(" ther") == ids({"Ġt", "h", "er"}));  // "e r" takes the e first
}

TEST_CASE("GPT-2's regex splits the text before any merge") {
  const Tokenizer& tokenizer = tiny_tokenizer();
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
  CHECK(tokenizer.encode("").empty());
  // Text that spells <|endoftext|> is text, even where added tokens are matched: vocab.json has none.
  CHECK(tokenizer.encode("<|endoftext|>").size() == 13);
  CHECK(tokenizer.encode("<|endoftext|>", {true, true}).size() == 13);
}

TEST_CASE("Llama 3's tokenizer.json: its regex, ignore_merges, added tokens and the BOS of its template") {
  const Tokenizer& tokenizer = llama3_tokenizer();
  const auto begin = static_cast<uint32_t>(llama3_vocabulary().vocab.size());
  CHECK(tokenizer.vocab_size() == begin + 2);
  CHECK(tokenizer.post_processor_tokens().before == Tokens{begin});
  CHECK(tokenizer.document_tokens().before == Tokens{begin});
  CHECK(tokenizer.document_tokens().after.empty());
  CHECK(tokenizer.token_bytes(begin + 1) == "<|end_of_text|>");
  // Digits in threes; a contraction in any case; a letter run takes one character before it.
  CHECK(tokenizer.encode("12345") == llama3_ids({"123", "4", "5"}));
  CHECK(tokenizer.encode("IT'S") == llama3_ids({"I", "T", "'S"}));
  CHECK(tokenizer.encode(" the(he") == llama3_ids({"Ġthe", "(", "he"}));
  CHECK(tokenizer.encode("a\n\n\nb") == llama3_ids({"a", "ĊĊ", "Ċ", "b"}));
  // ignore_merges: "abc" is a token, which no merge makes; without it, "ab" "c".
  CHECK(tokenizer.encode("abc") == llama3_ids({"abc"}));
  nlohmann::json merging = llama3_json();
  merging["model"]["ignore_merges"] = false;
  CHECK(load_json(merging).encode("abc") == llama3_ids({"ab", "c"}));
  // U+0085 is whitespace to Oniguruma, as to Hugging Face: "x", NEL, NEL "y"; were it not, the two
  // NELs would be one piece, merged.
  CHECK(tokenizer.encode("x\u0085\u0085y") == llama3_ids({"x", kNel, kNel, "y"}));
  // Added tokens are matched only where asked for, and then as the leftmost longest.
  const std::string text = "a<|begin_of_text|><|end_of_text|>";
  CHECK(tokenizer.encode(text).size() == 1 + 17 + 15);
  CHECK(tokenizer.encode(text, {true, true}) == Tokens{llama3_ids({"a"})[0], begin, begin + 1});
  CHECK(tokenizer.decode(tokenizer.encode(text, {true, true})) == text);
  // Another tokenizer, another hash.
  CHECK(tokenizer.content_hash() != tiny_tokenizer().content_hash());
}

TEST_CASE("Llama 2's tokenizer.json: Prepend and Replace, merges over the whole text, byte fallback, unk") {
  const Tokenizer& tokenizer = llama2_tokenizer();
  CHECK(tokenizer.document_tokens().before == Tokens{1});
  CHECK(tokenizer.encode("hello") == llama2_ids({"▁hello"}));
  CHECK(tokenizer.encode("hello world") == llama2_ids({"▁hello", "▁w", "o", "r", "l", "d"}));
  CHECK(tokenizer.encode(" ab") == llama2_ids({"▁▁", "ab"}));  // the prepended ▁ and the space's
  CHECK(tokenizer.encode("é") == llama2_ids({"▁", "<0xC3>", "<0xA9>"}));
  CHECK(tokenizer.encode("a\nb") == llama2_ids({"▁", "a", "<0x0A>", "b"}));
  // A text that continues a document gets no ▁ before it.
  CHECK(tokenizer.encode(" world", {false, false}) == llama2_ids({"▁w", "o", "r", "l", "d"}));
  CHECK(tokenizer.token_bytes(llama2_ids({"▁hello"})[0]) == " hello");
  CHECK(tokenizer.token_bytes(llama2_ids({"<0x0A>"})[0]) == "\n");
  // Decoding drops the prepended space at a document's start: at the start, and after <s>.
  for (const std::string text : {"hello world", " ab", "é\n", "hello  "}) {
    CAPTURE(text);
    const Tokens tokens = tokenizer.encode(text);
    CHECK(tokenizer.decode(tokens) == text);
    CHECK(tokenizer.decode(concatenated(concatenated({1}, tokens), concatenated({1}, tokens))) ==
          "<s>" + text + "<s>" + text);
    CHECK(tokenizer.decode(tokens, false) == " " + text);
  }
  // With --special, each run between added tokens is a run of its own, with its ▁.
  CHECK(tokenizer.encode("ab<s>ab", {true, true}) == concatenated(concatenated(llama2_ids({"▁", "ab"}), {1}),
                                                                  llama2_ids({"▁", "ab"})));
  // Metaspace with prepend_scheme "first": the same, but a text that starts with a space gets no
  // second ▁.
  const Tokenizer metaspace = load_json(llama2_json(true));
  for (const std::string text : {"hello", "hello world", "é", "a\nb"}) CHECK(metaspace.encode(text) == tokenizer.encode(text));
  CHECK(metaspace.encode(" ab") == llama2_ids({"▁", "ab"}));
  CHECK(metaspace.encode("ab", {false, false}) == llama2_ids({"ab"}));
  // Without byte fallback, what the vocabulary lacks is <unk>: one for a run, with fuse_unk.
  CHECK(load_json(llama2_json(false, false, true)).encode("éé a") == llama2_ids({"▁", "<unk>", "▁", "a"}));
  CHECK(load_json(llama2_json(false, false, false)).encode("éé") == llama2_ids({"▁", "<unk>", "<unk>"}));
}

namespace {

// Every cut first_split_point finds in random texts of `pieces` gives the tokens of the whole,
// the part after it encoded as a continuation; returns how many cuts there were.
int check_cuts(const Tokenizer& tokenizer, const std::vector<std::string>& pieces, bool match_added_tokens) {
  std::mt19937 random(21);
  int cuts = 0;
  for (int text_number = 0; text_number < 1000; ++text_number) {
    std::string text;
    for (int i = std::uniform_int_distribution<int>(0, 24)(random); i > 0; --i)
      text += pieces[std::uniform_int_distribution<size_t>(0, pieces.size() - 1)(random)];
    const Tokens whole = tokenizer.encode(text, {true, match_added_tokens});
    for (size_t from = 0; from < text.size();) {
      const size_t found = tokenizer.first_split_point(std::string_view(text).substr(from), match_added_tokens);
      if (found == std::string::npos) break;
      const size_t cut = from + found;
      CHECK_MESSAGE(concatenated(tokenizer.encode(text.substr(0, cut), {true, match_added_tokens}),
                                 tokenizer.encode(text.substr(cut), {false, match_added_tokens})) == whole,
                    "cut at ", cut, " of ", nlohmann::json(text).dump());
      ++cuts;
      from = cut;
    }
  }
  return cuts;
}

}  // namespace

TEST_CASE("cutting a text at its split points leaves its tokens as they are, in each family") {
  const Tokenizer& tokenizer = tiny_tokenizer();
  // A cut after a newline is no split point of GPT-2's regex: here it changes the tokens.
  CHECK(concatenated(tokenizer.encode("x  \n"), tokenizer.encode("y")) != tokenizer.encode("x  \ny"));
  CHECK(tokenizer.first_split_point("x  \ny", false) == 1);
  CHECK(tokenizer.first_split_point("  \n", false) == std::string::npos);
  CHECK(tokenizer.first_split_point("é\u3000b", false) == 2);  // Unicode whitespace counts
  CHECK(tokenizer.first_split_point("a\u0085", false) == 1);   // and U+0085, as Oniguruma's \s has it,
  CHECK(tokenizer.first_split_point("a\u180e", false) == std::string::npos);  // but not U+180E (PCRE2's does)
  CHECK(tokenizer.first_split_point("ab", false) == std::string::npos);
  // Llama 3's: after a newline before what is not whitespace.
  CHECK(llama3_tokenizer().first_split_point("a. \n\nb", false) == 5);
  CHECK(llama3_tokenizer().first_split_point("a b\n ", false) == std::string::npos);
  // Llama 2's: before a space after anything but a space or ▁.
  CHECK(llama2_tokenizer().first_split_point("ab  c", false) == 2);
  CHECK(llama2_tokenizer().first_split_point("▁ c", false) == std::string::npos);
  // With --special, none where a cut would leave the run after <s> without its ▁.
  CHECK(llama2_tokenizer().first_split_point("ab c", true) == std::string::npos);

  const std::vector<std::string> pieces = {"a", "t", "h", "e", "r", "s", "'", "'s", "1", "c", "é", "中", "😀",
                                           " ", "  ", "\t", "\n", "\r\n", "\u3000", "\u00a0", "\u0085", "!", ".", "aa",
                                           "12", "'S", "abc", "\n\n", "<|begin_of_text|>"};
  CHECK(check_cuts(tokenizer, pieces, false) > 1000);
  CHECK(check_cuts(llama3_tokenizer(), pieces, false) > 500);
  CHECK(check_cuts(llama3_tokenizer(), pieces, true) > 500);
  const std::vector<std::string> spaced = {"h", "e", "l", "o", "w", "ab", "é", " ", "  ", "\n", "▁", "<s>", "hello"};
  CHECK(check_cuts(llama2_tokenizer(), spaced, false) > 1000);
  CHECK(check_cuts(load_json(llama2_json(true)), spaced, false) > 1000);
}

TEST_CASE("tokenizer.json holds the same tokenizer as vocab.json and merges.txt, with the same hash") {
  const Tokenizer& pair_files = tiny_tokenizer();
  REQUIRE(pair_files.content_hash().size() == std::string("crc32:").size() + 8);
  CHECK(pair_files.content_hash().starts_with("crc32:"));
  const std::string text = "the other's  thin\n\nthread: 123 aaa é 中文 😀";
  for (const bool merges_as_pairs : {false, true}) {
    TempDir dir;
    write_tokenizer_json(dir, merges_as_pairs);
    // The directory, or the file itself.
    for (const std::string& path : {dir.path().string(), path_in(dir, "tokenizer.json")}) {
      const Tokenizer json_file = Tokenizer::load(path);
      CHECK(json_file.content_hash() == pair_files.content_hash());
      CHECK(json_file.encode(text) == pair_files.encode(text));
      CHECK(json_file.vocab_size() == pair_files.vocab_size());
      CHECK(json_file.document_tokens().before == pair_files.document_tokens().before);
      CHECK(json_file.path() == path);
      // Its added <|endoftext|> is matched where asked for; vocab.json's is not an added token.
      CHECK(json_file.encode("a<|endoftext|>", {true, true}) == ids({"a", "<|endoftext|>"}));
    }
  }
  // vocab.json and merges.txt win where both forms are present; a merge less is another hash.
  TempDir dir;
  write_tokenizer_json(dir, false);
  std::string fewer = merges_txt();
  fewer.erase(fewer.rfind("i n\n"));
  write_vocab_and_merges(dir, tiny_vocabulary().vocab, fewer);
  const Tokenizer fewer_merges = Tokenizer::load(dir.path().string());
  CHECK(fewer_merges.content_hash() != pair_files.content_hash());
  CHECK(fewer_merges.encode("in") == ids({"i", "n"}));
  // A merges.txt without its #version line is read the same.
  TempDir unversioned;
  write_vocab_and_merges(unversioned, tiny_vocabulary().vocab, merges_txt().substr(merges_txt().find('\n') + 1));
  CHECK(Tokenizer::load(unversioned.path().string()).content_hash() == pair_files.content_hash());
}

TEST_CASE("a directory that holds no tokenizer, or files that do not fit together, name the file at fault") {
  TempDir dir;
  const std::string root = dir.path().string();
  CHECK(load_error(root) == fmt::format("{}: not a tokenizer directory: it holds neither vocab.json and merges.txt "
                                        "nor tokenizer.json", root));
  CHECK(load_error(path_in(dir, "none.json")) ==
        fmt::format("{}: no such tokenizer.json or tokenizer directory", path_in(dir, "none.json")));
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
}

TEST_CASE("what a tokenizer.json holds beyond the two BPE families is refused, naming the field") {
  TempDir dir;
  const std::string path = path_in(dir, "tokenizer.json");
  auto error_for = [&](const nlohmann::json& json) {
    write_text(path, json.dump());
    return load_error(path);
  };
  nlohmann::json json = llama3_json();
  json["model"]["type"] = "WordPiece";
  CHECK(error_for(json) == fmt::format("{}: model.type is \"WordPiece\", not \"BPE\"", path));
  CHECK(error_for({{"model", {{"type", "BPE"}}}}) == fmt::format("{}: no model.vocab and model.merges", path));
  json = llama3_json();
  json["pre_tokenizer"]["pretokenizers"][0] = {{"type", "Whitespace"}};
  CHECK(error_for(json) == fmt::format("{}: pre_tokenizer.pretokenizers[0].type \"Whitespace\" is not supported "
                                       "(trainctl reads ByteLevel, Split, Digits, Metaspace and Sequence)", path));
  json = llama3_json();
  json["normalizer"] = {{"type", "NFC"}};
  CHECK(error_for(json) == fmt::format("{}: normalizer.type \"NFC\" is not supported (trainctl reads Prepend, Replace "
                                       "and Sequence)", path));
  json = llama3_json();
  json["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed";
  CHECK(error_for(json) ==
        fmt::format("{}: pre_tokenizer.pretokenizers[0].behavior is \"Removed\": only \"Isolated\" is supported", path));
  json = llama3_json();
  json["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = R"(\w+|\s+)";
  CHECK(error_for(json) == fmt::format("{}: pre_tokenizer.pretokenizers[0].pattern.Regex is \"\\\\w+|\\\\s+\": \\w is not "
                                       "supported (Oniguruma and PCRE2 read it differently)", path));
  json = llama3_json();
  json["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = R"((\p{L}+)";
  CHECK(error_for(json).starts_with(
      fmt::format("{}: pre_tokenizer.pretokenizers[0].pattern.Regex: PCRE2 cannot compile (\\p{{L}}+ (at 7: ", path)));
  json = llama3_json();
  json["pre_tokenizer"]["pretokenizers"][1]["add_prefix_space"] = true;
  CHECK(error_for(json) == fmt::format("{}: pre_tokenizer.pretokenizers[1].add_prefix_space is true: not supported", path));
  json = llama3_json();
  json["post_processor"]["processors"][1] = {{"type", "RobertaProcessing"}};
  CHECK(error_for(json) == fmt::format("{}: post_processor.processors[1].type \"RobertaProcessing\" is not supported "
                                       "(trainctl reads TemplateProcessing, ByteLevel and Sequence)", path));
  json = llama3_json();
  json["truncation"] = {{"max_length", 512}};
  CHECK(error_for(json) ==
        fmt::format("{}: truncation is set: trainctl writes whole documents, neither truncated nor padded", path));
  json = llama3_json();
  json["model"]["dropout"] = 0.1;
  CHECK(error_for(json) == fmt::format("{}: model.dropout is 0.1: BPE dropout is not supported", path));
  json = llama3_json();
  json["added_tokens"][1]["id"] = 999;
  CHECK(error_for(json) == fmt::format("{}: no token has id {}, below the added token id 999", path,
                                       llama3_vocabulary().vocab.size() + 1));
  json = llama2_json(false);
  json["model"]["unk_token"] = "<nope>";
  CHECK(error_for(json) == fmt::format("{}: model.unk_token \"<nope>\" is not a token of model.vocab", path));
  json = llama3_json();
  json["model"]["merges"] = nlohmann::json::array({"Ġ t", nlohmann::json::array({"h"})});
  CHECK(error_for(json) == fmt::format("{}: model.merges[1] is neither \"left right\" nor [\"left\", \"right\"]", path));
  // The merges and the vocabulary are read as lists, apart from the document (tokenizer_json.h):
  // every other spelling of an entry is refused as the document's would be.
  for (const nlohmann::json& entry : {nlohmann::json(7), nlohmann::json::object({{"h", "t"}}),
                                      nlohmann::json::array({"h", "t", "e"}), nlohmann::json::array({nlohmann::json::array({"h"}), "t"}),
                                      nlohmann::json::array({"h", 1})}) {
    json["model"]["merges"] = nlohmann::json::array({"Ġ t", nlohmann::json::array({"h", "e"}), entry, "t h"});
    CHECK(error_for(json) == fmt::format("{}: model.merges[2] is neither \"left right\" nor [\"left\", \"right\"]", path));
  }
  json["model"]["merges"] = "Ġ t";
  CHECK(error_for(json) == fmt::format("{}: model.merges is not an array", path));
  json = llama3_json();
  json["model"]["vocab"]["!"] = nlohmann::json::array({0});
  CHECK(error_for(json) == fmt::format("{}: the id of token \"!\" is not an integer", path));
  json["model"]["vocab"] = nlohmann::json::array({"!"});
  CHECK(error_for(json) == fmt::format("{}: the vocabulary is not an object of token: id", path));
  std::string twice = llama3_json().dump();
  twice.replace(twice.find("\"vocab\":{") + 9, 0, fmt::format("\"!\":{},", llama3_json()["model"]["vocab"].size()));
  write_text(path, twice);
  CHECK(load_error(path) == fmt::format("{}: token \"!\" is listed twice", path));
  // A "vocab" or "merges" elsewhere in the file is the document's.
  json = llama3_json();
  json["decoder"] = {{"vocab", {{"!", 5}}}, {"merges", nlohmann::json::array({"q q"})}, {"type", "ByteLevel"}};
  CHECK(load_json(json).encode("the cat") == load_json(llama3_json()).encode("the cat"));
  json = llama3_json();
  json["model"]["merges"] = nlohmann::json::array({nlohmann::json::array({"Ġ", "q"}), nlohmann::json::array({"q", "q"})});
  CHECK(error_for(json) == fmt::format("{}: model.merges[0]: the merge \"Ġ q\" makes \"Ġq\", which is not a token of {}",
                                       path, path));
  // A file cut short: the parser's position.
  const std::string whole = llama3_json().dump();
  write_text(path, whole.substr(0, whole.size() / 2));
  CHECK(load_error(path).starts_with(fmt::format("{}: not JSON: [json.exception.parse_error.101] parse error at line 1", path)));
  // An added token whose options --special does not honour loads; --special refuses it.
  json = llama3_json();
  json["added_tokens"][0]["lstrip"] = true;
  const Tokenizer lstrip = load_json(json);
  CHECK(lstrip.encode("ab") == llama3_ids({"ab"}));
  CHECK(bad_input([&] { lstrip.encode("ab", {true, true}); }).ends_with(
      ": added_tokens[0].lstrip is true: --special does not match added tokens so"));
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

  const Tokenizer& tokenizer = tiny_tokenizer();
  CHECK(bad_input([&] { tokenizer.encode("abc\xff"); }) == "text is not UTF-8 at byte offset 3 (byte 0xff)");
  CHECK(bad_input([&] { llama2_tokenizer().encode("abc\xff"); }) == "text is not UTF-8 at byte offset 3 (byte 0xff)");
  CHECK(bad_input([&] { tokenizer.first_split_point("a \xc3", false); }) == "text is not UTF-8 at byte offset 2 (byte 0xc3)");
  const std::string expected = fmt::format("token 270 is not below the vocab_size 270 of the tokenizer {}", tokenizer.path());
  CHECK(bad_input([&] { tokenizer.decode(Tokens{1, 270}); }) == expected);
  CHECK(bad_input([&] { tokenizer.token_bytes(270); }) == expected);
}

TEST_CASE("several threads encode at once, each as one thread alone") {
  for (const Tokenizer* tokenizer : {&tiny_tokenizer(), &llama3_tokenizer(), &llama2_tokenizer()}) {
    std::vector<std::string> texts;
    for (int i = 0; i < 8; ++i) texts.push_back(fmt::format("{} the other's thin thread {} aaa hello\n\n", std::string(i, ' '), i));
    std::vector<Tokens> alone;
    for (const std::string& text : texts) alone.push_back(tokenizer->encode(text));
    std::vector<Tokens> together(texts.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < texts.size(); ++i)
      threads.emplace_back([&, i] {
        for (int round = 0; round < 200; ++round) together[i] = tokenizer->encode(texts[i]);
      });
    for (std::thread& thread : threads) thread.join();
    CHECK(together == alone);
  }
}

namespace {

// What tokenize_files must write for `texts` (one file each): each document between the
// tokenizer's document tokens, encoded whole.
Tokens whole_documents(const Tokenizer& tokenizer, const std::vector<std::string>& texts, trainctl::DocumentUnit unit) {
  Tokens expected;
  auto document = [&](const std::string& text) {
    expected = concatenated(expected, tokenizer.document_tokens().before);
    expected = concatenated(expected, tokenizer.encode(text));
    expected = concatenated(expected, tokenizer.document_tokens().after);
  };
  for (const std::string& text : texts) {
    if (unit == trainctl::DocumentUnit::kFile) {
      document(text);
      continue;
    }
    for (size_t start = 0; start <= text.size();) {
      const size_t newline = std::min(text.find('\n', start), text.size());
      std::string line = text.substr(start, newline - start);
      if (newline < text.size() && line.ends_with('\r')) line.pop_back();
      if (!line.empty()) document(line);
      start = newline + 1;
    }
  }
  return expected;
}

}  // namespace

TEST_CASE("files stream in chunks to the tokens of whole documents, whatever the chunk size and threads") {
  TempDir dir;
  const std::string first = path_in(dir, "first.txt"), second = path_in(dir, "second.txt"), empty = path_in(dir, "empty.txt");
  std::string first_text;
  for (int i = 0; i < 200; ++i)
    first_text += fmt::format("the other's  thin\tthread {}: hello world\r\n{}\n\n", i, std::string(i % 7, ' '));
  const std::string second_text = "x  \ny \u3000z é中😀 aaa  ";
  write_text(first, first_text);
  write_text(second, second_text);
  write_text(empty, "");

  for (const Tokenizer* tokenizer : {&tiny_tokenizer(), &llama3_tokenizer(), &llama2_tokenizer()}) {
    CAPTURE(tokenizer->path());
    auto tokenize = [&](trainctl::DocumentUnit documents, int threads, size_t chunk_bytes) {
      const std::string out = path_in(dir, fmt::format("out-{}-{}.bin", threads, chunk_bytes));
      trainctl::TokenOutput output(out, trainctl::TokenFormat::kUint16, 0);
      trainctl::tokenize_files(*tokenizer, {first, empty, second}, {documents, threads, chunk_bytes}, output);
      output.finish();
      return trainctl::read_token_file(out, tokenizer->vocab_size());
    };
    const Tokens files = whole_documents(*tokenizer, {first_text, "", second_text}, trainctl::DocumentUnit::kFile);
    const Tokens lines = whole_documents(*tokenizer, {first_text, "", second_text}, trainctl::DocumentUnit::kLine);
    struct Pass {
      int threads;
      size_t chunk_bytes;
    };
    for (const Pass pass : {Pass{1, 4 << 20}, Pass{1, 1}, Pass{3, 7}, Pass{2, 64}}) {
      CAPTURE(pass.threads);
      CAPTURE(pass.chunk_bytes);
      CHECK(tokenize(trainctl::DocumentUnit::kFile, pass.threads, pass.chunk_bytes) == files);
      CHECK(tokenize(trainctl::DocumentUnit::kLine, pass.threads, pass.chunk_bytes) == lines);
    }
  }

  const std::string bad = path_in(dir, "bad.txt");
  write_text(bad, first_text + "\xe2\x82" + "ok");
  trainctl::TokenOutput output(path_in(dir, "bad.bin"), trainctl::TokenFormat::kUint16, 0);
  CHECK(bad_input([&] {
          trainctl::tokenize_files(tiny_tokenizer(), {bad}, {trainctl::DocumentUnit::kFile, 2, 100}, output);
        }) == fmt::format("{}: not UTF-8 at byte offset {} (byte 0xe2)", bad, first_text.size()));
}

TEST_CASE("shards end at the first document start after --shard-tokens tokens, and hold the whole") {
  TempDir dir;
  std::vector<std::string> inputs;
  std::vector<std::string> texts;
  for (int i = 0; i < 12; ++i) {
    texts.push_back(fmt::format("the other's thin thread number {} {}", i, std::string(i * 3, 'a')));
    inputs.push_back(path_in(dir, fmt::format("{:02}.txt", i)));
    write_text(inputs.back(), texts.back());
  }
  const Tokenizer& tokenizer = llama3_tokenizer();
  const std::string out = path_in(dir, "train.bin");
  trainctl::TokenOutput output(out, trainctl::TokenFormat::kUint16, 40);
  trainctl::tokenize_files(tokenizer, inputs, {trainctl::DocumentUnit::kFile, 2, 16}, output);
  output.finish();
  CHECK_FALSE(std::filesystem::exists(out));
  const uint32_t begin = tokenizer.document_tokens().before[0];
  Tokens all;
  for (size_t index = 0; index < output.files().size(); ++index) {
    const std::string shard = path_in(dir, fmt::format("train_{:06}.bin", index));
    CHECK(output.files()[index]->path() == shard);
    const Tokens tokens = trainctl::read_token_file(shard, tokenizer.vocab_size());
    // Each starts a document; each but the last holds 40 tokens or more, and no more than its
    // last document took it past 40.
    CHECK(tokens.front() == begin);
    const size_t last_start = std::find(tokens.rbegin(), tokens.rend(), begin).base() - tokens.begin() - 1;
    if (index + 1 < output.files().size()) {
      CHECK(tokens.size() >= 40);
      CHECK(last_start < 40);
    }
    all = concatenated(all, tokens);
  }
  CHECK(output.files().size() > 3);
  CHECK(all == whole_documents(tokenizer, texts, trainctl::DocumentUnit::kFile));
  // Shards of that name from before are in the way: a glob of the new ones would take them too.
  std::string refusal;
  try {
    trainctl::TokenOutput again(out, trainctl::TokenFormat::kUint16, 40);
  } catch (const trainctl::UsageError& error) {
    refusal = error.what();
  }
  CHECK(refusal ==
        fmt::format("{} is there, a shard of an earlier run: remove the shards of {} first (a glob of the new ones "
                    "would take it too)", path_in(dir, "train_000000.bin"), out));
}
