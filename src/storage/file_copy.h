// The one routine that copies a file's bytes for storage/: exports (artifact_store.cc) and
// sessions (session_store.cc) both use it, so both keep holes and count blocks the same way.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <functional>

#include "util/result.h"

namespace sandrun::storage {

// Bytes a file occupies on its file system: st_blocks is in 512-byte units whatever the
// block size (stat(2)). A sparse file of 10 MiB with nothing written uses 0; a 1-byte file
// uses a whole block (4096 on ext4 and tmpfs). Quotas and budgets count this, not st_size.
inline uint64_t BytesOnDisk(const struct stat& st) {
  return static_cast<uint64_t>(st.st_blocks) * 512;
}

struct CopiedFile {
  uint64_t size = 0;           // bytes (st_size of the source when the copy began)
  uint64_t bytes_on_disk = 0;  // BytesOnDisk of the copy once written
  bool too_large = false;      // the source was larger than max_size: nothing was written
};

// Called with every byte of the file in order: data as read, holes as runs of zeros (so a
// hash of the stream is the hash of the file as read(2) would return it). May be empty.
using CopyObserver = std::function<void(const char* data, size_t size)>;

// Copies the regular file open at `in` into the empty file open for writing at `out`,
// keeping holes: only the data extents are read and written (lseek(2) SEEK_DATA and
// SEEK_HOLE), and a data chunk that reads as all zeros is skipped too (tmpfs reports
// written-zero pages as data), so the copy uses no more blocks than the source and often
// fewer. The copy's length is set with ftruncate(2) at the end, so a trailing hole costs
// nothing. Copies the source's first st_size bytes as of the start (the writer, a finished
// sandbox, is gone). A file system without SEEK_DATA (EINVAL) is copied densely, minus the
// all-zero chunks. When st_size > `max_size`, writes nothing and sets too_large.
// Errors: kFileLimit for ENOSPC, EDQUOT and EFBIG on the destination (the caller's
// size limit), kSystem otherwise; `path` names the file in messages. Not safe after fork.
Result<CopiedFile> CopyFileKeepingHoles(int in, int out, uint64_t max_size, const std::string& path,
                                        const CopyObserver& observe = nullptr);

}  // namespace sandrun::storage
