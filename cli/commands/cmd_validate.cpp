// trainctl validate CONFIG: checks a config the way submit and the runtime will read it, its data
// files (preflight.h) and that job.mem holds its estimated memory (estimate/memory_estimate.h).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "commands.h"
#include "config_reader.h"
#include "json.h"
#include "config_file.h"
#include "estimate/memory_estimate.h"
#include "preflight.h"
#include "runs/code_snapshot.h"
#include "sweeps/sweep_submit.h"

namespace trainctl {

void add_validate_command(CLI::App& app) {
  auto* command = app.add_subcommand("validate", "check a config; exit 0 if valid, 2 with file:line:col: key: message");
  auto config_path = std::make_shared<std::string>();
  command->add_option("config", *config_path, "TOML config")->type_name(path_kind::kConfig)->required();
  const auto no_preflight = add_no_preflight_flag(*command);
  command->callback([config_path, no_preflight] {
    const Config config = load_config(*config_path);
    if (!*no_preflight) {
      preflight_data(config);
      plan_config_snapshot(config);  // what submit would copy of a [program]'s code, refused as submit refuses it
    }
    check_memory_fits(config, !*no_preflight);
    const std::string job = fmt::format("{}: valid: job \"{}\" with {} node(s) x {} rank(s)", *config_path,
                                        config.job.name, config.job.nodes, config.job.ranks_per_node);
    std::string extras =
        config.notify ? fmt::format("; notifies {} of {}", printable(config.notify->target()), fmt::join(config.notify->on, ", "))
                      : "";
    std::vector<std::string> follow_ups;
    for (const FollowUpStep& step : config.follow_ups) follow_ups.push_back(step.kind);
    if (!follow_ups.empty()) extras += fmt::format("; then {}", fmt::join(follow_ups, ", "));
    if (config.program) {
      // The command as written, placeholders and all, one argument per quoted string.
      std::vector<std::string> quoted;
      for (const std::string& argument : config.program->command) quoted.push_back(json_text(argument));
      fmt::print("{}; program [{}]{}\n", job, printable(fmt::format("{}", fmt::join(quoted, ", "))), extras);
    } else {
      const RunSpec& run = *config.run;
      fmt::print("{}; {}; {} steps, global batch {}{}\n", job, run.model.describe(), run.train.steps,
                 run.train.micro_batch * run.train.grad_accum * config.job.world_size(), extras);
    }
    if (!config.sweep) return;
    // Expanding checks every task's config, not only each value on its own.
    const size_t tasks = check_sweep_tasks(config);
    fmt::print("sweep: {} tasks over {}{}\n", tasks, fmt::join(config.sweep->paths(), ", "),
               config.sweep->max_parallel ? fmt::format(", at most {} at once", *config.sweep->max_parallel) : "");
    if (config.sweep->schedule)
      fmt::print("{}", schedule_summary(*config.sweep->schedule, static_cast<int64_t>(tasks), config.job));
  });
}

}  // namespace trainctl
