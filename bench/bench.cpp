// bench: the workloads of the performance issues, timed on this machine.
//
//   ./build/bench/bench --workload encoder-forward   (or encoder-train, mini-train-small,
//                                                      mini-train-base, lm-recipe, lm-large,
//                                                      sgemm, cores)
// Each run prints one line of key=value pairs: median seconds per iteration after warm-up,
// tokens/s, achieved matmul GFLOP/s (flops counted analytically), peak RSS. --profile first
// prints the timed iterations' ops by time, then by module path (profile.h). One workload per
// process, so peak RSS is that workload's. bench/compare_pytorch.py runs these and the same
// workloads in PyTorch and prints the table.
//
// Data-parallel: `mpirun -np N bench --workload mini-train-base --threads 1` splits the global
// --batch over the processes (tapegrad/parallel/), the gradients summed in buckets of
// --bucket-kb during backward (0: all at once after it); process 0 prints.
#include <cblas.h>
#include <fmt/core.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "examples/cli.h"
#include "tapegrad/autograd/autograd.h"
#include "tapegrad/autograd/fast/gemm_bf16.h"
#include "tapegrad/decode/decoding.h"
#include "tapegrad/nn/nn.h"
#include "tapegrad/optim/optimizer.h"
#include "tapegrad/parallel/world.h"
#include "tapegrad/train/lm_trainer.h"
#include "tapegrad/train/trainer.h"

using namespace tapegrad;

