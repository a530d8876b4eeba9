// Reading Hugging Face's tokenizer files: see tokenizer_files.h.
#include "tokenizer_files.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bad_input.h"
#include "json.h"
#include "tokenizer_json.h"
#include "utf8.h"

namespace trainctl {

namespace {

// GPT-2's pre-tokenizer (encoder.py in openai/gpt-2), which a ByteLevel pre-tokenizer with
// use_regex applies, as Oniguruma reads it; Llama 3's and Qwen2's Split regexes, the others whose
// cut rule is known (CutRule's comments say why each holds).
constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr const char* kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kEndOfText = "<|endoftext|>";
// Token ids are int32 in a batch.
constexpr int64_t kMaxVocabSize = int64_t{1} << 31;

CutRule cut_rule_of(std::string_view pattern) {
  if (pattern == kGpt2Pattern) return CutRule::kBeforeWhitespace;
  if (pattern == kLlama3Pattern || pattern == kQwen2Pattern) return CutRule::kAfterNewline;
  return CutRule::kNone;
}

// Tokens and lines in messages, as JSON strings: control characters escaped (a NUL would end the
// message), bytes that are not UTF-8 replaced.
std::string json_quoted(std::string_view text) { return json_text(Json(std::string(text))); }

// GPT-2 writes each byte of a token as one printable character, so that vocab.json and
// merges.txt are text: the printable Latin-1 bytes stand for themselves, and the other 68 (the
// controls, the space, 0x7f to 0xa0 and the soft hyphen) for U+0100 onwards, in byte order.
struct ByteCharacters {
  std::array<char32_t, 256> of_byte{};
  std::array<int16_t, 256 + 68> byte_of{};  // -1: no byte

  ByteCharacters() {
    byte_of.fill(-1);
    char32_t next = 256;
    for (int byte = 0; byte < 256; ++byte) {
      const bool printable = (byte >= '!' && byte <= '~') || (byte >= 0xa1 && byte <= 0xac) || byte >= 0xae;
      of_byte[byte] = printable ? static_cast<char32_t>(byte) : next++;
      byte_of[of_byte[byte]] = static_cast<int16_t>(byte);
    }
  }
};
const ByteCharacters kByteCharacters;

// The bytes a byte-level vocabulary entry stands for, or the first character that stands for no
// byte. `text` is UTF-8 (nlohmann-json checks it).
struct DecodedToken {
  std::string bytes;
  std::optional<char32_t> stray;
};

DecodedToken decode_byte_level(std::string_view text) {
  DecodedToken token;
  for (size_t i = 0; i < text.size(); i += utf8_sequence_length(static_cast<unsigned char>(text[i]))) {
    const char32_t character = utf8_code_point_at(text, i);
    const int16_t byte = character < kByteCharacters.byte_of.size() ? kByteCharacters.byte_of[character] : -1;
    if (byte < 0) {
      token.stray = character;
      return token;
    }
    token.bytes.push_back(static_cast<char>(byte));
  }
  return token;
}

// The merges as their file spells them, in rank order: views of the text that `text` (merges.txt)
// or the TokenizerJson holds, and the place of each in the file, for messages.
struct MergeTexts {
  std::string text;
  std::vector<std::pair<std::string_view, std::string_view>> merges;
  std::function<std::string(size_t)> place;
};

MergeTexts read_merges_txt(const std::string& path) {
  MergeTexts result;
  result.text = read_file_text(path);
  std::vector<int64_t> line_numbers;
  int64_t line_number = 0;
  for (size_t start = 0; start < result.text.size();) {
    const size_t end = std::min(result.text.find('\n', start), result.text.size());
    const std::string_view line(result.text.data() + start, end - start);
    start = end + 1;
    ++line_number;
    if (line.empty() || (line_number == 1 && line.starts_with("#version"))) continue;
    const auto parts = split_merge(line);
    if (!parts) throw BadInput(fmt::format("{}:{}: {} is not two tokens separated by a space", path, line_number, json_quoted(line)));
    result.merges.push_back(*parts);
    line_numbers.push_back(line_number);
  }
  result.place = [path, line_numbers](size_t rank) { return fmt::format("{}:{}", path, line_numbers[rank]); };
  return result;
}

// A value of tokenizer.json with its place there ("pre_tokenizer.pretokenizers[0]"), for messages
// that name the field at fault. A key that is absent reads as null.
class Field {
 public:
  Field(const nlohmann::json& value, std::string name, const std::string& file)
      : value_(value), name_(std::move(name)), file_(file) {}

