// libFuzzer target: the TSV corpus reader, lenient and strict, loads or throws DataError.
#include <cstddef>
#include <cstdint>
#include <sstream>

#include "tapegrad/data/corpus.h"
#include "tapegrad/data/data_error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (bool strict : {false, true}) {
    std::istringstream in(text);
    try {
      tapegrad::data::read_tsv(in, "fuzz", {.strict = strict, .max_line_bytes = 256});
    } catch (const tapegrad::data::DataError&) {
    }
  }
  return 0;
}
