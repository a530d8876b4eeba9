// Sweeps: see sweep.h.
#include "sweeps/sweep.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "rng.h"

namespace trainctl {

namespace {

const std::vector<std::string> kSettings{"samples", "seed", "max_parallel", "schedule"};
const std::vector<std::string> kSweepableTables{"model", "data", "train", "checkpoint", "program", "params"};
const std::vector<std::string> kDistributions{"uniform", "log_uniform", "choice"};
constexpr const char* kValueForms =
    "expected a list of values (a grid) or one of { uniform = [low, high] }, { log_uniform = [low, high] }, "
    "{ choice = [value, ...] }";

bool is_distribution(const toml::node& node) {
  const toml::table* table = node.as_table();
  return table != nullptr && table->size() == 1 &&
         std::find(kDistributions.begin(), kDistributions.end(), table->begin()->first.str()) != kDistributions.end();
}

// Copies `value` into `table` under `key`, whatever its type.
void assign(toml::table& table, const std::string& key, const toml::node& value) {
  value.visit([&](const auto& typed) { table.insert_or_assign(key, typed); });
}

void append(toml::array& array, const toml::node& value) {
  value.visit([&](const auto& typed) { array.push_back(typed); });
}

std::pair<std::string, std::string> split_path(const std::string& path) {
  const size_t dot = path.find('.');
  return {path.substr(0, dot), path.substr(dot + 1)};
}

void put(toml::table& root, const std::string& path, const toml::node& value) {
  auto [table_name, key] = split_path(path);
  toml::table* table = root[table_name].as_table();
  if (table == nullptr) table = root.insert_or_assign(table_name, toml::table{}).first->second.as_table();
  assign(*table, key, value);
}

// `root` without [sweep], the base of every config a sweep makes; copying the [sweep] lists only
// to drop them again would make a large sweep's cost grow with the square of its size.
toml::table without_sweep(const toml::table& root) {
  toml::table config;
  for (const auto& [name, node] : root)
    if (name != "sweep") assign(config, std::string(name.str()), node);
  return config;
}

// The swept keys as written: "train.lr" = ..., or train.lr = ... (a nested table), in file order.
struct WrittenKey {
  std::string path;
  const toml::node* value;
};

std::vector<WrittenKey> written_keys(const toml::table& sweep) {
  std::vector<WrittenKey> keys;
  for (const auto& [name, node] : sweep) {
    const std::string key(name.str());
    if (std::find(kSettings.begin(), kSettings.end(), key) != kSettings.end()) continue;
    if (node.is_table() && !is_distribution(node) && key.find('.') == std::string::npos) {
      for (const auto& [inner_name, inner] : *node.as_table())
        keys.push_back({key + "." + std::string(inner_name.str()), &inner});
    } else {
      keys.push_back({key, &node});
    }
  }
  std::sort(keys.begin(), keys.end(),
            [](const WrittenKey& a, const WrittenKey& b) { return a.value->source().begin < b.value->source().begin; });
  return keys;
}

class SweepReader {
 public:
  SweepReader(const toml::table& root, std::string file, const ConfigCheck& check)
      : base_(without_sweep(root)), file_(std::move(file)), check_(check) {}

  [[noreturn]] void fail(const std::string& path, const toml::node& at, const std::string& message) const {
    throw ConfigError(position_of(at, file_), "sweep." + path, message);
  }

  void check_path(const std::string& path, const toml::node& value) const {
    if (path.find('.') == std::string::npos) {
      std::string message = "unknown sweep setting";
      if (auto suggestion = nearest_key(path, kSettings)) message += fmt::format(" (did you mean \"{}\"?)", *suggestion);
      fail(path, value, message + "; a swept key is a config path such as \"train.lr\"");
    }
    auto [table, key] = split_path(path);
    if (key.empty() || key.find('.') != std::string::npos)
      fail(path, value, "expected a config path of the form table.key, such as \"train.lr\"");
    if (table == "job")
      fail(path, value, "[job] is shared by every task of the array, so its keys cannot be swept");
    if (std::find(kSweepableTables.begin(), kSweepableTables.end(), table) == kSweepableTables.end()) {
      std::string message = fmt::format("unknown config table \"{}\"", table);
      if (auto suggestion = nearest_key(table, kSweepableTables))
        message += fmt::format(" (did you mean \"{}\"?)", *suggestion);
      fail(path, value, message);
    }
  }

