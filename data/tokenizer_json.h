// Reading tokenizer.json and vocab.json quickly: their two large parts, the vocabulary (token:
// id) and the merges (Llama 3's: 128,000 and 280,000), go into flat lists as nlohmann-json's SAX
// parser reads them, and the rest into a document. nlohmann-json's document holds a node or two
// per value, which made loading Llama 3's tokenizer.json take a second.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace trainctl {

struct VocabEntry {
  std::string text;
  std::optional<int64_t> id;  // none where the file's value is not an integer
};

struct TokenizerJson {
  // The file, but for the vocabulary and the merges where they are read into the lists below.
  nlohmann::json document;
  // The vocabulary's entries in the file's order, where it is an object.
  std::optional<std::vector<VocabEntry>> vocab;
  // The merges' parts in rank order, where they are an array: "left right" or ["left", "right"].
  std::optional<std::vector<std::pair<std::string, std::string>>> merges;
  // The index of the first merge spelt neither way (which `merges` leaves out).
  std::optional<size_t> malformed_merge;
};

enum class VocabAt {
  kRoot,   // vocab.json: the file is the vocabulary
  kModel,  // tokenizer.json: model.vocab, and model.merges
};

// Reads `path`. Throws BadInput "PATH: not JSON: ..." for a file that is not JSON.
TokenizerJson read_tokenizer_json_file(const std::string& path, VocabAt vocab_at);

// "left right": GPT-2's merges.txt line, and tokenizer.json's older form of a merge; none for
// text that is not two parts separated by one space.
std::optional<std::pair<std::string_view, std::string_view>> split_merge(std::string_view line);

// The file's bytes. Throws BadInput for a file that cannot be read.
std::string read_file_text(const std::string& path);

}  // namespace trainctl
