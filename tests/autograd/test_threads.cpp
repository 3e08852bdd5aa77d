// The thread pool: parallel_for's ranges, its serial cases, its errors; and the promise that
// a result never depends on the thread count.
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>

#include "helpers.h"
#include "tapegrad/autograd/autograd.h"

using namespace tapegrad;
using testing::random_leaf;

namespace {
// Sets the pool's size for one test and puts the previous size back.
struct ThreadCount {
  explicit ThreadCount(int n) : previous(num_threads()) { set_num_threads(n); }
  ~ThreadCount() { set_num_threads(previous); }
  int previous;
};
}  // namespace

TEST_CASE("parallel_for covers every index once in at most one range per thread", "[autograd]") {
  ThreadCount threads(3);
  const int64_t n = 100000;
  std::vector<int> hits(n, 0);
  std::atomic<int> ranges{0};
  parallel_for(n, 1000, [&](int64_t b, int64_t e) {
    ++ranges;
    for (int64_t i = b; i < e; ++i) ++hits[i];
  });
  CHECK(ranges == 3);
  CHECK(std::count(hits.begin(), hits.end(), 1) == n);
}

// The pool's point: ranges run at the same time. Each of two ranges waits (up to 10 s) for the
// other to have started; a pool that ran them one after the other on one thread would leave
// the first waiting out its time alone.
TEST_CASE("parallel_for runs ranges on two threads at once", "[autograd]") {
  ThreadCount threads(2);
  for (int round = 0; round < 20; ++round) {
    std::atomic<int> started{0};
    std::atomic<int> together{0};
    std::mutex ids_mutex;
    std::set<std::thread::id> ids;
    parallel_for(2, 1, [&](int64_t, int64_t) {
      {
        const std::lock_guard<std::mutex> lock(ids_mutex);
        ids.insert(std::this_thread::get_id());
      }
      ++started;
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (started.load() < 2 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::yield();
      if (started.load() == 2) ++together;
    });
    REQUIRE(together == 2);
    REQUIRE(ids.size() == 2);
  }
}

TEST_CASE("parallel_for runs small and nested loops on the calling thread", "[autograd]") {
  ThreadCount threads(2);
  const auto caller = std::this_thread::get_id();
  int calls = 0;
  parallel_for(10, 100, [&](int64_t b, int64_t e) {  // 10 items, grain 100: one range
    ++calls;
    CHECK(b == 0);
    CHECK(e == 10);
    CHECK(std::this_thread::get_id() == caller);
  });
  CHECK(calls == 1);
  // Catch2's assertions are not thread-safe: the workers count, the test thread checks
  std::atomic<int> inner{0}, elsewhere{0};
  parallel_for(2, 1, [&](int64_t, int64_t) {
    const auto outer = std::this_thread::get_id();
    parallel_for(1000, 1, [&](int64_t b, int64_t e) {
      if (std::this_thread::get_id() != outer) ++elsewhere;
      inner += static_cast<int>(e - b);
    });
  });
  CHECK(inner == 2000);
  CHECK(elsewhere == 0);
  parallel_for(0, 1, [&](int64_t, int64_t) { FAIL("an empty loop runs nothing"); });
}

TEST_CASE("the profiler counts an op's parallel loops and its time alone", "[autograd][profile]") {
  Tensor a = random_leaf({256, 256}, 1), b = random_leaf({256, 256}, 2);
  const Tensor small = random_leaf({3}, 3);
  std::string table;
  // each op's row (its loops and their time, within its own), and the table of them
  const auto run = [&](int threads) {
    ThreadCount count(threads);
    ProfileGuard profile;
    sum(matmul(a, b)).backward();
    add(small, small);
    const auto loops = [&] {
      int64_t all = 0;
      for (const auto& r : profile.rows()) all += r.loops;
      return all;
    };
    const int64_t in_ops = loops();
    parallel_for(1000, 1, [](int64_t, int64_t) {});  // outside any op: in no row
    CHECK(loops() == in_ops);
    table = profile.table();
    CHECK_THAT(table, Catch::Contains(fmt::format("in {} parallel loops", in_ops)));
    std::map<std::string, ProfileGuard::Row> rows;
    for (const auto& r : profile.rows()) rows[r.op] = r;
    return rows;
  };
  const auto two = run(2);
  const ProfileGuard::Row& mm = two.at("matmul");
  CHECK(mm.loops >= 2);  // forward, and backward's products
  CHECK(mm.loop_seconds > 0);
  CHECK(mm.loop_seconds <= mm.forward_seconds + mm.backward_seconds);
  CHECK(two.at("add").loops == 0);  // three elements: not split
  // one thread: nothing is split, every op runs alone
  const auto one = run(1);
  CHECK(one.at("matmul").loops == 0);
  CHECK(one.at("matmul").loop_seconds == 0);
  CHECK_THAT(table, Catch::Contains("in 0 parallel loops"));
}

TEST_CASE("an exception thrown in a worker's range reaches the caller", "[autograd][errors]") {
  ThreadCount threads(2);
  CHECK_THROWS_WITH(parallel_for(1000, 1,
                                 [](int64_t b, int64_t) {
                                   if (b > 0) throw std::runtime_error("range starting at 500");
                                 }),
                    "range starting at 500");
  std::atomic<int64_t> after{0};  // the pool still works
  parallel_for(4, 1, [&](int64_t b, int64_t e) { after += e - b; });
  CHECK(after == 4);
  CHECK_THROWS_WITH(set_num_threads(0),
                    "set_num_threads: thread count must be in [1, 1024], got 0");
}

TEST_CASE("loops back to back: each range runs once, whichever thread is late", "[autograd]") {
  // A worker still taking chunks of one loop as the next begins must neither take a range
  // of the new loop from the old loop's size nor miss one, and the caller must not return
  // before the last range is done: loops of changing sizes, with ranges so short (a
  // microsecond) that the threads race for every one.
  ThreadCount threads(3);
  std::vector<std::atomic<int>> hits(7);
  int wrong = 0;
  for (int loop = 0; loop < 100000; ++loop) {
    const int64_t n = 2 + loop % 6;
    for (auto& h : hits) h.store(0);
    parallel_for(n, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        volatile int work = 0;
        for (int spin = 0; spin < 200; ++spin) work = work + spin;
        ++hits[i];
      }
    });
    for (int64_t i = 0; i < 7; ++i) wrong += hits[i].load() != (i < n ? 1 : 0);
  }
  CHECK(wrong == 0);
}

