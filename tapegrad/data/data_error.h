// Errors in data files: the message names the file and line ("corpus.tsv:12: no tab ...").
#pragma once

#include <cstdint>

#include "tapegrad/autograd/error.h"

namespace tapegrad::data {

class DataError : public Error {
 public:
  using Error::Error;
};

// A subword vocabulary larger than its texts can fill; `largest` is the size they can.
class VocabularySizeError : public DataError {
 public:
  VocabularySizeError(const std::string& what, int64_t largest)
      : DataError(what), largest(largest) {}
  int64_t largest;
};

}  // namespace tapegrad::data
