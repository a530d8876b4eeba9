// model.kind = "mlp" as the registry lists it: a classifier over an HDF5 file of features and
// labels, exported with its own config (transformers has no class for it).
#pragma once

#include "model_kind.h"

namespace trainctl {

const ModelKind& mlp_kind();

}  // namespace trainctl
