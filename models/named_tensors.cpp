// Matching named tensors to a model's flat parameter buffer: see named_tensors.h.
#include "named_tensors.h"

#include <algorithm>
#include <stdexcept>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "bad_input.h"

namespace trainctl {

namespace {

std::string shape_text(const std::vector<int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

// Hugging Face's conventions for saved models: a head model's base-model tensors may be stored
// without the base model's prefix (the Hub's GPT-2 files are), and some stored tensors are no
// parameters: GPT-2's causal-mask buffers, and the LM head that is tied to wte.
constexpr std::string_view kBaseModelPrefix = "transformer.";
bool is_stored_but_no_parameter(std::string_view name) {
  return name == "lm_head.weight" || name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias");
}

// A tensor among those matched, and the parameter it names (its name without the state suffix).
struct Candidate {
  const Tensor* tensor;
  std::string_view parameter;
};

std::vector<const Tensor*> match_checkpoint(const std::vector<Candidate>& candidates,
                                            const std::vector<ParameterSlice>& layout, const std::string& source,
                                            const std::string& optimizer_state, const std::string& suffix) {
  if (candidates.size() != layout.size())
    throw BadInput(fmt::format("{} holds {} {} tensors but the config's model has {}", source, candidates.size(),
                               optimizer_state.empty() ? "model" : optimizer_state, layout.size()));
  std::vector<const Tensor*> matched;
  for (size_t i = 0; i < layout.size(); ++i) {
    const Tensor& tensor = *candidates[i].tensor;
    if (candidates[i].parameter != layout[i].name || tensor.shape != layout[i].shape)
      throw BadInput(fmt::format("{} does not fit the config's model: it has {} {}, the config needs {}{} {}", source,
                                 tensor.name, shape_text(tensor.shape), layout[i].name, suffix,
                                 shape_text(layout[i].shape)));
    matched.push_back(&tensor);
  }
  return matched;
}

std::vector<const Tensor*> match_pretrained(const std::vector<Candidate>& candidates,
                                            const std::vector<ParameterSlice>& layout, const std::string& source,
                                            const std::string& suffix) {
  std::vector<const Tensor*> matched;
  std::vector<bool> used(candidates.size(), false);
  for (const ParameterSlice& slice : layout) {
    const std::string_view base_name = slice.name.starts_with(kBaseModelPrefix)
                                           ? std::string_view(slice.name).substr(kBaseModelPrefix.size())
                                           : std::string_view(slice.name);
    const auto found = std::find_if(candidates.begin(), candidates.end(), [&](const Candidate& candidate) {
      return candidate.parameter == slice.name || candidate.parameter == base_name;
    });
    if (found == candidates.end())
      throw BadInput(fmt::format("{} has no tensor {}{}, which the config's model needs", source, slice.name, suffix));
    if (found->tensor->shape != slice.shape)
      throw BadInput(fmt::format("{} holds {} {} but the config's model needs {}", source, found->tensor->name,
                                 shape_text(found->tensor->shape), shape_text(slice.shape)));
    matched.push_back(found->tensor);
    used[static_cast<size_t>(found - candidates.begin())] = true;
  }
  for (size_t i = 0; i < candidates.size(); ++i)
    if (!used[i] && !is_stored_but_no_parameter(candidates[i].parameter))
      throw BadInput(fmt::format("{} holds {} {}, which the config's model has no place for", source,
                                 candidates[i].tensor->name, shape_text(candidates[i].tensor->shape)));
  return matched;
}

}  // namespace

std::vector<const Tensor*> match_tensors(const std::vector<Tensor>& tensors, const std::vector<ParameterSlice>& layout,
                                         TensorMatch match, const std::string& source,
                                         const std::string& optimizer_state) {
  const std::string suffix = optimizer_state.empty() ? "" : "/" + optimizer_state;
  std::vector<Candidate> candidates;
  for (const Tensor& tensor : tensors)
    if (tensor.name.ends_with(suffix))
      candidates.push_back({&tensor, std::string_view(tensor.name).substr(0, tensor.name.size() - suffix.size())});
  return match == TensorMatch::kCheckpoint ? match_checkpoint(candidates, layout, source, optimizer_state, suffix)
                                           : match_pretrained(candidates, layout, source, suffix);
}

std::vector<float> flatten_tensors(const std::vector<Tensor>& tensors, const std::vector<ParameterSlice>& layout,
                                   TensorMatch match, const std::string& source, const std::string& optimizer_state) {
  const std::vector<const Tensor*> matched = match_tensors(tensors, layout, match, source, optimizer_state);
  std::vector<float> flat(static_cast<size_t>(flat_count(layout)));
  for (size_t i = 0; i < layout.size(); ++i) {
    // Every reader makes a tensor's values fit its shape, which matched the parameter's.
    if (static_cast<int64_t>(matched[i]->values.size()) != layout[i].count)
      throw std::logic_error(fmt::format("tensor {} holds {} values for its shape {}", matched[i]->name,
                                         matched[i]->values.size(), shape_text(matched[i]->shape)));
    std::copy(matched[i]->values.begin(), matched[i]->values.end(), flat.begin() + layout[i].offset);
  }
  return flat;
}

}  // namespace trainctl
