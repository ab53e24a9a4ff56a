// harness/driver/shared_lines.h: a file of lines that the processes of one run share, each line
// written whole by one write(2) in append mode, so that processes adding lines at once never tear
// one. The compiled mode's kernel verdicts go through one (`--verdicts=FILE`): the first process
// that times a shape (the check's) writes its verdict, and every later one reads it instead of
// timing again (engine/dialects/dialects.h says what a line holds; this file does not know).
// An unreadable or unwritable file is no error: the process keeps its verdicts to itself.
//   Tests: harness/tests/test_run.py (the verdict files a run shares).
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace bp {

class SharedLines {
 public:
  explicit SharedLines(std::string path) : path_(std::move(path)) {}
  const std::string& path() const { return path_; }

  // The whole lines after byte `offset` (0: every line so far), and `offset` moved past them. A
  // line still being written by another process has no newline yet: it is left for a later read.
  std::vector<std::string> read_after(size_t& offset) const {
    std::vector<std::string> lines;
    const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return lines;
    std::string text;
    char buf[1 << 14];
    for (ssize_t got; (got = ::pread(fd, buf, sizeof buf, off_t(offset + text.size()))) > 0;)
      text.append(buf, size_t(got));
    ::close(fd);
    size_t start = 0;
    for (size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1)
      lines.emplace_back(text, start, end - start);
    offset += start;
    return lines;
  }
  // One line, appended in one write; false if the file could not take it.
  bool append(const std::string& line) const {
    const std::string whole = line + '\n';
    const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return false;
    const bool ok = ::write(fd, whole.data(), whole.size()) == ssize_t(whole.size());
    return ::close(fd) == 0 && ok;
  }

 private:
  std::string path_;
};

}  // namespace bp
