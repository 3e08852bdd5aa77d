// Checkpoints of modules: round trips, mismatch reports, non-finite weights.
#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "helpers.h"
#include "tapegrad/data/data_error.h"
#include "tapegrad/io/files.h"
#include "tapegrad/nn/nn.h"
#include "tapegrad/pretrained/pretrained.h"

using namespace tapegrad;
using namespace tapegrad::nn;
namespace fs = std::filesystem;
using tapegrad::testing::TempDir;

namespace {
MiniTransformerConfig tiny_seeded(uint64_t seed = 0) {
  return {.src_vocab = 11,
          .tgt_vocab = 13,
          .d_model = 8,
          .heads = 2,
          .d_ff = 16,
          .encoder_layers = 1,
          .decoder_layers = 1,
          .dropout = 0.1,
          .max_len = 16,
          .seed = seed};
}

}  // namespace

TEST_CASE("save then load gives bit-identical outputs", "[nn]") {
  TempDir dir;
  MiniTransformer a(tiny_seeded(1)), b(tiny_seeded(2));
  a.eval();
  b.eval();
  const Tensor src = tensor({3, 4, 5}, {1, 3}, DType::Int64),
               tgt = tensor({1, 2}, {1, 2}, DType::Int64);
  REQUIRE(a.forward(src, tgt).to_vector<float>() != b.forward(src, tgt).to_vector<float>());
  save(a, dir.file("a.safetensors"), {{"config", config_to_json(a.config())}});
  const Metadata meta = load(b, dir.file("a.safetensors"));
  CHECK(b.forward(src, tgt).to_vector<float>() == a.forward(src, tgt).to_vector<float>());
  const MiniTransformerConfig cfg = config_from_json(meta.at("config"), "test");
  CHECK(cfg.d_model == 8);
  CHECK(cfg.seed == 1);
  CHECK(cfg.dropout == 0.1);
  for (const Tensor& p : b.parameters()) CHECK(p.requires_grad());
  CHECK_FALSE(fs::exists(dir.file("a.safetensors.tmp." + std::to_string(::getpid()))));
}

TEST_CASE("loading reports every mismatch in one error, or loads non-strictly", "[nn][errors]") {
  TempDir dir;
  const std::string path = dir.file("m.safetensors");
  MiniTransformer model(tiny_seeded());
  NamedTensors state = model.state();
  state.erase(state.begin());                            // missing src_embed.weight
  state[0].second = zeros({2, 2});                       // wrong shape
  state[1].second = state[1].second.to(DType::Float64);  // wrong dtype
  state.emplace_back("extra.weight", zeros({1}));        // unexpected
  io::save_safetensors(path, state);
  const std::string names0 = state[0].first, names1 = state[1].first;
  CHECK_THROWS_WITH(load(model, path),
                    fmt::format("{}: does not fit MiniTransformer: missing 'src_embed.weight'; "
                                "'{}' has shape [2, 2] in the file, [13, 8] in the model; '{}' "
                                "has dtype float64 in the file, float32 in the model; unexpected "
                                "'extra.weight'",
                                path, names0, names1));
  // non-strict tolerates missing and unexpected names, never mismatches
  state.erase(state.begin(), state.begin() + 2);
  io::save_safetensors(path, state);
  CHECK_NOTHROW(load(model, path, {.strict = false}));
  CHECK_THROWS_AS(load(model, path, {.strict = true}), CheckpointError);
}

TEST_CASE("weights holding NaN or an infinity are refused by name unless allowed", "[nn][errors]") {
  TempDir dir;
  const std::string path = dir.file("m.safetensors");
  for (const double bad : {std::nan(""), HUGE_VAL, -HUGE_VAL}) {
    MiniTransformer model(tiny_seeded());
    NamedTensors state = model.state();
    const std::string name = state[3].first;
    Tensor w = state[3].second.clone();
    w.data<float>()[w.numel() - 1] = static_cast<float>(bad);  // the last element only
    state[3].second = w;
    io::save_safetensors(path, state);
    MiniTransformer fresh(tiny_seeded());
    const std::vector<float> before = fresh.state()[3].second.to_vector<float>();
    CHECK_THROWS_WITH(load(fresh, path),
                      fmt::format("{}: does not fit MiniTransformer: '{}' holds NaN or an infinity "
                                  "(LoadOptions::allow_nonfinite loads it anyway)",
                                  path, name));
    CHECK(fresh.state()[3].second.to_vector<float>() == before);  // nothing loaded
    CHECK_NOTHROW(load(fresh, path, {.allow_nonfinite = true}));
    CHECK(std::isnan(fresh.state()[3].second.to_vector<float>().back() * 0));
  }
}

TEST_CASE("every error tapegrad throws is a tapegrad::Error", "[nn][errors]") {
  static_assert(std::is_base_of_v<Error, io::FileError>);
  static_assert(std::is_base_of_v<Error, data::DataError>);
  static_assert(std::is_base_of_v<Error, CheckpointError>);
  static_assert(std::is_base_of_v<Error, InternalError>);
  TempDir dir;
  CHECK_THROWS_AS(io::load_safetensors(dir.file("missing.safetensors")), Error);
  CHECK_THROWS_AS(io::read_regular(dir.file("missing"), 10), Error);
  CHECK_THROWS_AS(matmul(ones({2, 3}), ones({2, 3})), Error);
}
