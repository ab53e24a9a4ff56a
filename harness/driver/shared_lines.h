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

#include <fstream>
#include <string>
#include <vector>

namespace bp {

class SharedLines {
 public:
  explicit SharedLines(std::string path) : path_(std::move(path)) {}
  const std::string& path() const { return path_; }

  // Every whole line so far (a line still being written by another process has no newline yet).
  std::vector<std::string> read() const {
    std::vector<std::string> lines;
    std::ifstream in(path_);
    std::string line;
    while (std::getline(in, line))
      if (!in.eof()) lines.push_back(line);
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
