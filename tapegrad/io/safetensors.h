// The safetensors format (what PyTorch and Hugging Face read):
//   8 bytes   little-endian u64 N, the header's length
//   N bytes   JSON: {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]},
//                    ..., "__metadata__": {"key": "value"}}, padded with spaces to 8 bytes
//   the rest  raw little-endian tensor data; offsets are relative to its start
// Saving is atomic (write_atomic): a failure never leaves a half-written file in its place.
#pragma once

#include <istream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tapegrad/autograd/tensor.h"
#include "tapegrad/io/files.h"

namespace tapegrad::io {

// A file could not be read or written, or is not a valid checkpoint. The message names the file.
class CheckpointError : public Error {
 public:
  using Error::Error;
};

using Metadata = std::map<std::string, std::string>;

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

struct SafetensorsContents {
  NamedTensors tensors;  // in file order (by data offset)
  Metadata metadata;
};

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const Metadata& metadata = {});
// Only a regular file. Validates the whole header before allocating anything the file asks for:
// its length (at most 100 MB), JSON nesting (at most 128 deep), dtypes, shapes (byte counts
// overflow-checked, within the file) and offsets, which must tile the data exactly. Errors
// name the file and the tensor or field, quoting at most 64 characters of what they found.
SafetensorsContents load_safetensors(const std::string& path);
// The same from a stream of `size` bytes; `name` stands for the file in error messages.
SafetensorsContents read_safetensors(std::istream& in, uint64_t size, const std::string& name);

}  // namespace tapegrad::io
