// The profiler: ops counted and timed forward and backward by name, bytes and flops charged to
// the op that spent them, a backward's inner ops folded into it, nested guards, the table.
#include <chrono>

#include "helpers.h"
#include "tapegrad/autograd/ops/registry.h"

using namespace tapegrad;
using testing::random_leaf;

namespace {
const ProfileGuard::Row* find(const std::vector<ProfileGuard::Row>& rows, const std::string& op) {
  for (const auto& r : rows) {
    if (r.op == op) return &r;
  }
  return nullptr;
}
}  // namespace

TEST_CASE("the profiler counts, times and sizes each op, forward and backward", "[profile]") {
  Generator gen(1);
  Tensor x = normal({4, 3}, 0, 1, gen, DType::Float32).set_requires_grad(true);
  Tensor w = normal({3, 5}, 0, 1, gen, DType::Float32).set_requires_grad(true);
  std::vector<ProfileGuard::Row> rows;
  const auto t0 = std::chrono::steady_clock::now();
  {
    ProfileGuard profile;
    sum(relu(matmul(x, w))).backward();
    rows = profile.rows();
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto* mm = find(rows, "matmul");
  REQUIRE(mm != nullptr);
  CHECK(mm->forward_calls == 1);
  CHECK(mm->backward_calls == 1);
  // forward 2 M N K, backward one product for each of dx and dw
  CHECK(mm->flops == 2.0 * 4 * 5 * 3 * 3);
  // forward: the [4, 5] output; backward: dx [4, 3] and dw [3, 5], float32; the learner's edition
  // (no fast room) also copies the backward's transposed w [5, 3] and x [3, 4] for BLAS
  CHECK(mm->bytes == 4 * (20 + 12 + 15) + (fast_ops() ? 0 : 4 * (15 + 12)));
  for (const char* op : {"relu", "sum"}) {
    const auto* r = find(rows, op);
    REQUIRE(r != nullptr);
    CHECK(r->forward_calls == 1);
    CHECK(r->backward_calls == 1);
    CHECK(r->flops == 0);
  }
  double total = 0;
  for (const auto& r : rows) {
    CHECK(r.forward_seconds >= 0);
    CHECK(r.backward_seconds >= 0);
    total += r.forward_seconds + r.backward_seconds;
  }
  CHECK(total <= wall);  // self times: nothing counted twice
  // nothing is recorded once the guard is gone
  sum(matmul(x, w)).backward();
  CHECK(profile::t_current == nullptr);
}

TEST_CASE("a backward step's inner ops are its own time, and guards nest", "[profile]") {
  Tensor x = random_leaf({3, 3}, 2);
  ProfileGuard outer;
  Tensor y = matmul(x, x);
  {
    ProfileGuard inner;
    // under create_graph, matmul's backward runs matmul and transpose ops: charged to it
    sum(y).backward(Tensor(), {.create_graph = true});
    const auto rows = inner.rows();
    REQUIRE(rows.size() == 2);  // sum and matmul, backward only
    const auto* mm = find(rows, "matmul");
    REQUIRE(mm != nullptr);
    CHECK(mm->forward_calls == 0);
    CHECK(mm->backward_calls == 1);
    CHECK(mm->flops == 2 * (2.0 * 27));  // both products of the formula, inside the backward
    CHECK(find(rows, "transpose") == nullptr);
    x.zero_grad();  // its gradient's graph holds x: a cycle until dropped
  }
  const auto rows = outer.rows();
  REQUIRE(rows.size() == 1);  // the forward matmul only: the inner guard had the rest
  CHECK(rows[0].op == "matmul");
  CHECK(rows[0].forward_calls == 1);
  CHECK(rows[0].backward_calls == 0);
  const std::string table = outer.table();
  CHECK(table.starts_with("op "));
  CHECK(table.find("\nmatmul ") != std::string::npos);
  CHECK(table.find("\ntotal ") != std::string::npos);
}
