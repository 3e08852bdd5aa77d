// The safetensors format: the layout, atomic saves, and every kind of bad file.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "helpers.h"
#include "tapegrad/io/safetensors.h"

using namespace tapegrad;
using namespace tapegrad::io;
namespace fs = std::filesystem;
using tapegrad::testing::TempDir;

namespace {
// A file of a little-endian header length, the header text and `data` bytes.
void write_raw(const std::string& path, const std::string& header, size_t data_bytes,
               std::optional<uint64_t> claimed_len = std::nullopt) {
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = claimed_len.value_or(header.size());
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << header << std::string(data_bytes, '\0');
}
}  // namespace

TEST_CASE("the file layout is safetensors", "[io]") {
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

TEST_CASE("bad files give clear errors", "[io][errors]") {
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

TEST_CASE("a failed save leaves the previous checkpoint in place", "[io]") {
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
