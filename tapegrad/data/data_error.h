// Errors in data files: the message names the file and line ("corpus.tsv:12: no tab ...").
#pragma once

#include "tapegrad/autograd/error.h"

namespace tapegrad::data {

class DataError : public Error {
 public:
  using Error::Error;
};

}  // namespace tapegrad::data
