// Preflight: the data files a config names, checked against its model before a job waits in a
// queue (validate, submit, run). Headers only, through the model registry's check_data, so
// that it stays cheap whatever the size of the data; and the config.json of the Hugging Face
// directory train.init_from names, if it holds one.
#pragma once

#include <memory>

#include <CLI/CLI.hpp>

#include "config_file.h"

namespace trainctl {

// Checks data.train and data.val of `config` (relative paths are relative to the config file),
// that data.tokenizer loads, that its vocabulary fits model.vocab_size and that the token files
// are in the format it is written in, and train.init_from's config.json (models/config_json.h),
// and, when its sweep varies the model, the data or init_from, of every task, each distinct model
// and path once. Throws BadInput naming the key and the file: "data.train: FILE: ...". For a
// [program], only that its workdir (every task's, when swept) is a directory:
// "program.workdir: DIR is not a directory".
void preflight_data(const Config& config);

// Adds --no-preflight to `command`; the returned flag is set when it is given.
std::shared_ptr<bool> add_no_preflight_flag(CLI::App& command);

}  // namespace trainctl