TEST_CASE("results and gradients are reproducible and agree across thread counts", "[autograd]") {
  // One pass through every op that splits its work: big (BLAS, rows split) and small (own
  // kernel, batch split) matmuls, a batched matmul whose weight gradient sums over the batch,
  // softmax, layer norm, broadcast add, masked_fill, dropout, a copy of a permuted view,
  // linear (its products split in shares) and fused attention with a mask and dropout.
  auto run = [](int n) {
    ThreadCount threads(n);
    Generator gen(21);
    Tensor x = uniform({6, 40, 64}, -1, 1, gen), w = uniform({96, 64}, -1, 1, gen);
    Tensor bias = uniform({96}, -1, 1, gen), gamma = uniform({96}, 0.5, 1.5, gen);
    Tensor v = uniform({12, 8}, -1, 1, gen);
    for (Tensor* t : {&x, &w, &bias, &gamma, &v}) t->set_requires_grad(true);
    Tensor h = layer_norm(matmul(x, transpose(w, 0, 1)) + bias, gamma, Tensor());
    Tensor heads = permute(reshape(h, {6, 40, 8, 12}), {0, 2, 1, 3});  // [6, 8, 40, 12]
    Tensor scores = matmul(heads, transpose(heads, -2, -1));           // [6, 8, 40, 40]
    std::vector<double> blocked(40 * 40);
    for (size_t i = 0; i < blocked.size(); ++i) blocked[i] = i % 7 == 3;
    scores = masked_fill(scores, tensor(blocked, {40, 40}, DType::Bool), -1e9);
    Tensor p = dropout(softmax(scores, -1), 0.1, true, gen);
    Tensor out = matmul(matmul(p, heads), v);  // v's gradient sums over the batch
    Tensor loss = sum(permute(out, {0, 2, 1, 3}).contiguous() * transpose(out.detach(), 1, 2));
    const Tensor q = linear(x, w, bias);  // [6, 40, 96]
    const Tensor att = attention(q, h, h, 8,
                                 {.blocked = tensor(blocked, {40, 40}, DType::Bool),
                                  .dropout = {.p = 0.1, .training = true, .gen = &gen}});
    loss = loss + sum(att * att.detach());
    loss.backward();
    std::vector<std::vector<float>> r{loss.to_vector<float>()};
    for (Tensor* t : {&x, &w, &bias, &gamma, &v}) r.push_back(t->grad().to_vector<float>());
    return r;
  };
  // The split depends only on sizes and the thread count: the same count gives the same bits.
  const auto one = run(1), three = run(3);
  CHECK(run(3) == three);
  // Across counts, our kernels give the same bits too, but OpenBLAS rounds a block of rows
  // differently from the whole matrix, so the values agree to float rounding.
  for (size_t i = 0; i < one.size(); ++i) {
    INFO("result " << i << " (loss, then the gradients of x, w, bias, gamma, v)");
    REQUIRE(one[i].size() == three[i].size());
    for (size_t j = 0; j < one[i].size(); ++j) {
      REQUIRE(three[i][j] == Approx(one[i][j]).epsilon(1e-4).margin(1e-3));
    }
  }
}