  // Puts `value` into a copy of the config and lets the schema judge it; an error points at `at`.
  void check_value(const std::string& path, const toml::node& value, const toml::node& at) const {
    toml::table candidate = base_;
    put(candidate, path, value);
    try {
      check_(candidate);
    } catch (const ConfigError& error) {
      const bool about_this_key = error.key() == path;
      fail(path, at, about_this_key ? error.message() : fmt::format("{}: {}", error.key(), error.message()));
    }
  }

  // The extreme values a range can produce: both bounds when it draws integers; for floats,
  // low and the largest double below high, since draws lie in [low, high).
  void check_range(const std::string& path, const toml::array& bounds) const {
    check_value(path, bounds[0], bounds[0]);
    if (bounds[0].is_integer() && bounds[1].is_integer()) {
      check_value(path, bounds[1], bounds[1]);
      return;
    }
    const double low = *number_value(bounds[0]), high = *number_value(bounds[1]);
    check_value(path, toml::value<double>(std::nextafter(high, low)), bounds[1]);
  }

  // A grid's values or a choice's; only a choice can be something other than a list here.
  const toml::array& nonempty_list(const std::string& path, const toml::node& node) const {
    const toml::array* list = node.as_array();
    if (list == nullptr) fail(path, node, "choice takes a list of values, such as { choice = [16, 32] }");
    if (list->empty()) fail(path, node, "an empty list sweeps nothing; give at least one value");
    return *list;
  }

  SweepParameter parameter(const WrittenKey& written) const {
    const toml::node& node = *written.value;
    check_path(written.path, node);
    SweepParameter parameter;
    parameter.path = written.path;
    parameter.position = position_of(node, file_);
    // The values as written: a copied node loses its source position, which errors point at.
    const toml::array* written_values = nullptr;
    if (node.is_array()) {
      written_values = &nonempty_list(written.path, node);
    } else if (is_distribution(node)) {
      // The iterator owns the pair it points at, so it must outlive `body`.
      const auto only = node.as_table()->begin();
      const std::string distribution(only->first.str());
      const toml::node& body = only->second;
      if (distribution == "choice") {
        parameter.kind = SweepParameter::Kind::kChoice;
        written_values = &nonempty_list(written.path, body);
      } else {
        parameter.kind = distribution == "uniform" ? SweepParameter::Kind::kUniform : SweepParameter::Kind::kLogUniform;
        written_values = &range(written.path, distribution, body);
      }
    } else if (const toml::table* table = node.as_table(); table != nullptr && table->size() == 1) {
      const std::string name(table->begin()->first.str());
      std::string message = fmt::format("unknown distribution \"{}\"", name);
      if (auto suggestion = nearest_key(name, kDistributions)) message += fmt::format(" (did you mean \"{}\"?)", *suggestion);
      fail(written.path, node, message);
    } else {
      fail(written.path, node, kValueForms);
    }
    parameter.values = *written_values;
    if (parameter.kind == SweepParameter::Kind::kUniform || parameter.kind == SweepParameter::Kind::kLogUniform)
      check_range(written.path, *written_values);
    else
      for (const toml::node& value : *written_values) check_value(written.path, value, value);
    return parameter;
  }

  const toml::array& range(const std::string& path, const std::string& distribution, const toml::node& body) const {
    const toml::array* bounds = body.as_array();
    if (bounds == nullptr || bounds->size() != 2 || !(*bounds)[0].is_number() || !(*bounds)[1].is_number())
      fail(path, body, fmt::format("{} takes [low, high], two numbers", distribution));
    const double low = *number_value((*bounds)[0]), high = *number_value((*bounds)[1]);
    // nan and inf would be drawn as they are (or make every draw nan), whatever the key accepts.
    if (!std::isfinite(low) || !std::isfinite(high))
      fail(path, body, fmt::format("{} takes [low, high], two finite numbers (got [{}, {}])", distribution, low, high));
    if (!(low < high))
      fail(path, body, fmt::format("{} range [{}, {}] is empty; low must be below high", distribution, low, high));
    if (distribution == "log_uniform" && !(low > 0))
      fail(path, body, fmt::format("log_uniform needs 0 < low (got {})", low));
    if (!std::isfinite(high - low))
      fail(path, body, fmt::format("{} range [{}, {}] is too wide: high - low must be a finite number", distribution,
                                   low, high));
    return *bounds;
  }

