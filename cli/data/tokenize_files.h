// `trainctl data tokenize` with a tokenizer: text files streamed through it into token files, each
// document between the tokens the tokenizer puts around one (Tokenizer::document_tokens: Llama
// 3's <|begin_of_text|> before it, GPT-2's <|endoftext|> as llm.c's data scripts write them). A
// file is read in chunks cut where its tokens cannot change (Tokenizer::first_split_point; lines
// after a newline), the chunks are encoded on a pool of threads and written in input order:
// memory stays within a few chunks per thread, and the output is the same at any thread count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "token_file.h"
#include "tokenizer.h"

namespace trainctl {

enum class DocumentUnit {
  kFile,  // each input file is one document
  kLine,  // each non-empty line is one, without its line ending (\n or \r\n)
};

struct TokenizeFilesOptions {
  DocumentUnit documents = DocumentUnit::kFile;
  int threads = 1;
  size_t chunk_bytes = size_t{4} << 20;
  bool match_added_tokens = false;  // --special
  bool document_tokens = true;      // false: --no-bos-eos
};

// An input of `data tokenize`, open; UsageError for a directory or a file it cannot read.
std::ifstream open_input_file(const std::string& path);

// The threads this process may run on (its CPU affinity, which SLURM sets to the job's cores).
int usable_cores();

// Where tokenize_files writes: one token file (`path` itself), or, with shard_tokens > 0, shards
// of at least shard_tokens tokens, each but the last ended at the first document start after
// that many: `path`'s stem, _000000, _000001, ..., its extension. Files are published together
// by finish(); none are left when it is not reached.
class TokenOutput {
 public:
  // UsageError where a shard of an earlier run is in the way (it would join a glob of these).
  TokenOutput(std::string path, TokenFormat format, int64_t shard_tokens);
  // The next token starts a document.
  void start_document();
  void append(std::span<const uint32_t> tokens);
  // The file being written (the only one without shards).
  TokenFileWriter& current() { return *files_.back(); }
  // Publishes every file, in order.
  void finish();
  const std::vector<std::unique_ptr<TokenFileWriter>>& files() const { return files_; }

 private:
  std::string path_;
  TokenFormat format_;
  int64_t shard_tokens_;
  std::vector<std::unique_ptr<TokenFileWriter>> files_;
};

// The path of shard `index` of `path` (TokenOutput's naming).
std::string shard_path(const std::string& path, int64_t index);

// Appends the tokens of `inputs`, in order, to `out`. Text that is not UTF-8 is BadInput naming
// the file and the offset of its first bad byte. On a terminal, prints a progress line to
// stderr (MB done, MB/s, and the time left) at most once a second, and the last one at the end.
void tokenize_files(const Tokenizer& tokenizer, const std::vector<std::string>& inputs,
                    const TokenizeFilesOptions& options, TokenOutput& out);

}  // namespace trainctl
