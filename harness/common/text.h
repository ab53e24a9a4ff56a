// harness/common/text.h: the small string helpers the harness shares: splitting lists, parsing
// whole numbers, and showing a command line the way a person would type it.
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace bp {

// Every field between separators, empty ones included ("a,,b" is three fields).
inline std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t at = s.find(sep, start);
    out.emplace_back(s.substr(start, at - start));
    if (at == std::string_view::npos) return out;
    start = at + 1;
  }
}

// The non-empty fields of a list (a trailing comma is nothing).
inline std::vector<std::string> fields(std::string_view s, char sep) {
  std::vector<std::string> out = split(s, sep);
  std::erase(out, std::string());
  return out;
}

// A whole decimal number and nothing else ("12", "-3"; not "", "1e3", "12abc", " 1").
inline std::optional<int64_t> parse_whole(std::string_view text) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

// argv as one line a person can paste into a shell (for logs only: nothing here is ever run by a
// shell). Words of safe characters stay bare; anything else is single-quoted.
inline std::string command_line(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& a : argv) {
    bool bare = !a.empty();
    for (char c : a)
      bare &= (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              std::string_view("-_=./:,@%+").find(c) != std::string_view::npos;
    if (!out.empty()) out += ' ';
    if (bare) {
      out += a;
      continue;
    }
    out += '\'';
    for (char c : a) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += '\'';
  }
  return out;
}

}  // namespace bp
