// Checkpoints: a module's state (Module::state(), keyed by dotted names) in the safetensors
// format (tapegrad/io/safetensors.h), saved atomically and loaded only when it fits.
#pragma once

#include <string>

#include "tapegrad/io/safetensors.h"
#include "tapegrad/nn/module.h"

namespace tapegrad::nn {

using io::CheckpointError;
using io::Metadata;

// Saves module.state() (parameters and buffers).
void save(const Module& module, const std::string& path, const Metadata& metadata = {});

struct LoadOptions {
  // Missing and unexpected names are errors (shape and dtype mismatches always are).
  bool strict = true;
  // A tensor holding NaN or an infinity loads; by default it is refused, naming the tensor.
  bool allow_nonfinite = false;
};
// Loads into module.state() and returns the file's metadata. Every missing, unexpected,
// mis-shaped or mis-typed tensor is reported in one error, and nothing is loaded then.
Metadata load(Module& module, const std::string& path, const LoadOptions& options = {});
// The same from a file already read (io::load_safetensors); `path` names it in errors.
Metadata load(Module& module, const io::SafetensorsContents& file, const std::string& path,
              const LoadOptions& options = {});

}  // namespace tapegrad::nn
