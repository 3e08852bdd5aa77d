// Shared test helpers: closeness checks, gradcheck with a readable failure message, and a
// temporary directory.
#pragma once

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "tapegrad/autograd/autograd.h"
#include "tapegrad/check/gradcheck.h"
#include "tapegrad/viz/print.h"

namespace tapegrad::testing {

// Every element of t within tol of the expected values (row-major).
inline void require_values(const Tensor& t, const std::vector<double>& expected,
                           double tol = 1e-6) {
  const std::vector<double> got = t.to_vector<double>();
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const bool inf = std::isinf(expected[i]);
    if (inf ? got[i] == expected[i] : std::abs(got[i] - expected[i]) <= tol) continue;
    // only a failing element is reported: formatting the tensor for every element's message
    // made a check of n elements cost n printed tensors
    INFO("element " << i << " of " << fmt::format("{}", t));
    if (inf) {
      REQUIRE(got[i] == expected[i]);
    } else {
      REQUIRE(std::abs(got[i] - expected[i]) <= tol);
    }
  }
}

// A float64 leaf with uniform values in [lo, hi) that requires grad.
inline Tensor random_leaf(const Shape& shape, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  Generator gen(seed);
  Tensor t = uniform(shape, lo, hi, gen, DType::Float64);
  t.set_requires_grad(true);
  return t;
}

inline void require_gradcheck(const GradcheckFn& f, const std::vector<Tensor>& inputs,
                              const GradcheckOptions& options = {}) {
  const GradcheckResult r = gradcheck(f, inputs, options);
  INFO("gradcheck: " << r.message());
  REQUIRE(r.ok);
  REQUIRE(r.elements_checked > 0);
}

// A new empty directory, removed with everything in it when the object goes.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "tapegrad-test-XXXXXX").string();
    path = ::mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path / name).string(); }
  std::string operator/(const std::string& name) const { return file(name); }
};

}  // namespace tapegrad::testing
