// embedding and dropout: values, gradients, the padding id, reproducibility, errors.
#include "helpers.h"
#include "tapegrad/autograd/autograd.h"

using namespace tapegrad;
using tapegrad::testing::random_leaf;
using tapegrad::testing::require_gradcheck;
using tapegrad::testing::require_values;

TEST_CASE("embedding gathers rows by id", "[autograd]") {
  const Tensor w = tensor({0, 1, 10, 11, 20, 21}, {3, 2});
  const Tensor ids = tensor({2, 0, 2, 1}, {2, 2}, DType::Int64);
  const Tensor out = embedding(w, ids);
  CHECK(out.shape() == Shape{2, 2, 2});
  require_values(out, {20, 21, 0, 1, 20, 21, 10, 11});
}

TEST_CASE("embedding scatter-adds its gradient and skips the padding id", "[autograd]") {
  Tensor w = zeros({4, 2}, DType::Float64);
  w.set_requires_grad(true);
  const Tensor ids = tensor({1, 3, 1, 0}, {4}, DType::Int64);
  sum(embedding(w, ids, 0)).backward();
  require_values(w.grad(), {0, 0, 2, 2, 0, 0, 1, 1});  // id 1 twice; id 0 is padding
}

TEST_CASE("embedding gradcheck", "[autograd][gradcheck]") {
  const Tensor w = random_leaf({5, 3}, 71);
  const Tensor ids = tensor({4, 0, 2, 2, 1, 4}, {2, 3}, DType::Int64);
  require_gradcheck([&](auto& in) { return embedding(in[0], ids); }, {w});
  // With a padding id the padding row deliberately gets no gradient, so the finite
  // differences (which do see it) are compared only on the other rows' outputs.
  const Tensor not_pad = unsqueeze(ne(ids, 2), -1);
  require_gradcheck(
      [&](auto& in) { return masked_fill(embedding(in[0], ids, 2), eq(not_pad, 0), 0.0); }, {w});
}

TEST_CASE("embedding errors", "[autograd][errors]") {
  const Tensor w = ones({3, 2});
  CHECK_THROWS_WITH(embedding(w, tensor({0, 3}, {2}, DType::Int64)),
                    "embedding: id 3 at flat position 1 of ids [2] is outside the vocabulary "
                    "[0, 3)");
  CHECK_THROWS_WITH(embedding(w, tensor({-1}, {1}, DType::Int64)),
                    "embedding: id -1 at flat position 0 of ids [1] is outside the vocabulary "
                    "[0, 3)");
  CHECK_THROWS_WITH(embedding(w, ones({2})),
                    "embedding: ids must be int64, got float32 of shape [2]");
  CHECK_THROWS_WITH(embedding(ones({3}), arange(2)),
                    "embedding: weight must be [V, C], got shape [3]");
  CHECK_THROWS_WITH(embedding(w, arange(2), 5),
                    "embedding: padding_idx 5 out of range for a vocabulary of 3");
}

TEST_CASE("dropout zeroes with probability p and rescales survivors", "[autograd]") {
  Generator gen(3);
  const Tensor x = ones({100000});
  const Tensor y = dropout(x, 0.25, true, gen);
  int64_t kept = 0;
  for (float v : y.to_vector<float>()) {
    REQUIRE((v == 0.0f || v == Approx(1 / 0.75)));
    kept += v != 0;
  }
  // 75,000 expected, standard deviation 137
  CHECK(std::abs(kept - 75000) < 800);
  require_values(sum(y) / 100000.0, {1.0}, 0.02);  // the mean is preserved
}

TEST_CASE("dropout is the identity in eval mode and reproducible with a seed", "[autograd]") {
  Generator gen(1);
  const Tensor x = random_leaf({3, 4}, 81);
  CHECK(dropout(x, 0.5, false, gen).impl_ptr() == x.impl_ptr());
  CHECK(dropout(x, 0.0, true, gen).impl_ptr() == x.impl_ptr());
  require_values(dropout(x, 1.0, true, gen), std::vector<double>(12, 0.0));
  Generator a(9), b(9);
  CHECK(dropout(x, 0.5, true, a).to_vector<double>() ==
        dropout(x, 0.5, true, b).to_vector<double>());
  // Each element's draw depends only on its index: the thread count does not change the mask.
  const Tensor big = ones({50000});
  auto mask_with = [&](int threads) {
    const int previous = num_threads();
    set_num_threads(threads);
    Generator g(4);
    const std::vector<float> m = dropout(big, 0.3, true, g).to_vector<float>();
    set_num_threads(previous);
    return m;
  };
  CHECK(mask_with(1) == mask_with(3));
}

TEST_CASE("a dropout mask's elements 2^32 apart and two keys' masks are independent",
          "[autograd]") {
  const DropoutMask mask(0.5, 0x1234), other(0.5, 0x1235);
  int64_t same_high = 0, same_key = 0;
  for (uint64_t i = 0; i < 10000; ++i) {
    same_high += mask.keeps(i) == mask.keeps(i + (uint64_t{1} << 32));
    same_key += mask.keeps(i) == other.keeps(i);
  }
  // 5,000 expected, standard deviation 50
  CHECK(std::abs(same_high - 5000) < 300);
  CHECK(std::abs(same_key - 5000) < 300);
}

TEST_CASE("dropout's gradient uses the forward's mask", "[autograd][gradcheck]") {
  const Tensor x = random_leaf({4, 5}, 82);
  // A fresh generator per call makes f deterministic, as gradcheck needs.
  require_gradcheck(
      [](auto& in) {
        Generator gen(5);
        return dropout(in[0], 0.3, true, gen);
      },
      {x});
  CHECK_THROWS_WITH(
      [&] {
        Generator gen(0);
        dropout(x, 1.5, true, gen);
      }(),
      "dropout: probability must be in [0, 1], got 1.5");
}
