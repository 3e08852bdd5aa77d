// Errors. Every op validates its inputs and throws tapegrad::Error with a message that names the
// op and what it got: "matmul: inner dimensions differ: [30, 200, 512] and [256, 512]".
// TG_CHECK builds those messages for user errors; TG_ASSERT guards our own invariants and throws
// InternalError, which always means a bug in tapegrad. Library code never aborts or prints.
// Error is the root of everything tapegrad throws: the files' (io::FileError), the data's
// (data::DataError) and the checkpoints' (nn::CheckpointError) errors derive from it, so
// `catch (const tapegrad::Error&)` catches them all.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <stdexcept>
#include <string>

namespace tapegrad {

// A caller gave tapegrad something it cannot work with: an op a shape, dtype, index or value;
// a reader a file it cannot trust. The root of tapegrad's errors.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An invariant of tapegrad's own code does not hold.
class InternalError : public Error {
 public:
  using Error::Error;
};

}  // namespace tapegrad

// TG_CHECK(cond, "op: what went wrong: {} and {}", a.shape(), b.shape())
#define TG_CHECK(cond, ...)                                \
  do {                                                     \
    if (!(cond)) [[unlikely]] {                            \
      throw ::tapegrad::Error(::fmt::format(__VA_ARGS__)); \
    }                                                      \
  } while (0)

#define TG_ASSERT(cond)                                                                      \
  do {                                                                                       \
    if (!(cond)) [[unlikely]] {                                                              \
      throw ::tapegrad::InternalError(                                                       \
          ::fmt::format("tapegrad internal error at {}:{}: {}", __FILE__, __LINE__, #cond)); \
    }                                                                                        \
  } while (0)
