// safetensors checkpoints: round trips, mismatch reports, and every kind of bad file.
#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "helpers.h"
#include "tapegrad/data/data_error.h"
#include "tapegrad/io/files.h"
#include "tapegrad/nn/nn.h"

using namespace tapegrad;
using namespace tapegrad::nn;
namespace fs = std::filesystem;

namespace {
MiniTransformerConfig tiny(uint64_t seed = 0) {
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

struct TempDir {
  fs::path path;
  TempDir() : path(fs::temp_directory_path() / fmt::format("tapegrad-test-{}", ::getpid())) {
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

// A file of a little-endian header length, the header text and `data` bytes.
void write_raw(const std::string& path, const std::string& header, size_t data_bytes,
               std::optional<uint64_t> claimed_len = std::nullopt) {
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = claimed_len.value_or(header.size());
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << header << std::string(data_bytes, '\0');
}
}  // namespace

TEST_CASE("save then load gives bit-identical outputs", "[nn]") {
  TempDir dir;
  MiniTransformer a(tiny(1)), b(tiny(2));
  a.eval();
  b.eval();
  const Tensor src = tensor({3, 4, 5}, {1, 3}, DType::Int64),
               tgt = tensor({1, 2}, {1, 2}, DType::Int64);
  REQUIRE(a.forward(src, tgt).to_vector<float>() != b.forward(src, tgt).to_vector<float>());
  save(a, dir.file("a.safetensors"), {{"config", a.config().to_json()}});
  const Metadata meta = load(b, dir.file("a.safetensors"));
  CHECK(b.forward(src, tgt).to_vector<float>() == a.forward(src, tgt).to_vector<float>());
  const MiniTransformerConfig cfg = MiniTransformerConfig::from_json(meta.at("config"), "test");
  CHECK(cfg.d_model == 8);
  CHECK(cfg.seed == 1);
  CHECK(cfg.dropout == 0.1);
  for (const Tensor& p : b.parameters()) CHECK(p.requires_grad());
  CHECK_FALSE(fs::exists(dir.file("a.safetensors.tmp." + std::to_string(::getpid()))));
}

TEST_CASE("the file layout is safetensors", "[nn]") {
  TempDir dir;
  save_safetensors(dir.file("t.safetensors"),
                   {{"b", tensor({1, 2, 3}, {3}, DType::Float64)}, {"a", arange(2)}}, {{"k", "v"}});
  std::ifstream in(dir.file("t.safetensors"), std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  std::string header(n, '\0');
  in.read(header.data(), static_cast<std::streamsize>(n));
  CHECK(n % 8 == 0);
  CHECK(
      header.rfind(
          R"({"__metadata__":{"k":"v"},"a":{"data_offsets":[24,40],"dtype":"I64","shape":[2]},"b":{"data_offsets":[0,24],"dtype":"F64","shape":[3]}})",
          0) == 0);
  const auto contents = load_safetensors(dir.file("t.safetensors"));
  REQUIRE(contents.tensors.size() == 2);
  CHECK(contents.tensors[0].first == "b");  // file order
  CHECK(contents.tensors[1].second.to_vector<int64_t>() == std::vector<int64_t>{0, 1});
  CHECK(contents.metadata.at("k") == "v");
}

TEST_CASE("loading reports every mismatch in one error, or loads non-strictly", "[nn][errors]") {
  TempDir dir;
  const std::string path = dir.file("m.safetensors");
  MiniTransformer model(tiny());
  NamedTensors state = model.state();
  state.erase(state.begin());                            // missing src_embed.weight
  state[0].second = zeros({2, 2});                       // wrong shape
  state[1].second = state[1].second.to(DType::Float64);  // wrong dtype
  state.emplace_back("extra.weight", zeros({1}));        // unexpected
  save_safetensors(path, state);
  const std::string names0 = state[0].first, names1 = state[1].first;
  CHECK_THROWS_WITH(load(model, path),
                    fmt::format("{}: does not fit MiniTransformer: missing 'src_embed.weight'; "
                                "'{}' has shape [2, 2] in the file, [13, 8] in the model; '{}' "
                                "has dtype float64 in the file, float32 in the model; unexpected "
                                "'extra.weight'",
                                path, names0, names1));
  // non-strict tolerates missing and unexpected names, never mismatches
  state.erase(state.begin(), state.begin() + 2);
  save_safetensors(path, state);
  CHECK_NOTHROW(load(model, path, {.strict = false}));
  CHECK_THROWS_AS(load(model, path, {.strict = true}), CheckpointError);
}

TEST_CASE("weights holding NaN or an infinity are refused by name unless allowed", "[nn][errors]") {
  TempDir dir;
  const std::string path = dir.file("m.safetensors");
  for (const double bad : {std::nan(""), HUGE_VAL, -HUGE_VAL}) {
    MiniTransformer model(tiny());
    NamedTensors state = model.state();
    const std::string name = state[3].first;
    Tensor w = state[3].second.clone();
    w.data<float>()[w.numel() - 1] = static_cast<float>(bad);  // the last element only
    state[3].second = w;
    save_safetensors(path, state);
    MiniTransformer fresh(tiny());
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

TEST_CASE("bad files give clear errors", "[nn][errors]") {
  TempDir dir;
  const std::string p = dir.file("bad.safetensors");
  auto error_of = [&]() -> std::string {
    try {
      load_safetensors(p);
    } catch (const CheckpointError& e) {
      return e.what();
    }
    return "no error";
  };
  CHECK_THROWS_WITH(load_safetensors(dir.file("none")), Catch::Contains("cannot open"));

  { std::ofstream(p, std::ios::binary) << "abc"; }
  CHECK(error_of() == p + ": truncated: 3 bytes, expected at least 8");

  write_raw(p, "{}", 0, uint64_t{1} << 62);  // absurd header length
  CHECK(error_of() ==
        p + ": header length 4611686018427387904 is impossible for a file of 10 bytes");

  write_raw(p, "{not json", 0);
  CHECK(error_of() == p + ": header is not a JSON object");

  write_raw(p, R"({"w":{"dtype":"F16","shape":[1],"data_offsets":[0,2]}})", 2);
  CHECK(error_of() == p + ": tensor 'w': unsupported dtype \"F16\"");

  write_raw(p, R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4);
  CHECK(error_of() == p + ": tensor 'w': data_offsets [0, 8] outside the 4 data bytes");

  write_raw(p, R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8);
  CHECK(error_of() ==
        p + ": tensor 'w': data_offsets [0, 8] hold 8 bytes, shape [3] float32 needs 12");

  write_raw(p, R"({"w":{"dtype":"F32","shape":[1000000000000],"data_offsets":[0,4]}})", 4);
  CHECK(error_of() == p + ": tensor 'w': shape [1000000000000] is larger than the file");

  write_raw(
      p,
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
      12);
  CHECK(error_of() == p + ": tensors 'a' and 'b' overlap");

  write_raw(p, R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8);
  CHECK(error_of() == p + ": tensor 'a': bad shape [-2]");

  write_raw(p, R"({"a":{"dtype":"F32"}})", 0);
  CHECK(error_of() == p + ": tensor 'a': needs dtype, shape and data_offsets");

  write_raw(p, R"({"__metadata__":{"k":1}})", 0);
  CHECK(error_of() == p + ": metadata 'k' is not a string");

  // nesting is refused before the JSON is parsed, whatever the depth
  for (const int depth : {129, 100'000}) {
    write_raw(p, R"({"w":)" + std::string(depth, '[') + std::string(depth, ']') + "}", 0);
    CHECK(error_of() == p + ": header nests deeper than 128 levels");
  }
  write_raw(p, R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":[[["[[[["]]]}})", 4);
  CHECK(load_safetensors(p).tensors.size() == 1);  // brackets inside strings do not count

  // the tensors tile the data exactly
  write_raw(p, R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8);
  CHECK(error_of() == p + ": data bytes [0, 4) before tensor 'a' belong to no tensor");
  write_raw(p, R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 12);
  CHECK(error_of() == p + ": data bytes [4, 12) after the last tensor belong to no tensor");
  write_raw(
      p,
      R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
      4);
  CHECK(load_safetensors(p).tensors.size() == 2);  // an empty tensor takes no bytes

  // a byte count that overflows 64 bits is not mistaken for a small one
  write_raw(p, R"({"a":{"dtype":"F64","shape":[4294967296,4294967296,0],"data_offsets":[0,0]}})",
            0);
  CHECK(error_of() == p + ": tensor 'a': shape [4294967296,4294967296,0] is larger than the file");
  write_raw(p, R"({"a":{"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,0]}})", 0);
  CHECK(error_of() == p + ": tensor 'a': shape [2305843009213693952] is larger than the file");

  // what an error quotes from the file is bounded
  write_raw(p, "{\"" + std::string(100'000, 'n') + R"(":{"dtype":"F32"}})", 0);
  CHECK(error_of() ==
        p + ": tensor '" + std::string(60, 'n') + " ...': needs dtype, shape and data_offsets");
  write_raw(p,
            std::string(R"({"a":{"dtype":[1,)") + std::string(50'000, '1') +
                R"(],"shape":[],"data_offsets":[0,0]}})",
            0);
  CHECK(error_of().size() < p.size() + 120);

  // only regular files
  CHECK_THROWS_WITH(load_safetensors(dir.path),
                    Catch::Contains("not a regular file (a directory)"));
  const std::string fifo = dir.file("fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THROWS_WITH(load_safetensors(fifo), fifo + ": not a regular file (a fifo)");
  CHECK_THROWS_WITH(load_safetensors("/dev/zero"),
                    "/dev/zero: not a regular file (a character device)");
}

TEST_CASE("a failed save leaves the previous checkpoint in place", "[nn]") {
  TempDir dir;
  const std::string path = dir.file("keep.safetensors");
  save_safetensors(path, {{"w", ones({2})}});
  // the target's directory disappears: the temporary file cannot be created
  CHECK_THROWS_AS(save_safetensors(dir.file("missing/x.safetensors"), {{"w", ones({2})}}),
                  CheckpointError);
  // a directory in the target's place is refused before anything is written
  fs::create_directories(dir.file("dir.safetensors"));
  CHECK_THROWS_WITH(save_safetensors(dir.file("dir.safetensors"), {{"w", ones({2})}}),
                    Catch::Contains("dir.safetensors: is a directory, not a regular file"));
  CHECK(fs::directory_iterator(dir.file("dir.safetensors")) == fs::directory_iterator());
  CHECK(load_safetensors(path).tensors[0].second.to_vector<float>() == std::vector<float>{1, 1});
  for (const auto& entry : fs::directory_iterator(dir.path)) {
    CHECK(entry.path().string().find(".tmp.") == std::string::npos);  // no leftovers
  }
}

TEST_CASE("every error tapegrad throws is a tapegrad::Error", "[nn][errors]") {
  static_assert(std::is_base_of_v<Error, io::FileError>);
  static_assert(std::is_base_of_v<Error, data::DataError>);
  static_assert(std::is_base_of_v<Error, CheckpointError>);
  static_assert(std::is_base_of_v<Error, InternalError>);
  TempDir dir;
  CHECK_THROWS_AS(load_safetensors(dir.file("missing.safetensors")), Error);
  CHECK_THROWS_AS(io::read_regular(dir.file("missing"), 10), Error);
  CHECK_THROWS_AS(matmul(ones({2, 3}), ones({2, 3})), Error);
}