  const nlohmann::json& value() const { return value_; }
  const std::string& name() const { return name_; }
  bool is_null() const { return value_.is_null(); }

  Field operator[](const char* key) const {
    static const nlohmann::json kNull;
    const std::string name = name_.empty() ? key : fmt::format("{}.{}", name_, key);
    if (!value_.is_object() || !value_.contains(key)) return {kNull, name, file_};
    return {value_[key], name, file_};
  }
  Field operator[](size_t index) const { return {value_[index], fmt::format("{}[{}]", name_, index), file_}; }

  [[noreturn]] void fail(const std::string& problem) const {
    throw BadInput(fmt::format("{}: {} {}", file_, name_, problem));
  }
  // The value's text, which must be a string.
  std::string text() const {
    if (!value_.is_string()) fail(fmt::format("is {}, not a string", value_.dump()));
    return value_.get<std::string>();
  }
  bool flag(bool absent) const {
    if (is_null()) return absent;
    if (!value_.is_boolean()) fail(fmt::format("is {}, not true or false", value_.dump()));
    return value_.get<bool>();
  }
  const nlohmann::json& array() const {
    if (!value_.is_array()) fail(is_null() ? "is missing: an array is needed" : "is not an array");
    return value_;
  }
  std::string type() const { return (*this)["type"].text(); }
  [[noreturn]] void unsupported_type(const char* supported) const {
    (*this)["type"].fail(fmt::format("{} is not supported (trainctl reads {})", json_quoted(type()), supported));
  }

 private:
  const nlohmann::json& value_;
  std::string name_;
  const std::string& file_;
};

// Oniguruma's regex (Hugging Face's engine) in PCRE2's spelling, for the constructs whose meaning
// the two share once \s is Oniguruma's (kWhitespaceClass). Refused where they differ and no
// spelling keeps Oniguruma's meaning: \w and \b (which take marks in one and not the other), \h
// (a hex digit in Oniguruma), ^ and $ (line anchors in Oniguruma), nested classes and &&, and \S
// inside a class.
std::string pcre2_pattern(const std::string& pattern, const Field& field) {
  std::string out;
  bool in_class = false;
  size_t class_body = 0;  // where the class's members start: a ] there is a member
  auto refuse = [&](std::string_view construct) {
    field.fail(fmt::format("is {}: {} is not supported (Oniguruma and PCRE2 read it differently)", json_quoted(pattern),
                           construct));
  };
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\') {
      if (i + 1 == pattern.size()) refuse("a trailing \\");
      const char escaped = pattern[++i];
      if (escaped == 's') {
        out += in_class ? std::string(kWhitespaceClass) : fmt::format("[{}]", kWhitespaceClass);
      } else if (escaped == 'S') {
        if (in_class) refuse("\\S inside a class");
        out += fmt::format("[^{}]", kWhitespaceClass);
      } else if (std::string_view("wWbBhHGQEKRXNgkoc").find(escaped) != std::string_view::npos ||
                 (escaped >= '1' && escaped <= '9')) {
        refuse(fmt::format("\\{}", escaped));
      } else {
        out += c;
        out += escaped;
      }
      continue;
    }
    if (in_class) {
      if (c == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {
        const size_t end = pattern.find(":]", i + 2);
        if (end == std::string::npos) refuse("an unterminated [:class:]");
        out.append(pattern, i, end + 2 - i);
        i = end + 1;
        continue;
      }
      if (c == '[') refuse("a class inside a class");
      if (c == '&' && i + 1 < pattern.size() && pattern[i + 1] == '&') refuse("&& in a class");
      if (c == ']' && i > class_body) in_class = false;
      out += c;
      continue;
    }
    if (c == '^' || c == '$') refuse(std::string(1, c));
    if (c == '[') {
      in_class = true;
      class_body = i + 1;
      if (class_body < pattern.size() && pattern[class_body] == '^') ++class_body;
    }
    out += c;
  }
  return out;
}

// What a tokenizer.json says beside its vocabulary and merges, read field by field.
class JsonReader {
 public:
  JsonReader(const nlohmann::json& root, const std::string& path, TokenizerSpec& spec)
      : root_(root, "", path), spec_(spec) {}

