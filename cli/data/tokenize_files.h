// The GPT-2 side of `trainctl data tokenize`: text files streamed through Gpt2Tokenizer into a
// token file, each document led by <|endoftext|> as llm.c's data scripts write them. A file is
// read in chunks cut where its tokens cannot change (Gpt2Tokenizer::first_split_point), the
// chunks are encoded on a pool of threads and written in input order: memory stays within a few
// chunks per thread, and the output is the same at any thread count.
#pragma once

#include <cstddef>
#include <fstream>
#include <string>
#include <vector>

#include "gpt2_tokenizer.h"
#include "token_file.h"

namespace trainctl {

enum class DocumentUnit {
  kFile,  // each input file is one document
  kLine,  // each non-empty line is one, without its line ending (\n or \r\n)
};

struct TokenizeFilesOptions {
  DocumentUnit documents = DocumentUnit::kFile;
  int threads = 1;
  size_t chunk_bytes = size_t{4} << 20;
};

// An input of `data tokenize`, open; UsageError for a directory or a file it cannot read.
std::ifstream open_input_file(const std::string& path);

// The threads this process may run on (its CPU affinity, which SLURM sets to the job's cores).
int usable_cores();

// Appends the tokens of `inputs`, in order, to `out`. Text that is not UTF-8 is BadInput naming
// the file and the offset of its first bad byte. Prints progress to stderr when it is a
// terminal, at most once a second, after the first second.
void tokenize_files(const Gpt2Tokenizer& tokenizer, const std::vector<std::string>& inputs,
                    const TokenizeFilesOptions& options, TokenFileWriter& out);

}  // namespace trainctl
