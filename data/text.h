// Text handling shared by the vocabulary and the corpus loader: UTF-8 validation and splitting
// into code points or whitespace-separated words.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tapegrad::data {

// The byte offset of the first invalid UTF-8 sequence, or nullopt when the text is valid.
std::optional<size_t> find_invalid_utf8(std::string_view text);
// The text's code points, each as its UTF-8 bytes. The text must be valid UTF-8.
std::vector<std::string> split_chars(std::string_view text);
// Words separated by runs of spaces and tabs.
std::vector<std::string> split_words(std::string_view text);

}  // namespace tapegrad::data