  void read_text_steps() {
    for (const char* key : {"truncation", "padding"})
      if (!root_[key].is_null()) root_[key].fail("is set: trainctl writes whole documents, neither truncated nor padded");
    if (!root_["normalizer"].is_null()) read_normalizer(root_["normalizer"]);
    if (!root_["pre_tokenizer"].is_null()) read_pre_tokenizer(root_["pre_tokenizer"], true, true);
    spec_.byte_level = byte_level_;
  }

  void read_model_options() {
    const Field model = root_["model"];
    if (!model["dropout"].is_null() && !(model["dropout"].value().is_number() && model["dropout"].value() == 0))
      model["dropout"].fail(fmt::format("is {}: BPE dropout is not supported", model["dropout"].value().dump()));
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
      if (!model[key].is_null() && !model[key].text().empty())
        model[key].fail(fmt::format("is {}: not supported", model[key].value().dump()));
    spec_.byte_fallback = model["byte_fallback"].flag(false);
    spec_.fuse_unk = model["fuse_unk"].flag(false);
    spec_.ignore_merges = model["ignore_merges"].flag(false);
  }

  // After the vocabulary: the unknown token, the added tokens and the post-processor.
  void read_tokens(const std::unordered_map<std::string_view, uint32_t>& id_of_text) {
    const Field unk = root_["model"]["unk_token"];
    if (!unk.is_null()) {
      const auto found = id_of_text.find(unk.text());
      if (found == id_of_text.end()) unk.fail(fmt::format("{} is not a token of model.vocab", json_quoted(unk.text())));
      spec_.unk = found->second;
    }
    const Field added = root_["added_tokens"];
    if (!added.is_null()) {
      for (size_t i = 0; i < added.array().size(); ++i) read_added_token(added[i]);
    }
    if (!root_["post_processor"].is_null()) read_post_processor(root_["post_processor"]);
  }

  bool has_template() const { return has_template_; }

 private:
  void read_normalizer(const Field& normalizer) {
    const std::string type = normalizer.type();
    if (type == "Sequence") {
      const Field steps = normalizer["normalizers"];
      for (size_t i = 0; i < steps.array().size(); ++i) read_normalizer(steps[i]);
    } else if (type == "Prepend") {
      spec_.normalizer.push_back({NormalizerStep::Kind::kPrepend, normalizer["prepend"].text(), ""});
    } else if (type == "Replace") {
      const Field pattern = normalizer["pattern"];
      if (pattern["String"].is_null())
        pattern.fail(fmt::format("is {}: only a String pattern is supported", pattern.value().dump()));
      const std::string text = pattern["String"].text();
      if (text.empty()) pattern["String"].fail("is empty");
      spec_.normalizer.push_back({NormalizerStep::Kind::kReplace, text, normalizer["content"].text()});
    } else {
      normalizer.unsupported_type("Prepend, Replace and Sequence");
    }
  }

