// Shape ops: views share storage, copies do not; every one gradchecks; errors.
#include "helpers.h"
#include "tapegrad/autograd/autograd.h"

using namespace tapegrad;
using tapegrad::testing::random_leaf;
using tapegrad::testing::require_gradcheck;
using tapegrad::testing::require_values;

TEST_CASE("reshape and view share storage and infer -1", "[autograd]") {
  const Tensor x = arange(0.0, 6.0, 1.0, DType::Float32);
  Tensor v = view(x, {2, -1});
  CHECK(v.shape() == Shape{2, 3});
  CHECK(v.impl().storage == x.impl().storage);
  v.set({1, 0}, 42);
  CHECK(x.at({3}) == 42);
  CHECK(unsqueeze(x, 0).shape() == Shape{1, 6});
  CHECK(unsqueeze(x, -1).shape() == Shape{6, 1});
  CHECK(squeeze(unsqueeze(x, 1), 1).shape() == Shape{6});
}

TEST_CASE("transpose and permute are views with permuted strides", "[autograd]") {
  const Tensor x = reshape(arange(0.0, 6.0, 1.0, DType::Float32), {2, 3});
  const Tensor t = transpose(x, 0, 1);
  CHECK(t.shape() == Shape{3, 2});
  CHECK(t.strides() == Shape{1, 3});
  CHECK_FALSE(t.is_contiguous());
  require_values(t, {0, 3, 1, 4, 2, 5});
  const Tensor c = t.contiguous();
  CHECK(c.is_contiguous());
  CHECK(c.impl().storage != x.impl().storage);
  require_values(c, {0, 3, 1, 4, 2, 5});
  CHECK(x.contiguous().impl_ptr() == x.impl_ptr());  // already packed: no copy
  const Tensor p = permute(reshape(arange(0.0, 24.0, 1.0, DType::Float32), {2, 3, 4}), {2, 0, 1});
  CHECK(p.shape() == Shape{4, 2, 3});
  CHECK(p.at({3, 1, 2}) == 1 * 12 + 2 * 4 + 3);
  // reshape of a non-contiguous view copies
  require_values(reshape(t, {6}), {0, 3, 1, 4, 2, 5});
}

TEST_CASE("slice split chunk and concat", "[autograd]") {
  const Tensor x = reshape(arange(0.0, 12.0, 1.0, DType::Float32), {3, 4});
  require_values(slice(x, 1, 1, 3), {1, 2, 5, 6, 9, 10});
  require_values(slice(x, 0, -1, 3), {8, 9, 10, 11});
  const auto parts = split(x, {1, 3}, 1);
  REQUIRE(parts.size() == 2);
  require_values(parts[0], {0, 4, 8});
  CHECK(parts[1].shape() == Shape{3, 3});
  const auto chunks = chunk(arange(5), 2, 0);  // sizes 3 and 2, as PyTorch
  REQUIRE(chunks.size() == 2);
  require_values(chunks[0], {0, 1, 2});
  require_values(chunks[1], {3, 4});
  require_values(concat({parts[1], parts[0]}, 1), {1, 2, 3, 0, 5, 6, 7, 4, 9, 10, 11, 8});
  require_values(concat({slice(x, 0, 0, 1), slice(x, 0, 2, 3)}, 0), {0, 1, 2, 3, 8, 9, 10, 11});
  require_values(concat({arange(2), arange(1)}, 0), {0, 1, 0});
}

TEST_CASE("a slice with a step is a view; assign writes through views", "[autograd]") {
  const Tensor x = reshape(arange(0.0, 12.0, 1.0, DType::Float32), {3, 4});
  const Tensor odd = slice(x, 1, 1, 4, 2);
  CHECK(odd.shape() == Shape{3, 2});
  CHECK(odd.strides() == Shape{4, 2});
  require_values(odd, {1, 3, 5, 7, 9, 11});
  require_values(slice(x, 0, 0, 3, 2), {0, 1, 2, 3, 8, 9, 10, 11});
  CHECK(slice(x, 1, 2, 2, 3).shape() == Shape{3, 0});
  // pe[:, 0::2] = sin(...), as the positional encoding fills its table
  Tensor pe = zeros({2, 4});
  const uint64_t before = pe.impl().storage->version();
  assign(slice(pe, 1, 0, 4, 2), tensor({1, 2}, {2}));
  assign(slice(pe, 1, 1, 4, 2), tensor({5, 6, 7, 8}, {2, 2}));
  require_values(pe, {1, 5, 2, 6, 1, 7, 2, 8});
  CHECK(pe.impl().storage->version() == before + 2);
  // a source in the same storage is read before it is written: x[1:] = x[:-1]
  const Tensor v = arange(0.0, 5.0, 1.0, DType::Float32);
  assign(slice(v, 0, 1, 5), slice(v, 0, 0, 4));
  require_values(v, {0, 0, 1, 2, 3});
  assign(v, tensor({9}, Shape{}));  // a scalar broadcast, converted to the tensor's dtype
  require_values(v, {9, 9, 9, 9, 9});
  const Tensor ids = zeros({3}, DType::Int64);
  assign(slice(ids, 0, 1, 3), tensor({2.0, 5.0}, {2}));
  CHECK(ids.to_vector<int64_t>() == std::vector<int64_t>{0, 2, 5});
}

