// tapegrad._C's files: named tensors saved to and loaded from a safetensors file
// (tapegrad/io/safetensors.h: atomic saves, validated loads), which tapegrad/safetensors.py
// offers under safetensors.torch's names.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "python/src/bindings.h"
#include "tapegrad/io/safetensors.h"

namespace py = pybind11;
using namespace tapegrad;

void bind_files(py::module_& m) {
  m.def("_save_file",
        [](const io::NamedTensors& tensors, const std::string& path, const io::Metadata& metadata) {
          const LongCall call;
          io::save_safetensors(path, tensors, metadata);
        });
  m.def("_load_file", [](const std::string& path) {
    const LongCall call;
    return io::load_safetensors(path).tensors;
  });
}
