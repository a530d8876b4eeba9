// TOML values as JSON: a swept value in `sweep status --json`, a [program]'s [params] in
// params.json. Numbers, strings and booleans map to themselves, arrays and tables to arrays and
// objects (keys sorted, as toml++ keeps them); a date or time becomes its TOML text.
#pragma once

#include <toml++/toml.h>

#include "json.h"

namespace trainctl {

Json json_of(const toml::node& value);

}  // namespace trainctl