TEST_CASE("linear's gradients have the same bits on any thread count", "[autograd]") {
  // 1200 rows, and a small model's 384: the weight gradient sums them in two halves whichever
  // threads take them (weight_grad_in_halves, fast/matmul.cpp); in float32 and under autocast.
  const std::vector<std::pair<Shape, Shape>> shapes{{{3, 400, 128}, {130, 128}},
                                                    {{4, 96, 64}, {256, 64}}};
  for (const auto& shape : shapes) {
    const Shape &x_shape = shape.first, &w_shape = shape.second;
    for (const Precision precision : {Precision::Float32, Precision::BFloat16}) {
      auto run = [&, precision](int n) {
        ThreadCount threads(n);
        const AutocastGuard autocast(precision);
        Generator gen(23);
        Tensor x = uniform(x_shape, -1, 1, gen), w = uniform(w_shape, -1, 1, gen);
        Tensor bias = uniform({w_shape[0]}, -1, 1, gen);
        for (Tensor* t : {&x, &w, &bias}) t->set_requires_grad(true);
        const Tensor y = linear(x, w, bias, {.activation = Activation::ReLU});
        const auto g = grad({y}, {x, w, bias}, {uniform(y.shape(), -1, 1, gen)});
        std::vector<std::vector<float>> r;
        for (const Tensor& t : g) r.push_back(t.to_vector<float>());
        return r;
      };
      const auto one = run(1);
      INFO("x with " << x_shape[1] << " rows an item, bfloat16 "
                     << (precision == Precision::BFloat16));
      CHECK(run(2) == one);
      CHECK(run(3) == one);
    }
  }
}

// The sanitizers' shadow memory does not fit an address-space limit
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
TEST_CASE("threads the system refuses are an Error and the previous pool stays",
          "[autograd][errors]") {
  ThreadCount two(2);
  // Each thread's stack is 8 MiB of address space: under a limit 64 MiB above what the
  // process maps now, 1000 threads cannot all start.
  rlimit before{};
  REQUIRE(getrlimit(RLIMIT_AS, &before) == 0);
  std::ifstream status("/proc/self/status");
  std::string line;
  rlim_t mapped = 0;
  while (std::getline(status, line)) {
    if (line.rfind("VmSize:", 0) == 0) mapped = std::stoull(line.substr(7)) * 1024;
  }
  REQUIRE(mapped > 0);
  rlimit limited = before;
  limited.rlim_cur = mapped + (rlim_t{64} << 20);
  REQUIRE(setrlimit(RLIMIT_AS, &limited) == 0);
  std::string error;
  try {
    set_num_threads(1000);
  } catch (const Error& e) {
    error = e.what();
  }
  REQUIRE(setrlimit(RLIMIT_AS, &before) == 0);
  REQUIRE_THAT(error, Catch::StartsWith("set_num_threads: cannot start thread"));
  CHECK(num_threads() == 2);
  const Tensor x = ones({1 << 16});
  CHECK(sum(x).item() == 1 << 16);
}
#endif
