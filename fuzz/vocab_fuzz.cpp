// libFuzzer target: the vocabulary reader loads or throws DataError; a loaded vocabulary
// encodes and decodes its own tokens.
#include <cstddef>
#include <cstdint>
#include <sstream>

#include "tapegrad/data/data_error.h"
#include "tapegrad/data/vocab.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  try {
    const auto vocab = tapegrad::data::Vocabulary::read(in, "fuzz");
    for (int64_t id = 0; id < vocab.size(); ++id) {
      const std::vector<int64_t> ids = vocab.encode(vocab.token(id));
      vocab.decode(ids);
    }
  } catch (const tapegrad::data::DataError&) {
  }
  return 0;
}
