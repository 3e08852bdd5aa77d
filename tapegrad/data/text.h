// Text handling shared by the vocabulary and the corpus loader: UTF-8 validation and splitting
// into code points or whitespace-separated words.
#pragma once

#include <istream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tapegrad::data {

// The byte offset of the first invalid UTF-8 sequence, or nullopt when the text is valid.
std::optional<size_t> find_invalid_utf8(std::string_view text);
// The text's code points, each as its UTF-8 bytes. The text must be valid UTF-8.
std::vector<std::string> split_chars(std::string_view text);
// The bytes of the code point that starts at text[at] (1 for a byte that cannot start one).
size_t char_length(std::string_view text, size_t at);
// Calls f with each code point of the text, as split_chars gives them, without building a list.
template <class F>
void for_each_char(std::string_view text, F&& f) {
  for (size_t i = 0, n; i < text.size(); i += n) f(text.substr(i, n = char_length(text, i)));
}
// A text as one line of a file: backslash, line break and tab written as `\\`, `\n` and `\t`.
std::string escape_line(std::string_view text);
// The text of such a line, or nullopt when a backslash begins none of the three.
std::optional<std::string> unescape_line(std::string_view line);
// Reads one line (without its '\n') keeping at most max_bytes of it, so a file that is one
// enormous line cannot make us allocate its size. Returns the line's full length, or nullopt
// at the end of the stream.
std::optional<size_t> read_line(std::istream& in, std::string& line, size_t max_bytes);
// The lines of a stream that may be endless or binary (standard input, a pipe). Bounded: a
// NUL byte, a line over max_line bytes or more than max_total bytes in all is a DataError
// naming the source and line, thrown as soon as the byte is read, so neither /dev/zero nor a
// line that never ends holds a program up. A carriage return ending a line is dropped.
class LineReader {
 public:
  LineReader(std::istream& in, std::string source, size_t max_line, uint64_t max_total);
  // The next line, or nullopt at the end of the stream.
  std::optional<std::string> next();
  // "stdin:3": where the line next() returned last came from.
  std::string where() const;

 private:
  std::istream& in_;
  std::string source_;
  size_t max_line_;
  uint64_t max_total_, total_ = 0;
  int64_t line_no_ = 0;
};

// Every line of the file `path` ("-": standard input), read by a LineReader with these bounds;
// `path` is a regular file or a pipe, read through io::StreamFile (a FIFO with no writer is an
// error, not a hang), and one that cannot be read is a DataError naming it.
std::vector<std::string> read_lines(const std::string& path, size_t max_line, uint64_t max_total);

// Words separated by runs of spaces and tabs.
std::vector<std::string> split_words(std::string_view text);

// The text lower-cased by Unicode's simple case mapping for the Latin (ASCII, Latin-1, Latin
// Extended-A), Greek and Cyrillic capitals; every other character as it is.
std::string lowercase(std::string_view text);
// split_words, each punctuation mark then a token of its own: ASCII's, and Unicode's general
// and CJK punctuation, guillemets and the inverted marks ("¿Sí?" -> "¿", "Sí", "?").
std::vector<std::string> split_words_and_punctuation(std::string_view text);
// Tokens joined by spaces, but none before a closing mark (. , ; : ! ? ) ] } » ” ’ …) nor after
// an opening one (( [ { « “ ‘ ¿ ¡): split_words_and_punctuation's tokens read as text again.
std::string join_words_and_punctuation(const std::vector<std::string>& tokens);

}  // namespace tapegrad::data
