// harness/files.h: the runner's reads and writes of its result files, every write checked.
//
// A result file is written to `<name>.tmp`, flushed to the disk and renamed over `<name>`: a
// reader never sees half a file, and when anything fails on the way (a full disk, a quota, a
// file-size limit, a folder made read-only) the temporary file is removed, the last good `<name>`
// stays as it was, and WriteError says which file, why, and on which filesystem.
//   Tests: harness/tests/ (a run under a file-size limit).
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

namespace bp {

namespace fs = std::filesystem;

inline std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The mount point holding `p` (the deepest existing ancestor whose parent is on another device),
// and its free space, for the one line that says which disk is full.
inline std::string filesystem_of(const fs::path& p) {
  std::error_code ec;
  fs::path at = fs::absolute(p, ec);
  while (!at.empty() && !fs::exists(at, ec) && at != at.root_path()) at = at.parent_path();
  struct stat st {};
  if (stat(at.c_str(), &st) != 0) return "?";
  for (fs::path up = at.parent_path(); up != at; at = up, up = at.parent_path()) {
    struct stat parent {};
    if (stat(up.c_str(), &parent) != 0 || parent.st_dev != st.st_dev) break;
  }
  struct statvfs vfs {};
  if (statvfs(at.c_str(), &vfs) != 0) return at.string();
  return at.string() + ", " + std::to_string(uint64_t(vfs.f_bavail) * vfs.f_frsize / 1000000) +
         " MB free";
}

struct WriteError : std::runtime_error {
  WriteError(const fs::path& path, int err)
      : std::runtime_error("cannot write " + path.string() + ": " + std::strerror(err) +
                           " (filesystem " + filesystem_of(path) + ")") {}
};

inline void write_atomically(const fs::path& p, const std::string& text) {
  const fs::path tmp = p.string() + ".tmp";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw WriteError(p, errno);
  int err = 0;
  for (size_t done = 0; done < text.size() && !err;) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno != EINTR) err = errno;
    if (n > 0) done += size_t(n);
  }
  // A full disk may only show at fsync or close (delayed allocation): both are checked.
  if (!err && fsync(fd) != 0) err = errno;
  if (close(fd) != 0 && !err) err = errno;
  if (!err && rename(tmp.c_str(), p.c_str()) != 0) err = errno;
  if (err) {
    unlink(tmp.c_str());
    throw WriteError(p, err);
  }
}

}  // namespace bp
