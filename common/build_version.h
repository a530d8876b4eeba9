// This build's version, as every program's --version prints it: "0.9.0 (revision v0.9-3-gabc1234)",
// the project's version and the source revision it was built from. A library of its own: its
// revision header is rewritten at every commit, and only this file recompiles then.
#pragma once

#include <string>

namespace trainctl {

std::string build_version();

}  // namespace trainctl