  // `alone`: the whole pre-tokenizer, not part of a Sequence; `last`: nothing comes after it.
  void read_pre_tokenizer(const Field& pre_tokenizer, bool alone, bool last) {
    const std::string type = pre_tokenizer.type();
    if (type == "Sequence") {
      const Field stages = pre_tokenizer["pretokenizers"];
      const size_t count = stages.array().size();
      for (size_t i = 0; i < count; ++i) read_pre_tokenizer(stages[i], false, last && i + 1 == count);
    } else if (type == "ByteLevel") {
      // Its mapping of bytes to characters would change what any stage after it matches.
      if (!last) pre_tokenizer.fail("is a ByteLevel pre-tokenizer before another: not supported");
      if (pre_tokenizer["add_prefix_space"].flag(false))
        pre_tokenizer["add_prefix_space"].fail("is true: not supported");
      if (pre_tokenizer["use_regex"].flag(true)) add_split(kGpt2Pattern, pre_tokenizer["use_regex"]);
      byte_level_ = true;
    } else if (type == "Split") {
      if (const std::string behavior = pre_tokenizer["behavior"].text(); behavior != "Isolated")
        pre_tokenizer["behavior"].fail(fmt::format("is {}: only \"Isolated\" is supported", json_quoted(behavior)));
      if (pre_tokenizer["invert"].flag(false)) pre_tokenizer["invert"].fail("is true: not supported");
      const Field pattern = pre_tokenizer["pattern"];
      if (!pattern["Regex"].is_null()) {
        add_split(pattern["Regex"].text(), pattern["Regex"]);
      } else {
        spec_.splits.push_back({pcre2_literal(pattern["String"].text()), pattern["String"].name(), CutRule::kNone});
      }
    } else if (type == "Digits") {
      // Rust's char::is_numeric, which Digits splits on, is \p{N}.
      spec_.splits.push_back({pre_tokenizer["individual_digits"].flag(false) ? R"(\p{N})" : R"(\p{N}+)",
                              pre_tokenizer.name(), CutRule::kAnywhere});
    } else if (type == "Metaspace") {
      if (!alone) pre_tokenizer.fail("is a Metaspace pre-tokenizer in a Sequence: not supported");
      read_metaspace(pre_tokenizer);
    } else {
      pre_tokenizer.unsupported_type("ByteLevel, Split, Digits, Metaspace and Sequence");
    }
  }

  void add_split(const std::string& pattern, const Field& field) {
    spec_.splits.push_back({pcre2_pattern(pattern, field), field.name(), cut_rule_of(pattern)});
  }

  void read_metaspace(const Field& metaspace) {
    Metaspace step{metaspace["replacement"].text()};
    if (step.replacement.empty()) metaspace["replacement"].fail("is empty");
    if (const Field scheme = metaspace["prepend_scheme"]; !scheme.is_null()) {
      const std::string name = scheme.text();
      if (name == "always") {
        step.prepend = PrependScheme::kAlways;
      } else if (name == "first") {
        step.prepend = PrependScheme::kFirst;
      } else if (name == "never") {
        step.prepend = PrependScheme::kNever;
      } else {
        scheme.fail(fmt::format("is {}, not \"always\", \"first\" or \"never\"", json_quoted(name)));
      }
    } else {
      step.prepend = metaspace["add_prefix_space"].flag(true) ? PrependScheme::kAlways : PrependScheme::kNever;
    }
    step.split = metaspace["split"].flag(true);
    spec_.metaspace = step;
  }

  void read_added_token(const Field& token) {
    const nlohmann::json& id = token["id"].value();
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= kMaxVocabSize)
      token["id"].fail(fmt::format("is {}, not an id", id.dump()));
    AddedToken added{id.get<uint32_t>(), token["content"].text(), token["normalized"].flag(true), ""};
    if (added.content.empty()) token["content"].fail("is empty");
    for (const char* flag : {"lstrip", "rstrip", "single_word"})
      if (token[flag].flag(false) && added.unsupported.empty()) added.unsupported = token[flag].name() + " is true";
    if (added.normalized && !spec_.normalizer.empty() && added.unsupported.empty())
      added.unsupported = token["normalized"].name() + " is true and the file has a normalizer";
    spec_.added_tokens.push_back(std::move(added));
  }

  void read_post_processor(const Field& processor) {
    const std::string type = processor.type();
    if (type == "Sequence") {
      const Field processors = processor["processors"];
      for (size_t i = 0; i < processors.array().size(); ++i) read_post_processor(processors[i]);
    } else if (type == "TemplateProcessing") {
      if (has_template_) processor.fail("is a second TemplateProcessing: not supported");
      read_template(processor);
    } else if (type != "ByteLevel") {  // ByteLevel's trims offsets alone, which trainctl has none of
      processor.unsupported_type("TemplateProcessing, ByteLevel and Sequence");
    }
  }

