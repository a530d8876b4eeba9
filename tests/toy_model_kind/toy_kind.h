// model.kind = "toy": a third model kind that lives in the test tree only, to show that a kind is
// one folder plus one line of a list. It is softmax regression (one Linear layer over the
// classification HDF5 file), with a [model] table of its own (features, classes) and its own
// config.json, and the MLP's model class without hidden layers behind it.
#pragma once

#include "model_kind.h"

namespace trainctl::toy {

const ModelKind& toy_kind();

}  // namespace trainctl::toy