 private:
  toml::table base_;
  std::string file_;
  const ConfigCheck& check_;
};

bool integer_bounds(const SweepParameter& parameter) {
  return parameter.values[0].is_integer() && parameter.values[1].is_integer();
}

void draw(const SweepParameter& parameter, Rng& rng, toml::array& into) {
  using Kind = SweepParameter::Kind;
  if (parameter.kind == Kind::kChoice) {
    append(into, parameter.values[rng.below(parameter.values.size())]);
    return;
  }
  const double low = *number_value(parameter.values[0]), high = *number_value(parameter.values[1]);
  auto log_uniform = [&] { return std::exp(std::log(low) + (std::log(high) - std::log(low)) * rng.unit()); };
  if (!integer_bounds(parameter)) {
    into.push_back(parameter.kind == Kind::kUniform ? low + (high - low) * rng.unit() : log_uniform());
    return;
  }
  const int64_t first = *parameter.values[0].value<int64_t>(), last = *parameter.values[1].value<int64_t>();
  if (parameter.kind == Kind::kUniform) {
    // In uint64, where last - first cannot overflow.
    const uint64_t width = static_cast<uint64_t>(last) - static_cast<uint64_t>(first);
    into.push_back(static_cast<int64_t>(static_cast<uint64_t>(first) + rng.below(width + 1)));
    return;
  }
  const double value = log_uniform();
  // Near an int64 bound a draw can round to 2^63, which llround cannot return.
  into.push_back(value >= high ? last : std::clamp<int64_t>(std::llround(value), first, last));
}

}  // namespace

std::vector<std::string> SweepSpec::paths() const {
  std::vector<std::string> paths;
  for (const SweepParameter& parameter : parameters) paths.push_back(parameter.path);
  return paths;
}

std::optional<SweepSpec> parse_sweep(const toml::table& root, const std::string& file, const ConfigCheck& check) {
  TableReader settings = TableReader::child(root, "sweep", file);
  if (!settings.present()) return std::nullopt;
  const toml::table& table = *root["sweep"].as_table();
  SweepReader reader(root, file, check);

  SweepSpec sweep;
  sweep.position = position_of(*root.get("sweep"), file);
  std::set<std::string> seen;
  for (const WrittenKey& written : written_keys(table)) {
    if (!seen.insert(written.path).second)
      reader.fail(written.path, *written.value, "given twice (once as a quoted \"table.key\", once as a dotted key)");
    sweep.parameters.push_back(reader.parameter(written));
  }
  if (sweep.parameters.empty())
    throw ConfigError(sweep.position, "sweep", "the table sweeps nothing; add a key such as \"train.lr\" = [1e-3, 1e-2]");

  std::vector<std::string> random_paths;
  for (const SweepParameter& parameter : sweep.parameters)
    if (parameter.kind != SweepParameter::Kind::kGrid) random_paths.push_back(parameter.path);
  if (random_paths.empty() && settings.has("samples"))
    settings.fail("samples", "only random keys ({ uniform }, { log_uniform }, { choice }) are sampled, and this "
                             "sweep has none");
  if (!random_paths.empty() && !settings.has("samples"))
    throw ConfigError(sweep.position, "sweep.samples",
                      fmt::format("required: how many draws of the random keys ({})", fmt::join(random_paths, ", ")));
  sweep.samples = settings.integer("samples", 1, 1, kMaxSweepTasks);
  sweep.seed = static_cast<uint64_t>(settings.integer("seed", 0, 0));
  if (settings.has("max_parallel")) sweep.max_parallel = settings.integer("max_parallel", std::nullopt, 1, kMaxSweepTasks);
  sweep.schedule = read_sweep_schedule(settings);
  if (sweep_task_count(sweep) > kMaxSweepTasks)
    throw ConfigError(sweep.position, "sweep",
                      fmt::format("more than {} tasks; split the sweep into several configs", kMaxSweepTasks));
  return sweep;
}

int64_t sweep_task_count(const SweepSpec& sweep) {
  int64_t tasks = sweep.samples;
  for (const SweepParameter& parameter : sweep.parameters) {
    if (parameter.kind != SweepParameter::Kind::kGrid) continue;
    tasks *= static_cast<int64_t>(parameter.values.size());
    // Stops before the product can overflow: each factor is at most a config's length.
    if (tasks > kMaxSweepTasks) return tasks;
  }
  return tasks;
}

std::vector<SweepTask> expand_sweep(const SweepSpec& sweep) {
  std::vector<const SweepParameter*> grid;
  for (const SweepParameter& parameter : sweep.parameters)
    if (parameter.kind == SweepParameter::Kind::kGrid) grid.push_back(&parameter);
  size_t grid_points = 1;
  for (const SweepParameter* axis : grid) grid_points *= axis->values.size();

  // Draw d holds one value per random key, in the keys' file order.
  Rng rng(sweep.seed, kSweepSampleStream);
  std::vector<toml::array> draws(static_cast<size_t>(sweep.samples));
  for (toml::array& values : draws)
    for (const SweepParameter& parameter : sweep.parameters)
      if (parameter.kind != SweepParameter::Kind::kGrid) draw(parameter, rng, values);

  std::vector<SweepTask> tasks;
  tasks.reserve(grid_points * draws.size());
  for (size_t point = 0; point < grid_points; ++point) {
    // Row-major: the last grid key varies fastest.
    std::vector<size_t> coordinate(grid.size());
    for (size_t axis = grid.size(), rest = point; axis-- > 0; rest /= grid[axis]->values.size())
      coordinate[axis] = rest % grid[axis]->values.size();
    for (const toml::array& values : draws) {
      SweepTask task;
      task.index = static_cast<int64_t>(tasks.size());
      size_t axis = 0, random = 0;
      for (const SweepParameter& parameter : sweep.parameters) {
        if (parameter.kind == SweepParameter::Kind::kGrid)
          append(task.values, parameter.values[coordinate[axis++]]);
        else
          append(task.values, values[random++]);
      }
      tasks.push_back(std::move(task));
    }
  }
  return tasks;
}

toml::table task_config(const toml::table& root, const std::vector<std::string>& paths, const toml::array& values) {
  toml::table config = without_sweep(root);
  for (size_t i = 0; i < paths.size(); ++i) put(config, paths[i], values[i]);
  return config;
}

void for_each_task_config(const toml::table& root, const SweepSpec& sweep, const std::vector<SweepTask>& tasks,
                          const ConfigCheck& check, const std::function<void(const SweepTask&, toml::table&)>& use) {
  const std::vector<std::string> paths = sweep.paths();
  for (const SweepTask& task : tasks) {
    toml::table config = task_config(root, paths, task.values);
    try {
      check(config);
    } catch (const ConfigError& error) {
      throw ConfigError(sweep.position, "sweep",
                        fmt::format("task {} ({}) is not a valid config: {}: {}", task.index,
                                    describe_task(paths, task.values), error.key(), error.message()));
    }
    use(task, config);
  }
}

std::string describe_value(const toml::node& value) {
  if (const toml::array* array = value.as_array()) {
    std::vector<std::string> items;
    for (const toml::node& item : *array) items.push_back(describe_value(item));
    return fmt::format("[{}]", fmt::join(items, ", "));
  }
  if (auto number = value.value_exact<double>()) return fmt::format("{}", *number);
  if (auto integer = value.value_exact<int64_t>()) return fmt::format("{}", *integer);
  std::ostringstream text;
  value.visit([&](const auto& typed) { text << typed; });
  return text.str();
}

std::string describe_task(const std::vector<std::string>& paths, const toml::array& values) {
  std::vector<std::string> pairs;
  for (size_t i = 0; i < paths.size(); ++i) pairs.push_back(paths[i] + "=" + describe_value(values[i]));
  return fmt::format("{}", fmt::join(pairs, " "));
}

}  // namespace trainctl