namespace {

struct Result {
  double seconds;  // median per iteration
  int64_t tokens;  // per iteration
  double flops;    // matmul flops per iteration
};

// --profile: the timed iterations' ops by time (ProfileGuard), then the same by module path,
// printed per iteration.
bool g_profile = false;
// --norm-first: the encoder and mini-train workloads with pre-norm layers (and final norms).
bool g_norm_first = false;
// --precision bf16: every workload in mixed precision (the trainers' own option, and an
// AutocastGuard around the rest)
Precision g_precision = Precision::Float32;

// The median time of `iterations` runs of `iteration`, after `warmup` runs and at least
// kWarmupSeconds of them: a step of a few milliseconds (mini-train-small) timed after three
// warm-up steps, in a process started just after others had kept both cores busy, had run at
// up to 1.5x its steady time (3.8 ms in compare_pytorch.py against 2.4 alone).
constexpr double kWarmupSeconds = 0.25;

double median_seconds(const std::function<void()>& iteration, int warmup, int iterations) {
  const auto start = std::chrono::steady_clock::now();
  const auto warm = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >=
           kWarmupSeconds;
  };
  for (int i = 0; i < warmup || !warm(); ++i) iteration();
  std::vector<double> times;
  std::optional<ProfileGuard> profile;
  if (g_profile) profile.emplace();
  for (int i = 0; i < iterations; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    iteration();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  if (profile) fmt::print("{}\n{}", profile->table(iterations), profile->module_table(iterations));
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// Forward matmul flops of one encoder layer over B sequences of length T.
double encoder_layer_flops(double B, double T, double C, double F) {
  const double N = B * T;
  return 8 * N * C * C + 4 * B * T * T * C + 4 * N * C * F;
}

// Forward matmul flops of one decoder layer: T target positions attending to S source ones.
double decoder_layer_flops(double B, double T, double S, double C, double F) {
  const double self = 8 * B * T * C * C + 4 * B * T * T * C;
  const double cross = 4 * B * T * C * C + 4 * B * S * C * C + 4 * B * T * S * C;
  return self + cross + 4 * B * T * C * F;
}

Result encoder(bool train, int iterations) {
  const int64_t B = 30, T = 200, C = 512, F = 2048, L = 5;
  Generator gen(0);
  nn::Encoder enc({.d_model = C, .heads = 8, .d_ff = F, .dropout = 0.1, .norm_first = g_norm_first},
                  L, g_norm_first, gen);
  const Tensor x = normal({B, T, C}, 0, 1, gen);
  const double forward = L * encoder_layer_flops(B, T, C, F);
  if (!train) {
    enc.eval();
    const double s = median_seconds(
        [&] {
          NoGradGuard no_grad;
          nn::call(enc, x);
        },
        1, iterations);
    return {s, B * T, forward};
  }
  optim::Adam adam(enc.named_parameters(), {});
  const double s = median_seconds(
      [&] {
        Tensor loss = mean(nn::call(enc, x));
        loss.backward();
        adam.step();
        adam.zero_grad();
      },
      1, iterations);
  return {s, B * T, 3 * forward};  // backward: two matmuls per forward matmul
}

// One train::Trainer step (the library's, which examples/train runs; here in memory, with a
// constant learning rate and no clipping or label smoothing) on a global batch of B random
// pairs: sources of len words, targets of len - 1 (len tokens with <bos> or <eos>), from a
// vocabulary of V tokens. Under mpirun each process takes its rows of the batch.
Result mini_train(int64_t V, int64_t C, int64_t F, int64_t L, int64_t len, int64_t B,
                  int iterations, const parallel::World& world, int64_t bucket_kb) {
  std::string words;  // every word once, so that the vocabulary has V tokens
  for (int64_t i = 4; i < V; ++i) words += fmt::format("{}w{}", i > 4 ? " " : "", i);
  const auto vocab = data::Vocabulary::build({words}, data::Level::Word);
  Generator gen(1);
  const auto sentence = [&](int64_t n) {
    std::string s;
    for (int64_t i = 0; i < n; ++i) s += fmt::format("{}w{}", i ? " " : "", 4 + gen.below(V - 4));
    return s;
  };
  data::CorpusSplit split;
  for (int64_t i = 0; i < B; ++i) split.train.push_back({sentence(len), sentence(len - 1)});
  train::Trainer trainer({.out = "",  // in memory
                          .steps = 1'000'000,
                          .batch = B,
                          .schedule = "constant",
                          .label_smoothing = 0,
                          .clip = 0,
                          .check_finite = false,
                          .bucket_kb = bucket_kb,
                          .precision = g_precision},
                         world);
  trainer.begin(split, vocab, vocab,
                {.d_model = C,
                 .heads = 8,
                 .d_ff = F,
                 .encoder_layers = L,
                 .decoder_layers = L,
                 .dropout = 0.1,
                 .max_len = len,
                 .norm_first = g_norm_first});
  const double s = median_seconds([&] { trainer.step(); }, 3, iterations);
  const double forward = L * encoder_layer_flops(B, len, C, F) +
                         L * decoder_layer_flops(B, len, len, C, F) + 2.0 * B * len * C * V;
  return {s, 2 * B * len, 3 * forward};
}

// One train::LanguageModelTrainer step (the library's, which `train --task lm` runs; in
// memory, with nanoGPT's optimizer: AdamW, weight decay 0.1, beta2 0.99, clipping at 1.0) on B
// random blocks of T characters of a random text over 65 characters (Shakespeare's, nanoGPT's
// shakespeare_char), with L pre-norm GELU layers of width C and H heads.
Result lm_train(int64_t C, int64_t H, int64_t L, int64_t T, int64_t B, double dropout,
                int iterations, const parallel::World& world) {
  const std::string alphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz \n!$&,-.3:;?\x27";
  Generator gen(1);
  std::string text;
  for (int i = 0; i < 200000; ++i) text += alphabet[gen.below(alphabet.size())];
  auto vocab = data::Vocabulary::build({text}, data::Level::Char);
  const int64_t V = vocab.size();
  data::TextSplit split =
      data::encode_split(std::move(vocab), text.substr(0, 180000), text.substr(180000));
  train::LanguageModelTrainer trainer({.out = "",
                                       .steps = 1000000,
                                       .batch = B,
                                       .lr = 1e-3,
                                       .schedule = "constant",
                                       .optimizer = "adamw",
                                       .weight_decay = 0.1,
                                       .beta2 = 0.99,
                                       .eps = 1e-8,
                                       .label_smoothing = 0,
                                       .best_metric = "loss",
                                       .check_finite = false,
                                       .precision = g_precision},
                                      1, world);
  trainer.begin(
      std::move(split),
      {.d_model = C, .heads = H, .d_ff = 4 * C, .layers = L, .block_size = T, .dropout = dropout});
  const double s = median_seconds([&] { trainer.step(); }, 3, iterations);
  const double forward = L * encoder_layer_flops(B, T, C, 4 * C) + 2.0 * B * T * C * V;
  return {s, B * T, 3 * forward};
}

// Decoding with generate(): `sources` random sources of length S, in batches of `batch`, each
// generating exactly max_len tokens (<eos> is made impossible, so every workload does the same
// work whatever the random weights say). Tokens per iteration: sources x max_len.
Result decode(const nn::MiniTransformerConfig& cfg, int64_t sources, int64_t batch, int64_t S,
              const nn::GenerateOptions& options, int iterations) {
  nn::MiniTransformer model(cfg);
  {
    NoGradGuard no_grad;
    model.out_proj->bias.set({options.eos}, -1e4);
  }
  Generator gen(1);
  std::vector<Tensor> batches;
  for (int64_t start = 0; start < sources; start += batch) {
    const int64_t n = std::min(batch, sources - start);
    std::vector<int64_t> ids(n * S);
    for (int64_t& id : ids) id = 4 + static_cast<int64_t>(gen.below(cfg.src_vocab - 4));
    batches.push_back(from_vector(ids, {n, S}));
  }
  const double s = median_seconds(
      [&] {
        for (const Tensor& b : batches) nn::generate(model, b, options);
      },
      1, iterations);
  return {s, sources * options.max_len, 0};
}

// The machine's matmul rate on the shapes the workloads use, three ways: OpenBLAS sgemm alone
// on its own `threads` threads (the roofline), tapegrad's matmul (our gemm kernel,
// split over our `threads` threads), and the bfloat16 product of mixed precision (bf16_gemm,
// split by rows the same way; the fastest kernel the CPU has: bf16_kernel= says which).
void sgemm_roofline(int threads) {
  openblas_set_num_threads(threads);
  struct Shape3 {
    const char* what;
    int M, N, K;
  };
  const Shape3 shapes[] = {{"encoder projection [6000,512]x[512,512]", 6000, 512, 512},
                           {"encoder ffn [6000,512]x[512,2048]", 6000, 2048, 512},
                           {"attention head [200,64]x[64,200]", 200, 200, 64},
                           {"mini-base ffn [2048,512]x[512,2048]", 2048, 2048, 512},
                           {"mini-small projection [384,64]x[64,64]", 384, 64, 64}};
  for (const Shape3& s : shapes) {
    std::vector<float> a(static_cast<size_t>(s.M) * s.K, 0.5f),
        b(static_cast<size_t>(s.K) * s.N, 0.25f), c(static_cast<size_t>(s.M) * s.N);
    const double flops = 2.0 * s.M * s.N * s.K;
    const int reps = std::max(1, static_cast<int>(2e9 / flops));
    auto gflops = [&](const std::function<void()>& product) {
      const double sec = median_seconds(
          [&] {
            for (int r = 0; r < reps; ++r) product();
          },
          1, 5);
      return flops * reps / sec / 1e9;
    };
    const double openblas = gflops([&] {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.M, s.N, s.K, 1.0f, a.data(), s.K,
                  b.data(), s.N, 0.0f, c.data(), s.N);
    });
    const Tensor ta = full({s.M, s.K}, 0.5), tb = full({s.K, s.N}, 0.25);
    const double ours = gflops([&] { matmul(ta, tb); });
    const double bf16 = gflops([&] {
      parallel_for(s.M, static_cast<int64_t>(kGrainFlops / (2.0 * s.N * s.K)) + 1,
                   [&](int64_t r0, int64_t r1) {
                     bf16_gemm(false, false, r1 - r0, s.N, s.K, a.data() + r0 * s.K, s.K, b.data(),
                               s.N, 0.0f, c.data() + r0 * s.N, s.N);
                   });
    });
    fmt::print(
        "sgemm shape=\"{}\" openblas_gflops={:.1f} tapegrad_gflops={:.1f} bf16_gflops={:.1f} "
        "bf16_kernel={}\n",
        s.what, openblas, ours, bf16,
        bf16_kernel() == Bf16Kernel::Native ? "avx512bf16"
        : bf16_kernel() == Bf16Kernel::Fma  ? "avx512fma"
                                            : "emulated");
  }
}

// The time a value takes to go from one thread to another and back: two threads hand one
// atomic back and forth, and the median of 5 runs of up to 4000 round trips (or 100 ms, so two
// threads that share one vCPU, a trip per time slice, end soon), in ns. On a shared VM it says
// where the host put the vCPUs: 50-110 ns when they share a last-level cache, 320-400 ns on the
// EPYCs of these sessions when they do not (another CCD), and then every small parallel
// workload slows (bench/README.md).
double round_trip_ns() {
  constexpr int kTrips = 4000, kStop = -1;
  constexpr auto kLimit = std::chrono::milliseconds(100);
  std::vector<double> runs;
  for (int run = 0; run < 5; ++run) {
    std::atomic<int> ball{0};
    std::thread other([&] {
      for (int i = 0;; ++i) {
        int seen;
        while ((seen = ball.load(std::memory_order_acquire)) != 2 * i + 1 && seen != kStop) {
        }
        if (seen == kStop) return;
        ball.store(2 * i + 2, std::memory_order_release);
      }
    });
    const auto start = std::chrono::steady_clock::now();
    int trips = 0;
    while (trips < kTrips &&
           (trips % 64 != 0 || std::chrono::steady_clock::now() - start < kLimit)) {
      ball.store(2 * trips + 1, std::memory_order_release);
      while (ball.load(std::memory_order_acquire) != 2 * trips + 2) {
      }
      ++trips;
    }
    const auto stop = std::chrono::steady_clock::now();
    ball.store(kStop, std::memory_order_release);
    other.join();
    runs.push_back(std::chrono::duration<double, std::nano>(stop - start).count() / trips);
  }
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
}

// How many cores the machine's vCPUs deliver now: `threads` threads each run the same float
// product (sgemm of [96, 256] x [256, 96], in each core's own cache) at once, and their
// summed rate is divided by one thread's alone. A shared VM's vCPUs at times share a core or
// are sliced by the host: two of them then deliver 1.0-1.5 cores, and every parallel
// workload runs slower while the one-thread rate does not move. Then, with two threads or more
// on two vCPUs or more, the round trip between two (round_trip_ns). compare_pytorch.py probes
// before and after each timed run; a probe samples a moment, and the state changes within
// seconds or minutes.
void cores_delivered(int threads) {
  constexpr int64_t M = 96, N = 96, K = 256;
  const auto rate = [&] {
    std::vector<float> a(M * K, 0.5f), b(K * N, 0.25f), c(M * N);
    const auto start = std::chrono::steady_clock::now();
    int64_t products = 0;
    while (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(100)) {
      sgemm(false, false, M, N, K, a.data(), K, b.data(), N, 0.0f, c.data(), N);
      ++products;
    }
    const double sec =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return 2.0 * M * N * K * static_cast<double>(products) / sec / 1e9;
  };
  const double one = rate();
  std::vector<double> rates(static_cast<size_t>(threads));
  std::vector<std::thread> others;
  for (int t = 1; t < threads; ++t) others.emplace_back([&, t] { rates[t] = rate(); });
  rates[0] = rate();
  for (std::thread& t : others) t.join();
  double sum = 0;
  for (const double r : rates) sum += r;
  fmt::print("cores threads={} one_thread_gflops={:.1f} all_threads_gflops={:.1f} delivered={:.2f}",
             threads, one, sum, sum / one);
  // two spinning threads on one vCPU would hand the atomic over once a time slice
  if (threads > 1 && std::thread::hardware_concurrency() > 1) {
    fmt::print(" round_trip_ns={:.0f}", round_trip_ns());
  }
  fmt::print("\n");
}

}  // namespace

