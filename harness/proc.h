// harness/proc.h: what the harness reads from /proc about its own process and machine.
//
// Peak RSS of one benchmark: writing "5" to /proc/self/clear_refs resets the kernel's high-water
// mark (VmHWM) to the current RSS (Linux >= 4.0, proc(5)); VmHWM read after the benchmark is then
// that benchmark's peak, setup included. The whole process's peak is measured by the parent
// (harness/run.cc, wait4's ru_maxrss) and is never smaller.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

namespace bp {

inline bool proc_reset_peak_rss() {
  FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (!f) return false;
  const bool ok = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && ok;
}

// A "Vm...:  1234 kB" field of /proc/self/status in bytes, or -1 if it cannot be read.
inline int64_t proc_status_bytes(const char* field) {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  int64_t bytes = -1;
  const size_t len = std::strlen(field);
  while (std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, field, len) == 0 && line[len] == ':') {
      long long kb = 0;
      if (std::sscanf(line + len + 1, "%lld", &kb) == 1) bytes = kb * 1024;
      break;
    }
  }
  std::fclose(f);
  return bytes;
}
inline int64_t proc_peak_rss_bytes() { return proc_status_bytes("VmHWM"); }

inline std::string proc_cpu_model() {
  FILE* f = std::fopen("/proc/cpuinfo", "r");
  if (!f) return "unknown";
  char line[512];
  std::string model = "unknown";
  while (std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, "model name", 10) == 0) {
      const char* colon = std::strchr(line, ':');
      if (colon) {
        model = colon + 1;
        while (!model.empty() && (model.front() == ' ' || model.front() == '\t')) model.erase(0, 1);
        while (!model.empty() && (model.back() == '\n' || model.back() == ' ')) model.pop_back();
      }
      break;
    }
  }
  std::fclose(f);
  return model;
}

}  // namespace bp
