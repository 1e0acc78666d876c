// MountPoint: owns one mount of the daemon's mount namespace (with every mount below it) and
// detaches it once (umount2(2) MNT_DETACH), like UniqueFd for a file descriptor.
#pragma once

#include <string>
#include <utility>

#include "sys/syscalls.h"

namespace sandrun::sys {

class MountPoint {
 public:
  MountPoint() = default;
  // Takes over the mount at `path` (made by the caller).
  explicit MountPoint(std::string path) : path_(std::move(path)) {}
  MountPoint(MountPoint&& other) noexcept : path_(std::exchange(other.path_, "")) {}
  MountPoint& operator=(MountPoint&& other) noexcept {
    if (this != &other) {
      Reset();
      path_ = std::exchange(other.path_, "");
    }
    return *this;
  }
  MountPoint(const MountPoint&) = delete;
  MountPoint& operator=(const MountPoint&) = delete;
  ~MountPoint() { Reset(); }

  const std::string& path() const { return path_; }
  bool mounted() const { return !path_.empty(); }
  // Detaches the mount and everything mounted below it; errors are ignored (gone already).
  // Not child-safe.
  void Reset() {
    if (!path_.empty()) (void)Unmount(path_);
    path_.clear();
  }

 private:
  std::string path_;
};

}  // namespace sandrun::sys
