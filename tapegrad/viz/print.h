// A tensor as text, the way PyTorch prints one: tensor([[1.0000, 2.0000], [3.0000, 4.0000]]),
// rows on lines of their own, and "..." eliding the middle of each dimension when the tensor
// has over 1000 elements. A client of the tensor's element access, as any printer could be.
// With this header included, a Tensor formats as any value does:
//
//   fmt::print("{}\n", x);   // or fmt::format("{}", x)
#pragma once

#include <fmt/format.h>

#include "tapegrad/autograd/tensor.h"

namespace fmt {
template <>
struct formatter<tapegrad::Tensor> {
  constexpr auto parse(format_parse_context& ctx) { return ctx.begin(); }
  format_context::iterator format(const tapegrad::Tensor& t, format_context& ctx) const;
};
}  // namespace fmt