  void read_template(const Field& processor) {
    has_template_ = true;
    const Field single = processor["single"];
    const Field special_tokens = processor["special_tokens"];
    bool text_seen = false;
    for (size_t i = 0; i < single.array().size(); ++i) {
      const Field item = single[i];
      if (!item["Sequence"].is_null()) {
        if (item["Sequence"]["id"].text() != "A" || text_seen)
          item["Sequence"].fail("is not the one sequence \"A\" of a single text: not supported");
        text_seen = true;
        continue;
      }
      const std::string name = item["SpecialToken"]["id"].text();
      const Field ids = special_tokens[name.c_str()]["ids"];
      for (size_t k = 0; k < ids.array().size(); ++k) {
        const nlohmann::json& id = ids[k].value();
        if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= kMaxVocabSize)
          ids[k].fail(fmt::format("is {}, not an id", id.dump()));
        (text_seen ? spec_.post_processor.after : spec_.post_processor.before).push_back(id.get<uint32_t>());
      }
    }
    if (!text_seen) single.fail("holds no sequence \"A\"");
  }

  Field root_;
  TokenizerSpec& spec_;
  bool byte_level_ = false;
  bool has_template_ = false;
};

// The vocabulary, merges and byte tokens of `spec` from the model's vocab (token text -> id) of
// `spec.vocab_file` and the merges in rank order.
void build_vocabulary(const std::optional<std::vector<VocabEntry>>& entries, const MergeTexts& merge_texts,
                      TokenizerSpec& spec, std::unordered_map<std::string_view, uint32_t>& id_of_text) {
  const std::string& vocab_file = spec.vocab_file;
  if (!entries) throw BadInput(fmt::format("{}: the vocabulary is not an object of token: id", vocab_file));
  const std::vector<VocabEntry>& vocab = *entries;
  const auto size = static_cast<int64_t>(vocab.size());
  if (size > kMaxVocabSize) throw BadInput(fmt::format("{}: {} tokens, more than the {} ids a batch holds", vocab_file, size, kMaxVocabSize));
  spec.byte_tokens.fill(kNoToken);
  spec.vocab.reserve(static_cast<size_t>(size));
  id_of_text.reserve(static_cast<size_t>(size));
  std::vector<std::string_view> text_of_id(static_cast<size_t>(size));
  spec.token_bytes.resize(static_cast<size_t>(size));
  // The text that stands for a space (SentencePiece-style): decoding gives the space back.
  std::string space_replacement;
  if (spec.metaspace) space_replacement = spec.metaspace->replacement;
  for (const NormalizerStep& step : spec.normalizer)
    if (step.kind == NormalizerStep::Kind::kReplace && step.text == " ") space_replacement = step.replacement;
  for (const auto& [text, id_value] : vocab) {
    if (!id_value) throw BadInput(fmt::format("{}: the id of token {} is not an integer", vocab_file, json_quoted(text)));
    const int64_t id = *id_value;
    if (id < 0 || id >= size)
      throw BadInput(fmt::format("{}: token {} has id {}, outside 0 to {} ({} tokens)", vocab_file, json_quoted(text), id,
                                 size - 1, size));
    if (!text_of_id[id].empty())
      throw BadInput(fmt::format("{}: tokens {} and {} both have id {}", vocab_file, json_quoted(text_of_id[id]),
                                 json_quoted(text), id));
    std::string bytes;
    if (spec.byte_level) {
      DecodedToken decoded = decode_byte_level(text);
      if (decoded.stray)
        throw BadInput(fmt::format("{}: token {} (id {}) is not byte-level: U+{:04X} stands for no byte", vocab_file,
                                   json_quoted(text), id, static_cast<uint32_t>(*decoded.stray)));
      bytes = std::move(decoded.bytes);
    } else if (unsigned byte = 0; spec.byte_fallback && text.size() == 6 && std::sscanf(text.c_str(), "<0x%2X>", &byte) == 1 &&
                                  fmt::format("<0x{:02X}>", byte) == text) {
      bytes = std::string(1, static_cast<char>(byte));
      spec.byte_tokens[byte] = static_cast<uint32_t>(id);
    } else {
      bytes = space_replacement.empty() ? text : replace_all(text, space_replacement, " ");
    }
    spec.vocab.emplace(spec.byte_level ? bytes : text, static_cast<uint32_t>(id));
    spec.token_bytes[id] = std::move(bytes);
    const auto [entry, added] = id_of_text.emplace(text, static_cast<uint32_t>(id));
    if (!added) throw BadInput(fmt::format("{}: token {} is listed twice", vocab_file, json_quoted(text)));
    text_of_id[id] = entry->first;
  }
  if (spec.byte_level) {
    for (int byte = 0; byte < 256; ++byte) {
      const auto found = spec.vocab.find(std::string(1, static_cast<char>(byte)));
      if (found == spec.vocab.end())
        throw BadInput(fmt::format("{}: no token for byte 0x{:02x} ({})", vocab_file, byte,
                                   json_quoted(utf8_of(kByteCharacters.of_byte[byte]))));
      spec.byte_tokens[byte] = found->second;
    }
  }
  spec.merges.reserve(merge_texts.merges.size());
  std::string joined;
  for (size_t rank = 0; rank < merge_texts.merges.size(); ++rank) {
    // Named variables, not a structured binding: clang 14 (the fuzz build) cannot capture those.
    const std::string_view left_text = merge_texts.merges[rank].first, right_text = merge_texts.merges[rank].second;
    auto id_of = [&](std::string_view text, const char* what) {
      const auto found = id_of_text.find(text);
      if (found == id_of_text.end())
        throw BadInput(fmt::format("{}: the merge {} {} {}, which is not a token of {}", merge_texts.place(rank),
                                   json_quoted(fmt::format("{} {}", left_text, right_text)), what, json_quoted(text),
                                   vocab_file));
      return found->second;
    };
    const uint32_t left = id_of(left_text, "names"), right = id_of(right_text, "names");
    joined.assign(left_text).append(right_text);
    spec.merges.push_back({left, right, id_of(joined, "makes")});
  }
}

