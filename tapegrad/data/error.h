// Errors in data files: the message names the file and line ("corpus.tsv:12: no tab ...").
#pragma once

#include <stdexcept>

namespace tapegrad::data {

class DataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace tapegrad::data