int main(int argc, char** argv) {
  parallel::World world(argc, argv);
  return examples::run_main("bench", [&] {
    examples::Flags f(argc, argv, "bench: time one workload\nusage: bench --workload NAME");
    const std::string w =
        f.text("workload", "mini-train-small",
               "encoder-forward, encoder-train, mini-train-small, mini-train-base, lm-recipe, "
               "lm-large, sgemm, cores, "
               "decode-dates-greedy, decode-dates-beam4, decode-base-16 or decode-base-128");
    const int64_t iterations =
        f.integer("iterations", 5, "timed iterations after warm-up", 1, 1'000'000);
    const int64_t threads = f.integer("threads", 2, "threads (set_num_threads)", 1, kMaxThreads);
    const bool no_cache =
        f.boolean("no-cache", "decode workloads: rerun the decoder over the whole prefix");
    const int64_t batch = f.integer(
        "batch", 32, "mini-train workloads: sequences per step, over all processes", 1, 65536);
    const int64_t bucket_kb =
        f.integer("bucket-kb", 1024,
                  "under mpirun: KiB per gradient bucket (0: one sum after backward)", 0, 1 << 20);
    g_profile = f.boolean("profile",
                          "print the timed iterations' ops by time (per iteration; the profiler "
                          "costs a little time of its own)");
    g_norm_first = f.boolean("norm-first",
                             "encoder and mini-train workloads: pre-norm layers (and final norms)");
    g_precision = examples::read_precision(f);
    const std::string kernel =
        f.text("bf16-kernel", "auto",
               "the bfloat16 products' kernel: auto (this CPU's fastest), native, fma or emulated "
               "(set_bf16_kernel: what another CPU would run)");
    if (!f.finish()) return 0;
    if (kernel != "auto") {
      const std::map<std::string, Bf16Kernel> kernels{{"native", Bf16Kernel::Native},
                                                      {"fma", Bf16Kernel::Fma},
                                                      {"emulated", Bf16Kernel::Emulated}};
      if (!kernels.contains(kernel))
        throw examples::FlagError(
            fmt::format("--bf16-kernel: auto, native, fma or emulated, got '{}'", kernel));
      set_bf16_kernel(kernels.at(kernel));
    }
    const AutocastGuard autocast(g_precision);
    set_num_threads(static_cast<int>(threads));
    if (w == "sgemm") {
      sgemm_roofline(static_cast<int>(threads));
      return 0;
    }
    if (w == "cores") {
      cores_delivered(static_cast<int>(threads));
      return 0;
    }
    Result r{};
    const int n = static_cast<int>(iterations);
    if (w == "encoder-forward")
      r = encoder(false, n);
    else if (w == "encoder-train")
      r = encoder(true, n);
    else if (w == "mini-train-small")
      r = mini_train(100, 64, 256, 2, 12, batch, n, world, bucket_kb);
    else if (w == "mini-train-base")
      r = mini_train(8000, 512, 2048, 3, 64, batch, n, world, bucket_kb);
    else if (w == "lm-recipe")  // nanoGPT's CPU recipe for shakespeare_char
      r = lm_train(128, 4, 4, 64, 12, 0.0, n, world);
    else if (w == "lm-large")  // nanoGPT's shakespeare_char config
      r = lm_train(384, 6, 6, 256, 64, 0.2, n, world);
    else if (w.rfind("decode-", 0) == 0) {
      // the date model of examples/train (its vocabularies), and the base model
      const nn::MiniTransformerConfig dates{
          .src_vocab = 51, .tgt_vocab = 15, .d_model = 64, .heads = 4, .d_ff = 256, .max_len = 128};
      const nn::MiniTransformerConfig base{.src_vocab = 8000,
                                           .tgt_vocab = 8000,
                                           .d_model = 512,
                                           .heads = 8,
                                           .d_ff = 2048,
                                           .encoder_layers = 3,
                                           .decoder_layers = 3,
                                           .max_len = 130};
      const bool cache = !no_cache;
      if (w == "decode-dates-greedy")
        r = decode(dates, 500, 64, 24, {.max_len = 11, .cache = cache}, n);
      else if (w == "decode-dates-beam4")
        r = decode(dates, 500, 64, 24, {.max_len = 11, .beam = 4, .cache = cache}, n);
      else if (w == "decode-base-16")
        r = decode(base, 32, 32, 64, {.max_len = 16, .cache = cache}, n);
      else if (w == "decode-base-128")
        r = decode(base, 32, 32, 64, {.max_len = 128, .cache = cache}, n);
      else
        throw examples::FlagError(fmt::format("--workload: unknown workload '{}'", w));
    } else
      throw examples::FlagError(fmt::format("--workload: unknown workload '{}'", w));
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    if (!world.is_root()) return 0;
    if (world.size() > 1) fmt::print("processes={} bucket_kb={} ", world.size(), bucket_kb);
    fmt::print(
        "workload={} precision={} seconds={:.6f} tokens_per_s={:.0f} gflops={:.1f} "
        "peak_rss_mb={:.0f}\n",
        w, g_precision == Precision::BFloat16 ? "bf16" : "fp32", r.seconds,
        static_cast<double>(r.tokens) / r.seconds, r.flops / r.seconds / 1e9,
        static_cast<double>(usage.ru_maxrss) / 1024);
    return 0;
  });
}