MergeTexts read_json_merges(const TokenizerJson& json, const std::string& path) {
  const Field field = Field(json.document, "", path)["model"]["merges"];
  if (!json.merges) field.array();  // it fails, naming what is there instead
  if (json.malformed_merge)
    throw BadInput(fmt::format("{}: model.merges[{}] is neither \"left right\" nor [\"left\", \"right\"]", path,
                               *json.malformed_merge));
  MergeTexts result;
  result.merges.reserve(json.merges->size());
  for (const auto& [left, right] : *json.merges) result.merges.emplace_back(left, right);
  result.place = [path](size_t rank) { return fmt::format("{}: model.merges[{}]", path, rank); };
  return result;
}

// The added tokens past the model's vocabulary extend it; those in it keep their id and take
// the added token's text for decoding. Every id below the largest must have a token.
void add_added_tokens(TokenizerSpec& spec) {
  const size_t model_size = spec.token_bytes.size();
  for (const AddedToken& token : spec.added_tokens) {
    if (token.id >= spec.token_bytes.size()) spec.token_bytes.resize(token.id + 1);
    spec.token_bytes[token.id] = token.content;
  }
  for (size_t id = model_size; id < spec.token_bytes.size(); ++id) {
    const bool added = std::any_of(spec.added_tokens.begin(), spec.added_tokens.end(),
                                   [&](const AddedToken& token) { return token.id == id; });
    if (!added)
      throw BadInput(fmt::format("{}: no token has id {}, below the added token id {}", spec.path, id,
                                 spec.token_bytes.size() - 1));
  }
}

void require_ids_in_vocabulary(const std::vector<uint32_t>& ids, const TokenizerSpec& spec, const char* field) {
  for (const uint32_t id : ids)
    if (id >= spec.token_bytes.size())
      throw BadInput(fmt::format("{}: {} names id {}, past the vocabulary's {} tokens", spec.path, field, id,
                                 spec.token_bytes.size()));
}

