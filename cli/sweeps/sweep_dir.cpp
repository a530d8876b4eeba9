// The sweep directory: see sweep_dir.h.
#include "sweeps/sweep_dir.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "atomic_file.h"
#include "config_reader.h"
#include "errors.h"
#include "run_files.h"
#include "run_record.h"

namespace trainctl {

namespace fs = std::filesystem;

namespace {
constexpr int64_t kManifestFormat = 1;

toml::array integer_array(const std::vector<int64_t>& values) {
  toml::array array;
  for (int64_t value : values) array.push_back(value);
  return array;
}

// Each element of the array of tables `key`, read through its own TableReader. Keys a newer
// trainctl may add are not rejected: the manifest is written by trainctl, not by people.
template <typename ReadOne>
void for_each_table(const toml::table& root, std::string_view key, const std::string& file, ReadOne read_one) {
  const toml::node* node = root.get(key);
  if (node == nullptr) return;
  const toml::array* array = node->as_array();
  if (array == nullptr || !array->is_array_of_tables())
    throw ConfigError(position_of(*node, file), std::string(key), "expected an array of tables");
  for (size_t i = 0; i < array->size(); ++i) {
    const toml::node& element = (*array)[i];
    TableReader reader(element.as_table(), fmt::format("{}[{}]", key, i), file, position_of(element, file));
    read_one(reader, *element.as_table());
  }
}
}  // namespace

SweepDir::SweepDir(std::string path) : path_(fs::absolute(path).lexically_normal().string()) {
  while (path_.size() > 1 && path_.back() == '/') path_.pop_back();
}

std::string SweepDir::array_script(size_t array) const { return fmt::format("{}/arrays/array-{}.sbatch", path_, array); }

RunDir SweepDir::task(int64_t index) const { return RunDir(fmt::format("{}/tasks/{}", path_, index)); }

bool SweepDir::exists() const { return fs::exists(manifest()); }

std::string manifest_text(const SweepManifest& manifest) {
  toml::table root;
  root.insert("format", kManifestFormat);
  root.insert("name", manifest.name);
  root.insert("config", manifest.config);
  toml::array parameters;
  for (const std::string& path : manifest.parameters) parameters.push_back(path);
  root.insert("parameters", parameters);
  root.insert("samples", manifest.samples);
  root.insert("seed", manifest.seed);
  if (manifest.max_parallel) root.insert("max_parallel", *manifest.max_parallel);
  if (const std::optional<SweepSchedule>& schedule = manifest.schedule)
    root.insert("schedule", toml::table{{"kind", schedule->kind_name()},
                                        {"metric", schedule->metric},
                                        {"mode", schedule->mode_name()},
                                        {"reduction_factor", schedule->reduction_factor},
                                        {"rungs", integer_array(schedule->rungs)}});

  toml::array tasks;
  for (const SweepTask& task : manifest.tasks) {
    toml::table params;
    for (size_t i = 0; i < manifest.parameters.size(); ++i)
      task.values[i].visit([&](const auto& value) { params.insert(manifest.parameters[i], value); });
    tasks.push_back(toml::table{{"index", task.index}, {"params", params}});
  }
  root.insert("tasks", tasks);

  toml::array arrays;
  for (const ManifestArray& array : manifest.arrays) {
    toml::table entry{{"job_id", array.job_id}, {"tasks", integer_array(array.tasks)}, {"script", array.script},
                      {"reason", array.reason}, {"submitted", array.submitted}};
    if (!array.after.empty()) entry.insert("after", array.after);
    arrays.push_back(entry);
  }
  root.insert("arrays", arrays);

  std::ostringstream text;
  text << "# trainctl sweep manifest: what each task runs, and every array submitted for them\n" << root << "\n";
  return text.str();
}

SweepManifest parse_manifest(std::string_view text, const std::string& file) {
  const toml::table root = parse_config_text(text, file);
  TableReader reader(&root, "manifest", file, {file, 1, 1});
  if (reader.integer("format") != kManifestFormat)
    reader.fail("format", fmt::format("this trainctl reads manifest format {}", kManifestFormat));
  SweepManifest manifest;
  manifest.name = reader.string("name");
  manifest.config = reader.string("config");
  manifest.parameters = reader.string_list("parameters");
  manifest.samples = reader.integer("samples", std::nullopt, 1);
  manifest.seed = reader.integer("seed", std::nullopt, 0);
  if (reader.has("max_parallel")) manifest.max_parallel = reader.integer("max_parallel", std::nullopt, 1);
  if (TableReader schedule_reader = reader.table("schedule"); schedule_reader.present()) {
    SweepSchedule& schedule = manifest.schedule.emplace();
    schedule.kind = schedule_reader.choice("kind", {"asha", "halving"}) == "asha" ? SweepSchedule::Kind::kAsha
                                                                                : SweepSchedule::Kind::kHalving;
    schedule.metric = schedule_reader.string("metric");
    schedule.maximize = schedule_reader.choice("mode", {"min", "max"}) == "max";
    schedule.reduction_factor = schedule_reader.integer("reduction_factor", std::nullopt, 2);
    schedule.rungs = schedule_reader.integer_list("rungs", std::nullopt, 1);
    if (schedule.rungs.empty() || !std::is_sorted(schedule.rungs.begin(), schedule.rungs.end()))
      schedule_reader.fail("rungs", "expected the rungs' steps, ascending");
    schedule.min_steps = schedule.rungs.front();
    schedule.max_steps = schedule.rungs.back();
  }

  for_each_table(root, "tasks", file, [&](TableReader& task_reader, const toml::table& table) {
    SweepTask task;
    task.index = task_reader.integer("index", std::nullopt, 0);
    if (task.index != static_cast<int64_t>(manifest.tasks.size()))
      task_reader.fail("index", fmt::format("expected {}: tasks are listed in order", manifest.tasks.size()));
    const toml::table* params = table["params"].as_table();
    for (const std::string& path : manifest.parameters) {
      const toml::node* value = params ? params->get(path) : nullptr;
      if (value == nullptr) task_reader.fail("params", fmt::format("no value for \"{}\"", path));
      value->visit([&](const auto& typed) { task.values.push_back(typed); });
    }
    manifest.tasks.push_back(std::move(task));
  });
  for_each_table(root, "arrays", file, [&](TableReader& array_reader, const toml::table&) {
    ManifestArray array;
    array.job_id = array_reader.string("job_id");
    // It goes to --dependency and scancel.
    if (!is_job_id(array.job_id)) array_reader.fail("job_id", fmt::format("{:?} is no SLURM job id", array.job_id));
    array.tasks = array_reader.integer_list("tasks", std::nullopt, 0);
    for (int64_t task : array.tasks)
      if (task >= static_cast<int64_t>(manifest.tasks.size()))
        array_reader.fail("tasks", fmt::format("task {} is not in the sweep", task));
    array.script = array_reader.string("script");
    array.reason = array_reader.string("reason");
    array.after = array_reader.string("after", "");
    array.submitted = array_reader.string("submitted");
    manifest.arrays.push_back(std::move(array));
  });
  return manifest;
}

SweepManifest read_manifest(const SweepDir& sweep) {
  // Its tasks' values take some hundred bytes each: 256 MB is a sweep of a million tasks.
  constexpr size_t kLargestManifestBytes = size_t{256} << 20;
  const std::optional<std::string> text = read_run_file(sweep.manifest(), kLargestManifestBytes);
  if (!text) throw UsageError(fmt::format("{} is not a sweep directory (no manifest.toml)", sweep.path()));
  return parse_manifest(*text, sweep.manifest());
}

void write_manifest(const SweepDir& sweep, const SweepManifest& manifest) {
  write_file_atomically(sweep.manifest(), manifest_text(manifest));
}

}  // namespace trainctl