TEST_CASE("assign refuses what would make a gradient wrong", "[autograd][errors]") {
  Tensor w = ones({3}, DType::Float64);
  w.set_requires_grad(true);
  CHECK_THROWS_WITH(assign(w, zeros({3}, DType::Float64)),
                    "assign: an in-place write into a tensor that requires grad (write under "
                    "no_grad, or into a tensor that does not require grad)");
  {
    const NoGradGuard no_grad;  // an initializer's write
    assign(slice(w, 0, 0, 1), full({1}, 5.0, DType::Float64));
  }
  require_values(w, {5, 1, 1});
  // a tensor a backward saved, written afterwards: the walk refuses instead of a wrong gradient
  Tensor a = ones({3}, DType::Float64);
  a.set_requires_grad(true);
  const Tensor scale = full({3}, 2.0, DType::Float64);
  const Tensor y = sum(mul(a, scale));
  assign(scale, zeros({3}, DType::Float64));
  CHECK_THROWS(y.backward());
  CHECK_THROWS_WITH(assign(ones({2}), ones({3})), "assign: shapes [2] and [3] cannot be broadcast");
  CHECK_THROWS_WITH(assign(ones({2}), ones({2, 2})),
                    "assign: a value of shape [2, 2] does not broadcast to shape [2]");
}

TEST_CASE("shape ops gradcheck", "[autograd][gradcheck]") {
  const Tensor x = random_leaf({2, 3, 4}, 41);
  const Tensor y = random_leaf({2, 2, 4}, 42);
  require_gradcheck([](auto& in) { return reshape(in[0], {4, -1}); }, {x});
  require_gradcheck([](auto& in) { return view(in[0], {6, 4}); }, {x});
  require_gradcheck([](auto& in) { return transpose(in[0], 0, 2); }, {x});
  require_gradcheck([](auto& in) { return permute(in[0], {1, 2, 0}); }, {x});
  require_gradcheck([](auto& in) { return permute(in[0], {1, 2, 0}).contiguous(); }, {x});
  require_gradcheck([](auto& in) { return reshape(transpose(in[0], 1, 2), {2, 12}); }, {x});
  require_gradcheck([](auto& in) { return slice(in[0], 2, 1, 3); }, {x});
  require_gradcheck([](auto& in) { return slice(in[0], 2, 1, 4, 2); }, {x});
  require_gradcheck([](auto& in) { return slice(in[0], 1, 0, 3, 2) * 3.0; }, {x});
  require_gradcheck([](auto& in) { return split(in[0], {1, 2}, 1)[1]; }, {x});
  require_gradcheck([](auto& in) { return chunk(in[0], 2, -1)[0] * chunk(in[0], 2, -1)[1]; }, {x});
  require_gradcheck([](auto& in) { return concat({in[0], in[1], in[0]}, 1); }, {x, y});
  require_gradcheck([](auto& in) { return in[0].clone(); }, {x});
  require_gradcheck([](auto& in) { return squeeze(unsqueeze(in[0], 1), 1); }, {x});
}

TEST_CASE("shape op errors", "[autograd][errors]") {
  CHECK_THROWS_WITH(view(ones({2, 3}), {4, -1}),
                    "view: cannot view shape [2, 3] (6 elements) as [4, -1]");
  CHECK_THROWS_WITH(view(ones({2, 3}), {-1, -1}), "view: more than one -1 in [-1, -1]");
  CHECK_THROWS_WITH(view(ones({2, 3}), {5}), "view: cannot view shape [2, 3] (6 elements) as [5]");
  CHECK_THROWS_WITH(view(transpose(ones({2, 3}), 0, 1), {6}),
                    "view: tensor of shape [3, 2] with strides [1, 3] is not contiguous; use "
                    "reshape()");
  CHECK_THROWS_WITH(permute(ones({2, 3}), {0, 0}), "permute: dim 0 repeated in [0, 0]");
  CHECK_THROWS_WITH(permute(ones({2, 3}), {0}),
                    "permute: 1 dims given for a tensor of shape [2, 3]");
  CHECK_THROWS_WITH(transpose(ones({2, 3}), 0, 2),
                    "transpose: dim 2 out of range for a tensor of rank 2");
  CHECK_THROWS_WITH(slice(ones({2, 3}), 1, 2, 5),
                    "slice: range [2, 5) out of bounds for dim 1 of shape [2, 3]");
  CHECK_THROWS_WITH(slice(ones({2, 3}), 1, 0, 3, 0), "slice: step must be positive, got 0");
  CHECK_THROWS_WITH(split(ones({2, 3}), {1, 1}, 1),
                    "split: sizes [1, 1] add up to 2, but dim 1 of shape [2, 3] is 3");
  CHECK_THROWS_WITH(chunk(ones({2}), 0, 0), "chunk: chunks must be positive, got 0");
  CHECK_THROWS_WITH(concat({ones({2, 3}), ones({3, 3})}, 1),
                    "concat: shapes [2, 3] and [3, 3] differ outside dim 1");
  CHECK_THROWS_WITH(concat({}, 0), "concat: no tensors given");
  CHECK_THROWS_WITH(squeeze(ones({2, 3}), 0), "squeeze: dim 0 of shape [2, 3] has size 2, not 1");
}

TEST_CASE("expand copies along the broadcast dims, and checks the shape", "[autograd]") {
  require_values(expand(tensor({1, 2}, {2, 1}), {2, 3}), {1, 1, 1, 2, 2, 2});
  require_values(expand(tensor({1, 2, 3}, {3}), {2, 3}), {1, 2, 3, 1, 2, 3});
  require_gradcheck([](auto& in) { return expand(in[0], {4, 2, 3}); }, {random_leaf({2, 1}, 2)});
  CHECK_THROWS_WITH(expand(ones({2, 3}), {3, 3}),
                    "expand: shapes [2, 3] and [3, 3] cannot be broadcast");
  CHECK_THROWS_WITH(expand(ones({2, 3}), {3}), "expand: shape [2, 3] does not broadcast to [3]");
}