// <|endoftext|> before each document, as llm.c writes GPT-2's data, for a byte-level file that
// declares no post-processor; none for any other without one.
DocumentTokens end_of_text_before(const TokenizerSpec& spec) {
  const auto found = std::find(spec.token_bytes.begin(), spec.token_bytes.end(), kEndOfText);
  if (!spec.byte_level || found == spec.token_bytes.end()) return {};
  return {{static_cast<uint32_t>(found - spec.token_bytes.begin())}, {}};
}

TokenizerSpec read_tokenizer_json(const std::string& json_path, const std::string& given) {
  const TokenizerJson file = read_tokenizer_json_file(json_path, VocabAt::kModel);
  const nlohmann::json& json = file.document;
  TokenizerSpec spec;
  spec.path = given;
  spec.vocab_file = json_path;
  if (!json.is_object() || !json.contains("model") || !json["model"].is_object() ||
      !(file.vocab || json["model"].contains("vocab")) || !(file.merges || json["model"].contains("merges")))
    throw BadInput(fmt::format("{}: no model.vocab and model.merges", json_path));
  const nlohmann::json& model = json["model"];
  if (model.contains("type") && model["type"] != "BPE")
    throw BadInput(fmt::format("{}: model.type is {}, not \"BPE\"", json_path, model["type"].dump()));
  JsonReader reader(json, json_path, spec);
  reader.read_text_steps();
  reader.read_model_options();
  const MergeTexts merges = read_json_merges(file, json_path);
  std::unordered_map<std::string_view, uint32_t> id_of_text;
  build_vocabulary(file.vocab, merges, spec, id_of_text);
  reader.read_tokens(id_of_text);
  add_added_tokens(spec);
  require_ids_in_vocabulary(spec.post_processor.before, spec, "post_processor");
  require_ids_in_vocabulary(spec.post_processor.after, spec, "post_processor");
  spec.documents = reader.has_template() ? spec.post_processor : end_of_text_before(spec);
  return spec;
}

}  // namespace

std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(text.size());
  for (size_t at = 0; at < text.size();) {
    if (text.substr(at, from.size()) == from) {
      out += to;
      at += from.size();
    } else {
      out += text[at++];
    }
  }
  return out;
}

std::string pcre2_literal(std::string_view text) {
  std::string out;
  for (const char c : text) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}


TokenizerSpec read_tokenizer_spec(const std::string& path) {
  std::error_code ignored;
  if (!std::filesystem::is_directory(path, ignored)) {
    if (!std::filesystem::exists(path, ignored))
      throw BadInput(fmt::format("{}: no such tokenizer.json or tokenizer directory", path));
    return read_tokenizer_json(path, path);
  }
  const std::filesystem::path folder(path);
  const std::string vocab_path = (folder / "vocab.json").string(), merges_path = (folder / "merges.txt").string(),
                    json_path = (folder / "tokenizer.json").string();
  if (std::filesystem::exists(vocab_path, ignored) && std::filesystem::exists(merges_path, ignored)) {
    TokenizerSpec spec;
    spec.path = path;
    spec.vocab_file = vocab_path;
    const nlohmann::json none;
    spec.splits.push_back({pcre2_pattern(kGpt2Pattern, Field(none, "GPT-2's regex", path)), "GPT-2's regex",
                           CutRule::kBeforeWhitespace});
    std::unordered_map<std::string_view, uint32_t> id_of_text;
    build_vocabulary(read_tokenizer_json_file(vocab_path, VocabAt::kRoot).vocab, read_merges_txt(merges_path), spec,
                     id_of_text);
    spec.documents = end_of_text_before(spec);
    if (spec.documents.before.empty()) throw BadInput(fmt::format("{}: no {} token", vocab_path, kEndOfText));
    return spec;
  }
  if (std::filesystem::exists(json_path, ignored)) return read_tokenizer_json(json_path, path);
  throw BadInput(fmt::format("{}: not a tokenizer directory: it holds neither vocab.json and merges.txt nor tokenizer.json",
                             path));
}

}  // namespace trainctl
