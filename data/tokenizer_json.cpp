// Reading tokenizer.json and vocab.json quickly: see tokenizer_json.h.
#include "tokenizer_json.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>

#include <fmt/format.h>

#include "bad_input.h"

namespace trainctl {

namespace {

using Json = nlohmann::json;

// nlohmann-json's SAX events into a TokenizerJson: values into `document` as nlohmann-json's own
// parser puts them, but the vocabulary's and the merges' entries into their lists.
class ListingHandler : public nlohmann::json_sax<Json> {
 public:
  explicit ListingHandler(VocabAt vocab_at) : vocab_at_(vocab_at) {}

  TokenizerJson result;
  std::optional<std::string> error;  // the parser's message

  bool null() override { return scalar(nullptr); }
  bool boolean(bool value) override { return scalar(value); }
  bool number_integer(number_integer_t value) override { return scalar(value, value); }
  bool number_unsigned(number_unsigned_t value) override {
    // An id past int64's range is as far out of the vocabulary's as any other.
    return scalar(value, static_cast<int64_t>(std::min<number_unsigned_t>(value, std::numeric_limits<int64_t>::max())));
  }
  bool number_float(number_float_t value, const string_t&) override { return scalar(value); }
  bool binary(binary_t& value) override { return scalar(Json::binary(std::move(value))); }
  bool string(string_t& value) override {
    if (ignored_depth_ > 0) return true;
    if (list_ == List::kMerges) {
      const auto parts = split_merge(value);
      if (parts) {
        result.merges->emplace_back(parts->first, parts->second);
      } else {
        malformed_merge();
      }
      ++merge_index_;
      return true;
    }
    if (list_ == List::kMergePair) {
      if (pair_parts_ < 2) (pair_parts_ == 0 ? pair_.first : pair_.second) = std::move(value);
      ++pair_parts_;
      return true;
    }
    return scalar(std::move(value));
  }
  bool key(string_t& value) override {
    if (ignored_depth_ == 0) key_ = std::move(value);
    return true;
  }
  bool start_object(std::size_t) override { return start(Json::object()); }
  bool start_array(std::size_t) override { return start(Json::array()); }
  bool end_object() override { return end(); }
  bool end_array() override { return end(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& exception) override {
    error = exception.what();
    return false;
  }

 private:
  enum class List {
    kNone,       // in the document
    kVocab,      // in the vocabulary's object
    kMerges,     // in the merges' array
    kMergePair,  // in a merge's [left, right]
  };

  // A value that is neither an object nor an array; `id`, what it is as a vocabulary entry's.
  bool scalar(Json value, std::optional<int64_t> id = std::nullopt) {
    if (ignored_depth_ > 0) return true;
    switch (list_) {
      case List::kVocab:
        result.vocab->push_back({std::move(key_), id});
        break;
      case List::kMerges:
        malformed_merge();
        ++merge_index_;
        break;
      case List::kMergePair:
        pair_parts_ = 3;  // a part that is not a string
        break;
      case List::kNone:
        place(std::move(value));
        break;
    }
    return true;
  }

  bool start(Json container) {
    if (ignored_depth_ > 0 || list_ == List::kVocab || list_ == List::kMergePair ||
        (list_ == List::kMerges && !container.is_array())) {
      // Inside a value no list takes: an id that is not an integer, a merge spelt neither way.
      if (ignored_depth_ == 0) {
        if (list_ == List::kVocab) result.vocab->push_back({std::move(key_), std::nullopt});
        if (list_ == List::kMergePair) pair_parts_ = 3;
        if (list_ == List::kMerges) {
          malformed_merge();
          ++merge_index_;
        }
      }
      ++ignored_depth_;
      return true;
    }
    if (list_ == List::kMerges) {
      list_ = List::kMergePair;
      pair_parts_ = 0;
      return true;
    }
    if (container.is_object() && is_list_place("vocab")) {
      list_ = List::kVocab;
      result.vocab.emplace();
      return true;
    }
    if (container.is_array() && is_list_place("merges")) {
      list_ = List::kMerges;
      result.merges.emplace();
      return true;
    }
    Json* placed = place(std::move(container));
    if (stack_.size() == 1 && stack_[0]->is_object() && key_ == "model") model_ = placed;
    stack_.push_back(placed);
    return true;
  }

  bool end() {
    if (ignored_depth_ > 0) {
      --ignored_depth_;
    } else if (list_ == List::kMergePair) {
      if (pair_parts_ == 2) {
        result.merges->push_back(std::move(pair_));
      } else {
        malformed_merge();
      }
      ++merge_index_;
      list_ = List::kMerges;
    } else if (list_ != List::kNone) {
      list_ = List::kNone;
    } else {
      stack_.pop_back();
    }
    return true;
  }

  // Whether the container starting now is the list `name`: vocab.json's root, or model.vocab and
  // model.merges of tokenizer.json.
  bool is_list_place(std::string_view name) const {
    if (vocab_at_ == VocabAt::kRoot) return name == "vocab" && stack_.empty();
    return stack_.size() == 2 && stack_[1] == model_ && key_ == name;
  }

  Json* place(Json value) {
    if (stack_.empty()) {
      result.document = std::move(value);
      return &result.document;
    }
    Json& parent = *stack_.back();
    if (parent.is_object()) {
      Json& slot = parent[key_];
      slot = std::move(value);
      return &slot;
    }
    parent.push_back(std::move(value));
    return &parent.back();
  }

  void malformed_merge() {
    if (!result.malformed_merge) result.malformed_merge = merge_index_;
  }

  const VocabAt vocab_at_;
  // The document's objects and arrays being read, outermost first (each stays where it is while
  // it is read: a std::map's values and an array's last element do not move).
  std::vector<Json*> stack_;
  Json* model_ = nullptr;  // the document's "model" object
  std::string key_;
  List list_ = List::kNone;
  int ignored_depth_ = 0;
  size_t merge_index_ = 0;
  std::pair<std::string, std::string> pair_;
  int pair_parts_ = 0;
};

}  // namespace

TokenizerJson read_tokenizer_json_file(const std::string& path, VocabAt vocab_at) {
  const std::string text = read_file_text(path);
  ListingHandler handler(vocab_at);
  if (!Json::sax_parse(text, &handler)) throw BadInput(fmt::format("{}: not JSON: {}", path, handler.error.value_or("")));
  return std::move(handler.result);
}

std::optional<std::pair<std::string_view, std::string_view>> split_merge(std::string_view line) {
  const size_t space = line.find(' ');
  if (space == std::string_view::npos || space == 0 || space + 1 == line.size() ||
      line.find(' ', space + 1) != std::string_view::npos)
    return std::nullopt;
  return std::pair(line.substr(0, space), line.substr(space + 1));
}

std::string read_file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw BadInput(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace trainctl
